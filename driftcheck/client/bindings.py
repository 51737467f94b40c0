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

import ast

from driftcheck.client.index import ClientIndex, FunctionInfo, ModuleInfo, TypeRef
from driftcheck.client.types import TypeInferrer


def apply_bindings(
    index: ClientIndex, types: TypeInferrer, mixins: dict[str, str] | None = None
) -> None:
    """Record host mix-ins, then MethodType bindings, on the client index."""
    mixins = mixins if mixins is not None else types.bindings.mixins
    for call, _func, _module in index.binding_calls:
        for kw in call.keywords:
            if kw.arg is None or kw.arg not in mixins:
                continue
            if isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                cls = index.classes.get(kw.value.value)
                host_cls = mixins[kw.arg]
                if cls is not None and host_cls not in cls.extra_bases:
                    cls.extra_bases.append(host_cls)
    for call, func, module in index.binding_calls:
        if len(call.args) >= 2 and "types.MethodType" in module.qualified(call.func):
            _bind(index, types, module, func, call.args[0], call.args[1])
    for node, _func, module in index.binding_assigns:
        made = node.value
        if not isinstance(made, ast.Call) or len(made.args) < 2:
            continue
        if "types.MethodType" not in module.qualified(made.func):
            continue
        for target in node.targets:
            if isinstance(target, ast.Attribute):
                bound = _function(index, module, made.args[0])
                if bound is not None:
                    bound.replaces.append(target.attr)


def _function(index: ClientIndex, module: ModuleInfo, expr: ast.AST) -> FunctionInfo | None:
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
    func_expr: ast.AST,
    obj_expr: ast.AST,
) -> None:
    func = _function(index, module, func_expr)
    if func is None:
        return
    self_type = types.infer(obj_expr, scope, module)
    if self_type is not None and self_type not in func.bound_self:
        func.bound_self.append(self_type)
    elif self_type is None:
        func.bound_self.append(TypeRef("unknown", ""))
