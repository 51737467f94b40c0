"""Receiver bindings that plain code does not show.

* ``types.MethodType(func, obj)`` binds ``func``'s first parameter to ``obj``'s type, and
  ``obj.name = types.MethodType(func, obj)`` makes ``func`` stand in for the host's ``name``.
* A client class named by a dotted string that the host mixes into one of its classes
  (vLLM's ``worker_extension_cls``) gets that host class as an extra base. Which keyword mixes
  into which host class is host knowledge and lives in rule files (``[binding]`` tables).

Works on the calls and assignments the index pass collected: no further walk of the code.
Mix-ins are applied for the whole client first, since a ``MethodType`` binding may depend on them.
"""

from __future__ import annotations

import libcst as cst

from driftcheck.client.types import ClientIndex, FunctionInfo, ModuleInfo, TypeInferrer, TypeRef


def apply_bindings(
    index: ClientIndex, types: TypeInferrer, mixins: dict[str, str] | None = None
) -> None:
    """Record host mix-ins, then MethodType bindings, on the client index."""
    from driftcheck.rules import binding_mixins

    mixins = mixins if mixins is not None else binding_mixins(types.host.name)
    for call, _func, _module in index.binding_calls:
        for arg in call.args:
            if arg.keyword is None or arg.keyword.value not in mixins:
                continue
            if isinstance(arg.value, cst.SimpleString) and isinstance(
                arg.value.evaluated_value, str
            ):
                cls = index.classes.get(arg.value.evaluated_value)
                host_cls = mixins[arg.keyword.value]
                if cls is not None and host_cls not in cls.extra_bases:
                    cls.extra_bases.append(host_cls)
    for call, func, module in index.binding_calls:
        if len(call.args) >= 2 and "types.MethodType" in module.qualified(call.func):
            _bind(index, types, module, func, call.args[0].value, call.args[1].value)
    for node, _func, module in index.binding_assigns:
        call = node.value
        if not isinstance(call, cst.Call) or len(call.args) < 2:
            continue
        if "types.MethodType" not in module.qualified(call.func):
            continue
        for target in node.targets:
            if isinstance(target.target, cst.Attribute):
                bound = _function(index, module, call.args[0].value)
                if bound is not None:
                    bound.replaces.append(target.target.attr.value)


def _function(
    index: ClientIndex, module: ModuleInfo, expr: cst.BaseExpression
) -> FunctionInfo | None:
    for name in module.qualified(expr):
        func = index.functions.get(name) or index.functions.get(f"{module.name}.{name}")
        if func:
            return func
    return None


def _bind(
    index: ClientIndex,
    types: TypeInferrer,
    module: ModuleInfo,
    scope: FunctionInfo | None,
    func_expr: cst.BaseExpression,
    obj_expr: cst.BaseExpression,
) -> None:
    func = _function(index, module, func_expr)
    if func is None:
        return
    self_type = types.infer(obj_expr, scope, module)
    if self_type is not None and self_type not in func.bound_self:
        func.bound_self.append(self_type)
    elif self_type is None:
        func.bound_self.append(TypeRef("unknown", ""))
