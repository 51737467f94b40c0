"""Every use of the host in the client, as :class:`Use` records (libcst, never imported).

Kinds: ``import``, ``attribute`` (a module attribute chain or a member read off a typed
receiver), ``call`` (with its argument shape and how its result is used), ``subclass``,
``override`` (a client method overriding a host method), ``string-ref`` (a dotted path or a
method name given as a string to the host).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import PositionProvider

from driftcheck.client.types import (
    ClassInfo,
    ClientIndex,
    FunctionInfo,
    ModuleInfo,
    TypeInferrer,
)
from driftcheck.host.signature import CallShape


@dataclass
class Use:
    """One place where the client touches the host.

    Attributes:
        kind: import / attribute / call / subclass / override / string-ref.
        file: Client file, relative to the client's root.
        line: 1-based line.
        column: 1-based column.
        symbol: Host dotted path as the client reaches it (``Class.member`` for members).
        receiver: Host class path for a member of a typed receiver.
        member: The member name for receiver uses and overrides.
        shape: Arguments of a call.
        result: How a call's result is used (discarded, assigned, returned, subscripted,
            attribute, truth-tested, passed, iterated, used).
        receiver_expr: Source of the receiver expression (``self.executor``).
        scope: Qualified name of the enclosing client function.
        order: Position of the use within the file (for "followed by" conditions).
        params: For overrides: the client function's parameters as a signature-like list.
        via: How the receiver type was found, when not from plain code (worker extension, …).
    """

    kind: str
    file: str
    line: int
    column: int
    symbol: str
    receiver: str | None = None
    member: str | None = None
    shape: CallShape | None = None
    result: str | None = None
    receiver_expr: str | None = None
    scope: str = ""
    order: int = 0
    end_line: int = 0
    params: list | None = None
    via: str | None = None
    in_guard: bool = False
    result_indexed: bool = False
    holder: str | None = None
    node: cst.CSTNode | None = field(default=None, repr=False, compare=False)


def code_of(node: cst.CSTNode) -> str:
    """Source text of a node."""
    return cst.Module(body=[]).code_for_node(node)


class UseCollector(cst.CSTVisitor):
    """Collects the uses of one client module."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(
        self, module: ModuleInfo, index: ClientIndex, types: TypeInferrer, roots: set[str]
    ) -> None:
        self.module = module
        self.index = index
        self.types = types
        self.roots = roots
        self.uses: list[Use] = []
        self.func_stack: list[FunctionInfo] = []
        self.class_stack: list[ClassInfo] = []
        self.guard_depth = 0
        self.guarded_symbols: set[str] = set()
        self._positions = module.wrapper.resolve(PositionProvider)
        # Parents are recorded during this visit (cheaper than a ParentNodeProvider pass).
        self._parents: dict[cst.CSTNode, cst.CSTNode] = {}
        self._stack: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self._stack:
            self._parents[node] = self._stack[-1]
        self._stack.append(node)
        return super().on_visit(node)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        super().on_leave(original_node)
        self._stack.pop()

    # -- helpers ---------------------------------------------------------------------------
    def _host(self, name: str) -> bool:
        return name.split(".", 1)[0] in self.roots

    def _add(self, kind: str, node: cst.CSTNode, symbol: str, **kw: object) -> Use:
        pos = self._positions[node]
        guarded = self.guard_depth > 0
        if kind == "import" and guarded:
            self.guarded_symbols.add(symbol)
        elif any(symbol == g or symbol.startswith(g + ".") for g in self.guarded_symbols):
            guarded = True  # a name the client imports behind try/except ImportError
        use = Use(
            kind=kind,
            file=self.module.file,
            line=pos.start.line,
            column=pos.start.column + 1,
            end_line=pos.end.line,
            symbol=symbol,
            scope=self.func_stack[-1].qualname if self.func_stack else self.module.name,
            order=len(self.uses),
            in_guard=guarded,
            node=node,
            **kw,  # type: ignore[arg-type]
        )
        self.uses.append(use)
        return use

    @property
    def func(self) -> FunctionInfo | None:
        return self.func_stack[-1] if self.func_stack else None

    # -- scopes ----------------------------------------------------------------------------
    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        prefix = self.class_stack[-1].qualname if self.class_stack else self.module.name
        info = self.index.classes.get(f"{prefix}.{node.name.value}")
        if info is None:
            return
        self.class_stack.append(info)
        for arg in node.bases:
            for name in self.module.qualified(arg.value):
                if self._host(name):
                    self._add("subclass", arg.value, name)
        host_bases = self.types.host_bases(info.qualname)
        if host_bases:
            for mname, method in info.methods.items():
                if mname.startswith("__") and mname != "__init__":
                    continue
                for base in host_bases:
                    if not self._host_defines(base, mname):
                        continue
                    self._add(
                        "override",
                        method.node.name,
                        f"{base}.{mname}",
                        receiver=base,
                        member=mname,
                        params=_client_params(method.node),
                    )

    def _host_defines(self, cls_path: str, member: str) -> bool:
        from driftcheck.host.api import Found

        cls = self.types.host.resolve(cls_path)
        return isinstance(cls, Found) and isinstance(
            self.types.host.class_member(cls, member), Found
        )

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        if self.class_stack and self.class_stack[-1].node is original_node:
            self.class_stack.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        info = self.index.function_of_node.get(node)
        if info is not None:
            self.func_stack.append(info)
            for name in info.replaces:
                for bound in info.bound_self:
                    cls = self.types.host_class(bound)
                    if cls is not None and self._host_defines(cls.path, name):
                        self._add(
                            "override",
                            node.name,
                            f"{cls.path}.{name}",
                            receiver=cls.path,
                            member=name,
                            params=_client_params(node),
                            via=f"bound with types.MethodType to {cls.path.rsplit('.', 1)[-1]}",
                        )

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        if self.func_stack and self.func_stack[-1].node is original_node:
            self.func_stack.pop()

    def visit_Try(self, node: cst.Try) -> None:
        if any(_catches_import_or_attr(h) for h in node.handlers):
            self.guard_depth += 1

    def leave_Try(self, original_node: cst.Try) -> None:
        if any(_catches_import_or_attr(h) for h in original_node.handlers):
            self.guard_depth -= 1

    # -- imports ---------------------------------------------------------------------------
    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            name = code_of(alias.name)
            if self._host(name):
                self._add("import", alias.name, name)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None:
            return
        base = code_of(node.module)
        if not self._host(base):
            return
        if isinstance(node.names, cst.ImportStar):
            self._add("import", node.module, base)
            return
        for alias in node.names:
            self._add("import", alias.name, f"{base}.{code_of(alias.name)}")

    # -- expressions -----------------------------------------------------------------------
    def visit_Attribute(self, node: cst.Attribute) -> None:
        parent = self._parents.get(node)
        if isinstance(parent, cst.Call) and parent.func is node:
            return  # recorded as a call
        if _chain_root_is_import(node, self.module):
            if isinstance(parent, cst.Attribute) and parent.value is node:
                return  # only the outermost attribute of a module chain is recorded
            for name in self.module.qualified(node):
                if self._host(name):
                    self._add("attribute", node, name)
                    return
            return
        if _is_store(node, self._parents):
            return
        self._member_use("attribute", node, node)

    def _member_use(
        self, kind: str, attr: cst.Attribute, at: cst.CSTNode, **kw: object
    ) -> Use | None:
        owner = self.types.infer(attr.value, self.func, self.module)
        if owner is None:
            return None
        cls = self.types.host_class(owner)
        if cls is None:
            return None
        member = attr.attr.value
        if owner.kind == "client":
            info = self.index.classes.get(owner.path)
            if info is not None and _client_defines(self.index, info, member):
                return None
        return self._add(
            kind,
            at,
            f"{cls.path}.{member}",
            receiver=cls.path,
            member=member,
            receiver_expr=code_of(attr.value),
            via=self._via(attr.value),
            holder=self._holder(attr.value),
            **kw,
        )

    def _holder(self, receiver: cst.BaseExpression) -> str | None:
        """For ``a.b.member``: the host attribute ``A.b`` the receiver was read from."""
        if not isinstance(receiver, cst.Attribute):
            return None
        owner = self.types.host_class(self.types.infer(receiver.value, self.func, self.module))
        return f"{owner.path}.{receiver.attr.value}" if owner is not None else None

    def visit_Call(self, node: cst.Call) -> None:
        shape = CallShape(
            positional=sum(1 for a in node.args if a.keyword is None and a.star == ""),
            keywords=tuple(a.keyword.value for a in node.args if a.keyword is not None),
            star=any(a.star == "*" for a in node.args),
            double_star=any(a.star == "**" for a in node.args),
        )
        result = _result_usage(node, self._parents)
        indexed = result == "subscripted" or (
            result == "assigned" and self._assigned_name_indexed(node)
        )
        for name in self.module.qualified(node.func):
            if self._host(name) and (
                not isinstance(node.func, cst.Attribute)
                or _chain_root_is_import(node.func, self.module)
            ):
                self._add("call", node, name, shape=shape, result=result, result_indexed=indexed)
                self._string_args(node, name)
                return
        if isinstance(node.func, cst.Attribute):
            use = self._member_use(
                "call", node.func, node, shape=shape, result=result, result_indexed=indexed
            )
            if use is not None:
                self._string_args(node, use.symbol)

    def _via(self, receiver: cst.BaseExpression) -> str | None:
        """How the root of a receiver chain got a host type, when plain code does not show it."""
        root = receiver
        while isinstance(root, cst.Attribute):
            root = root.value
        func = self.func
        if not isinstance(root, cst.Name) or func is None:
            return None
        params = [*func.node.params.posonly_params, *func.node.params.params]
        if not params or params[0].name.value != root.value:
            return None
        bound = [b for b in func.bound_self if b.kind != "unknown"]
        if bound:
            return (
                f"{root.value} is bound with types.MethodType to {bound[0].path.rsplit('.', 1)[-1]}"
            )
        info = self.index.classes.get(func.class_name or "")
        if info is not None and info.extra_bases:
            return f"{info.qualname} is mixed into {info.extra_bases[0]}"
        return None

    def _assigned_name_indexed(self, node: cst.Call) -> bool:
        """For ``x = call(...)``: is ``x`` subscripted in the same function?"""
        parent = self._parents.get(node)
        target = None
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
            target = parent.targets[0].target
        elif isinstance(parent, cst.AnnAssign | cst.NamedExpr):
            target = parent.target
        if not isinstance(target, cst.Name):
            return False
        return target.value in (self.func.subscripted if self.func else self.module.subscripted)

    def _string_args(self, node: cst.Call, callee: str) -> None:
        """Record strings passed to the host that name code: dotted paths (any argument) and
        method names (first positional argument or ``method=``), for dispatch checks."""
        for i, arg in enumerate(node.args):
            if not isinstance(arg.value, cst.SimpleString):
                continue
            value = arg.value.evaluated_value
            if not isinstance(value, str):
                continue
            first = (i == 0 and arg.keyword is None) or (
                arg.keyword and arg.keyword.value == "method"
            )
            if _dotted(value) or (first and value.isidentifier()):
                self._add("string-ref", arg.value, callee, member=value)


