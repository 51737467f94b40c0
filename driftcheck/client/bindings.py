"""Receiver bindings that plain code does not show.

* ``types.MethodType(func, obj)`` binds ``func``'s first parameter to ``obj``'s type.
* A client class named by a dotted string that the host mixes into one of its classes
  (vLLM's ``worker_extension_cls``) gets that host class as an extra base. Which keyword mixes
  into which host class is host knowledge and lives in rule files (``[binding]`` tables).
"""

from __future__ import annotations

import libcst as cst

from driftcheck.client.types import ClientIndex, FunctionInfo, TypeInferrer, TypeRef


def apply_bindings(
    index: ClientIndex, types: TypeInferrer, mixins: dict[str, str] | None = None
) -> None:
    """Record MethodType bindings and host mix-ins on the client index."""
    from driftcheck.rules import binding_mixins

    mixins = mixins if mixins is not None else binding_mixins(types.host.name)
    for phase in ("mixins", "method-type"):
        for module in index.modules.values():
            _BindingFinder(index, types, module, mixins, phase).run()


class _BindingFinder(cst.CSTVisitor):
    def __init__(
        self,
        index: ClientIndex,
        types: TypeInferrer,
        module: object,
        mixins: dict[str, str],
        phase: str,
    ) -> None:
        self.phase = phase
        self.index = index
        self.types = types
        self.module = module
        self.mixins = mixins
        self.func_stack: list[FunctionInfo] = []

    def run(self) -> None:
        self.module.wrapper.module.visit(self)  # type: ignore[attr-defined]

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        info = self.index.function_of_node.get(node)
        if info is not None:
            self.func_stack.append(info)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        if self.func_stack and self.func_stack[-1].node is original_node:
            self.func_stack.pop()

    def visit_Call(self, node: cst.Call) -> None:
        names = self.module.qualified(node.func)  # type: ignore[attr-defined]
        if self.phase == "method-type":
            if "types.MethodType" in names and len(node.args) >= 2:
                self._method_type(node.args[0].value, node.args[1].value)
            return
        if False:
            self._method_type(node.args[0].value, node.args[1].value)
        for arg in node.args:
            if arg.keyword is None or arg.keyword.value not in self.mixins:
                continue
            if isinstance(arg.value, cst.SimpleString) and isinstance(
                arg.value.evaluated_value, str
            ):
                cls = self.index.classes.get(arg.value.evaluated_value)
                host_cls = self.mixins[arg.keyword.value]
                if cls is not None and host_cls not in cls.extra_bases:
                    cls.extra_bases.append(host_cls)

    def visit_Assign(self, node: cst.Assign) -> None:
        """``obj.name = types.MethodType(func, obj)`` replaces the host's ``name`` on ``obj``."""
        if self.phase != "method-type" or not isinstance(node.value, cst.Call):
            return
        call = node.value
        if "types.MethodType" not in self.module.qualified(call.func) or len(call.args) < 2:  # type: ignore[attr-defined]
            return
        for target in node.targets:
            if isinstance(target.target, cst.Attribute):
                func = self._function(call.args[0].value)
                if func is not None:
                    func.replaces.append(target.target.attr.value)

    def _function(self, func_expr: cst.BaseExpression) -> FunctionInfo | None:
        for name in self.module.qualified(func_expr):  # type: ignore[attr-defined]
            func = self.index.functions.get(name) or self.index.functions.get(
                f"{self.module.name}.{name}"  # type: ignore[attr-defined]
            )
            if func:
                return func
        return None

    def _method_type(self, func_expr: cst.BaseExpression, obj_expr: cst.BaseExpression) -> None:
        func = self._function(func_expr)
        if func is None:
            return
        self_type = self.types.infer(
            obj_expr, self.func_stack[-1] if self.func_stack else None, self.module
        )  # type: ignore[arg-type]
        if self_type is not None and self_type not in func.bound_self:
            func.bound_self.append(self_type)
        elif self_type is None:
            func.bound_self.append(TypeRef("unknown", ""))