def _dotted(text: str) -> bool:
    parts = text.split(".")
    return len(parts) > 1 and all(p.isidentifier() for p in parts)


def _client_defines(index: ClientIndex, info: ClassInfo, member: str) -> bool:
    todo, seen = [info], set()
    while todo:
        cur = todo.pop()
        if cur.qualname in seen:
            continue
        seen.add(cur.qualname)
        if member in cur.methods or member in cur.attrs:
            return True
        if any(_assigns_class_attr(cur.node, member) for _ in [0]):
            return True
        todo.extend(index.classes[b] for b in cur.bases if b in index.classes)
    return False


def _assigns_class_attr(node: cst.ClassDef, name: str) -> bool:
    for stmt in node.body.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Assign):
                    if any(
                        isinstance(t.target, cst.Name) and t.target.value == name
                        for t in small.targets
                    ):
                        return True
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                    if small.target.value == name:
                        return True
    return False


def _chain_root_is_import(node: cst.Attribute, module: ModuleInfo) -> bool:
    """True when the attribute chain starts at an imported name (not a local variable)."""
    return module.names.imported_root(node)


def _is_store(node: cst.CSTNode, parents: dict) -> bool:
    parent = parents.get(node)
    if isinstance(parent, cst.AssignTarget) and parent.target is node:
        return True
    if isinstance(parent, cst.AnnAssign) and parent.target is node:
        return True
    if isinstance(parent, cst.AugAssign) and parent.target is node:
        return True
    return False


def _result_usage(node: cst.Call, parents: dict) -> str:
    parent = parents.get(node)
    if isinstance(parent, cst.Expr):
        return "discarded"
    if isinstance(parent, cst.Await):
        return _result_usage(parent, parents)  # type: ignore[arg-type]
    if isinstance(parent, cst.Assign | cst.AnnAssign | cst.NamedExpr):
        return "assigned"
    if isinstance(parent, cst.Return):
        return "returned"
    if isinstance(parent, cst.Subscript) and parent.value is node:
        return "subscripted"
    if isinstance(parent, cst.Attribute) and parent.value is node:
        return "attribute"
    if isinstance(
        parent, cst.If | cst.While | cst.IfExp | cst.BooleanOperation | cst.UnaryOperation
    ):
        return "truth-tested"
    if isinstance(parent, cst.Arg):
        return "passed"
    if isinstance(parent, cst.For | cst.CompFor):
        return "iterated"
    return "used"


def _catches_import_or_attr(handler: cst.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    text = code_of(handler.type)
    return any(
        n in text
        for n in ("ImportError", "ModuleNotFoundError", "AttributeError", "TypeError", "Exception")
    )


def _client_params(node: cst.FunctionDef) -> list[tuple[str, str, bool]]:
    """(name, kind, has_default) of a client function's parameters."""
    p = node.params
    out: list[tuple[str, str, bool]] = []
    out += [(x.name.value, "positional_only", x.default is not None) for x in p.posonly_params]
    out += [(x.name.value, "positional_or_keyword", x.default is not None) for x in p.params]
    if isinstance(p.star_arg, cst.Param):
        out.append((p.star_arg.name.value, "var_positional", True))
    out += [(x.name.value, "keyword_only", x.default is not None) for x in p.kwonly_params]
    if p.star_kwarg is not None:
        out.append((p.star_kwarg.name.value, "var_keyword", True))
    return out
