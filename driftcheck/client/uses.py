"""Every use of the host in the client, as :class:`Use` records (read with ``ast``, never
imported).

Kinds: ``import``, ``attribute`` (a module attribute chain or a member read off a typed
receiver), ``call`` (with its argument shape and how its result is used), ``subclass``,
``override`` (a client method overriding a host method), ``string-ref`` (a dotted path or a
method name given as a string to the host).
"""

from __future__ import annotations

import ast
from dataclasses import replace
from typing import Any

from driftcheck.client.gate_reader import GateReader
from driftcheck.client.gating import GatedWalker
from driftcheck.client.guards import guards_of
from driftcheck.client.index import (
    ClassInfo,
    ClientIndex,
    FunctionInfo,
    ModuleInfo,
)
from driftcheck.client.kwargs import KwargsFlow
from driftcheck.client.members import MemberUses
from driftcheck.client.names import place
from driftcheck.client.types import TypeInferrer
from driftcheck.client.use import Use
from driftcheck.client.use_syntax import (
    client_params,
    dotted,
    literal,
    on_false,
    own_init_vars,
    reads,
    result_usage,
    unsubscripted,
)
from driftcheck.gates import all_of
from driftcheck.host.signature import CallShape


class UseCollector(MemberUses, KwargsFlow, GatedWalker):
    """Collects the uses of one client module."""

    def __init__(
        self,
        module: ModuleInfo,
        index: ClientIndex,
        types: TypeInferrer,
        roots: set[str],
        gates: GateReader | None = None,
    ) -> None:
        super().__init__(gates)
        self.module = module
        self.source = module.source
        self.index = index
        self.types = types
        self.roots = roots
        self.uses: list[Use] = []
        self.func_stack: list[FunctionInfo] = []
        self.class_stack: list[ClassInfo] = []

    def run(self) -> list[Use]:
        """Walk the module; its uses in source order."""
        self.walk(self.module.tree)
        return self.uses

    # -- helpers ---------------------------------------------------------------------------
    def _host(self, name: str) -> bool:
        return name.split(".", 1)[0] in self.roots

    def _add(
        self,
        kind: str,
        node: ast.AST,
        symbol: str,
        *,
        at: tuple[int, int] | None = None,
        width: int = 0,
        **kw: Any,
    ) -> Use:
        if callable(kw.get("shape")):  # a call's shape, read once the call is a use
            kw["shape"] = kw["shape"]()
        if kw.get("receiver") is not None and "guards" not in kw:
            kw["guards"] = guards_of(node, self.parents)
        fallback = self.fallback_line(node, symbol) if kind == "call" and self.no_fallback else 0
        line, column = at if at is not None else self.source.start(node)
        end_line, end_column = self.source.end(node) if at is None else (line, column + width)
        use = Use(
            kind=kind,
            file=self.module.file,
            line=line,
            column=column + 1,
            end_line=end_line,
            end_column=end_column + 1 if end_column else 0,
            symbol=symbol,
            scope=self.func_stack[-1].qualname if self.func_stack else self.module.name,
            order=len(self.uses),
            gate=self.gate_for(
                symbol, member=kw.get("receiver") is not None, kind=kind, fallback=fallback
            ),
            none_fallback=fallback,
            **kw,
        )
        self.uses.append(use)
        if kind != "import" and kw.get("receiver") is None:
            base = use.gate
            for i, (alt, gate) in enumerate(self.alternatives(node, symbol)):
                copy = use if i == 0 else replace(use, order=len(self.uses))
                copy.symbol = alt
                copy.gate = all_of([g for g in (base, gate) if g is not None])
                if i:
                    self.uses.append(copy)
        return use

    @property
    def func(self) -> FunctionInfo | None:
        return self.func_stack[-1] if self.func_stack else None

    # -- scopes ----------------------------------------------------------------------------
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        prefix = self.class_stack[-1].qualname if self.class_stack else self.module.name
        info = self.index.classes.get(f"{prefix}.{node.name}")
        if info is None:
            return
        self.class_stack.append(info)
        for base in node.bases:
            for name in self.module.qualified(base):
                if self._host(name):
                    self._add("subclass", base, name, reads=reads(unsubscripted(base)))
        host_bases = self.types.host_bases(info.qualname, overriding=True)
        self._declarations(node, host_bases)
        if host_bases:
            for mname, method in info.methods.items():
                if mname.startswith("__") and mname not in ("__init__", "__post_init__"):
                    continue
                for base_path in host_bases:
                    # A host dataclass calls ``__post_init__`` with its ``InitVar``\ s whether
                    # or not it defines one itself.
                    post_init = mname == "__post_init__"
                    if not post_init and not self._host_defines(base_path, mname):
                        continue
                    self._add(
                        "override",
                        method.node,
                        f"{base_path}.{mname}",
                        at=self.source.def_name(method.node),
                        width=len(mname),
                        receiver=base_path,
                        member=mname,
                        params=client_params(method.node),
                        init_vars=own_init_vars(info.node) if post_init else (),
                    )

    def _declarations(self, node: ast.ClassDef, host_bases: list[str]) -> None:
        """The hook names a class body declares (``__get_validators__``, ``__root__``): a host
        may look them up by string on any class it is given (``checks/class_declarations``);
        and, in a class of a host base, its inner classes' options (``Meta.index_together``)."""
        from driftcheck.host.class_hooks import is_host_hook

        owner = host_bases[0] if host_bases else sorted(self.roots)[0]
        info = self.class_stack[-1]
        own = self.types.host_bases(info.qualname, mixed=False)
        if own:
            self._options(node, own[0])
            self._unannotated(node, own[0], self.types.annotated_in_bases(info.qualname))
        for stmt in node.body:
            names: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef | ast.Name]] = []
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                names.append((stmt.name, stmt))
            elif isinstance(stmt, ast.Assign):
                names += [(t.id, t) for t in stmt.targets if isinstance(t, ast.Name)]
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                names.append((stmt.target.id, stmt.target))
            for name, where in names:
                if not is_host_hook(name):
                    continue
                at = self.source.def_name(where) if not isinstance(where, ast.Name) else None
                self._add(
                    "declaration",
                    where,
                    f"{owner}.{name}",
                    at=at,
                    width=len(name) if at else 0,
                    member=name,
                    receiver_expr=node.name,
                )

    def _options(self, node: ast.ClassDef, owner: str) -> None:
        """Each inner class of a host class (``class Config:``, result ``inner-class``: the host
        may read or warn about the class itself) and each option it sets (``class Meta: ordering
        = ...``), a ``declaration`` use whose member is ``Inner.option``: the host reads it by name."""
        for inner in node.body:
            if not isinstance(inner, ast.ClassDef):
                continue
            self._add(
                "declaration",
                inner,
                f"{owner}.{inner.name}",
                at=self.source.class_name(inner),
                width=len(inner.name),
                member=inner.name,
                receiver_expr=node.name,
                result="inner-class",
            )
            for stmt in inner.body:
                targets: list[ast.expr] = []
                if isinstance(stmt, ast.Assign):
                    targets = stmt.targets
                elif isinstance(stmt, ast.AnnAssign):
                    targets = [stmt.target]
                for t in targets:
                    if isinstance(t, ast.Name) and not t.id.startswith("_"):
                        self._add(
                            "declaration",
                            t,
                            f"{owner}.{inner.name}.{t.id}",
                            member=f"{inner.name}.{t.id}",
                            receiver_expr=node.name,
                        )

    def _unannotated(self, node: ast.ClassDef, owner: str, annotated: set[str]) -> None:
        """Each public class attribute assigned a value without an annotation (``name =
        Field(...)``, ``size = 3``): a host's class machinery may infer a field from it, or
        reject it. Descriptors and names of functions are left out (a host skips those). And
        each field annotated ``Optional[X]`` without a value: whether it is required is the
        host's choice (pydantic 1 defaults it to None, pydantic 2 requires it; a rule says)."""
        for stmt in node.body:
            if not isinstance(stmt, ast.Assign) or not _plain_value(stmt.value):
                continue
            for t in stmt.targets:
                if isinstance(t, ast.Name) and not t.id.startswith("_") and t.id not in annotated:
                    self._add(
                        "declaration",
                        t,
                        f"{owner}.{t.id}",
                        member=t.id,
                        receiver_expr=node.name,
                        result="unannotated",
                    )
        for stmt in node.body:
            if (
                isinstance(stmt, ast.AnnAssign)
                and stmt.value is None
                and isinstance(stmt.target, ast.Name)
                and not stmt.target.id.startswith("_")
                and _optional(stmt.annotation)
            ):
                self._add(
                    "declaration",
                    stmt.target,
                    f"{owner}.{stmt.target.id}",
                    member=stmt.target.id,
                    receiver_expr=node.name,
                    result="optional-without-default",
                )

    def _host_defines(self, cls_path: str, member: str) -> bool:
        from driftcheck.host.api import Found

        cls = self.types.host.resolve(cls_path)
        return isinstance(cls, Found) and isinstance(
            self.types.host.class_member(cls, member), Found
        )

    def leave_ClassDef(self, node: ast.ClassDef) -> None:
        self.pop_tails(node)
        if self.class_stack and self.class_stack[-1].node is node:
            self.class_stack.pop()

    def _decorators(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        """``@validate_arguments``: a bare host name as a decorator is a call of it."""
        for deco in node.decorator_list:
            if not isinstance(deco, ast.Name):
                continue
            for name in self.module.qualified(deco):
                if self._host(name):
                    shape = CallShape(positional=1, keywords=())
                    self._add("call", deco, name, shape=shape, result="used")
                    break

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._decorators(node)
        info = self.index.function_of_node.get(node)
        if info is not None:
            self.func_stack.append(info)
            for name in info.replaces:
                for bound in info.bound_self:
                    cls = self.types.host_class(bound)
                    if cls is not None and self._host_defines(cls.path, name):
                        self._add(
                            "override",
                            node,
                            f"{cls.path}.{name}",
                            at=self.source.def_name(node),
                            width=len(node.name),
                            receiver=cls.path,
                            member=name,
                            params=client_params(node),
                            via=f"bound with types.MethodType to {cls.path.rsplit('.', 1)[-1]}",
                        )

    def leave_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.pop_tails(node)
        if self.func_stack and self.func_stack[-1].node is node:
            self.func_stack.pop()

    visit_AsyncFunctionDef = visit_FunctionDef
    leave_AsyncFunctionDef = leave_FunctionDef

    # -- imports ---------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if self._host(alias.name):
                self._add("import", alias, alias.name, statement=node.lineno)
                if not self.func_stack and alias.asname:
                    self.record_binding(alias.asname, alias.name)
            else:
                self.record_import_site(alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = self.module.names.from_base(node)
        if base and not self._host(base):
            self.record_import_site(base, [alias.name for alias in node.names])
        if node.level or node.module is None:
            return
        base = node.module
        if not self._host(base):
            return
        if any(alias.name == "*" for alias in node.names):
            self._add(
                "import",
                node,
                base,
                at=self.source.from_module(node),
                width=len(base),
                statement=node.lineno,
            )
            return
        for alias in node.names:
            self._add("import", alias, f"{base}.{alias.name}", statement=node.lineno)
            if not self.func_stack:
                self.record_binding(alias.asname or alias.name, f"{base}.{alias.name}")

    # -- expressions -----------------------------------------------------------------------
    def visit_Attribute(self, node: ast.Attribute) -> None:
        parent = self.parents.get(node)
        if isinstance(parent, ast.Call) and parent.func is node:
            return  # recorded as a call
        if self.module.names.imported_root(node):
            if isinstance(parent, ast.Attribute) and parent.value is node:
                return  # only the outermost attribute of a module chain is recorded
            store = isinstance(node.ctx, ast.Store) and not isinstance(parent, ast.AugAssign)
            for name in self.module.qualified(node):
                if self._host(name):
                    self._add("attribute", node, name, reads=reads(node), store=store)
                    return
            return
        if isinstance(node.ctx, ast.Store):
            return
        self._member_use("attribute", node, node)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.track_assign(node)

    def _literal(self, node: ast.expr) -> str | None:
        """A literal's text, also through a local of this function bound once to one."""
        if isinstance(node, ast.Name) and self.func is not None:
            values = self.func.locals.get(node.id, [])
            if len(values) == 1 and node.id not in self.func.params:
                return literal(values[0])
        return literal(node)

    def _explicit_self(self, node: ast.Call) -> bool:
        """``Base.method(self, a, b)`` in a method of a class that names ``Base`` among its
        bases: the old-style parent call, whose first argument is the host method's ``self``."""
        func = self.func
        if (
            func is None
            or func.class_name is None
            or not isinstance(node.func, ast.Attribute)
            or not node.args
            or not isinstance(node.args[0], ast.Name)
        ):
            return False
        cls = self.index.classes.get(func.class_name)
        args = func.node.args
        first = (*args.posonlyargs, *args.args)[:1]
        plain = not any(
            isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod")
            for d in func.node.decorator_list
        )
        return (
            cls is not None
            and plain
            and bool(first)
            and node.args[0].id == first[0].arg
            and any(n in cls.bases for n in self.module.qualified(node.func.value))
        )

    def visit_Delete(self, node: ast.Delete) -> None:
        self.track_delete(node)

    def visit_Call(self, node: ast.Call) -> None:
        self.track_method(node)
        positional = [a for a in node.args if not isinstance(a, ast.Starred)]
        if self._explicit_self(node):
            positional = positional[1:]  # ``Base.method(self, ...)``: self fills the host's self
        made: list[CallShape] = []

        def shape() -> CallShape:  # read only for a call that is a use (most are not)
            if not made:
                made.append(self._shape(node, positional))
            return made[0]

        if self._setattr(node):
            return
        result = result_usage(node, self.parents)
        indexed = result == "subscripted" or (
            result == "assigned" and self._assigned_name_indexed(node)
        )
        qualified = self.module.qualified(node.func)
        for name in qualified:
            if self._host(name) and (
                not isinstance(node.func, ast.Attribute)
                or self.module.names.imported_root(node.func)
            ):
                self._add(
                    "call",
                    node,
                    name,
                    shape=shape(),
                    result=result,
                    result_indexed=indexed,
                    reads=reads(node.func),
                    arg_classes=self._arg_classes(positional),
                    on_false=on_false(node, self.parents) if result == "truth-tested" else None,
                )
                self._string_args(node, name)
                return
        if isinstance(node.func, ast.Attribute):
            use = self._member_use(
                "call", node.func, node, shape=shape, result=result, result_indexed=indexed
            )  # the shape read when the member is the host's
            if use is not None:
                self._string_args(node, use.symbol)
                return
        for name in qualified:  # ``MySettings(...)`` of a host class
            if name in self.index.classes:
                host_init = self.types.inherited_host_init(name)
                if host_init is not None:
                    self._add(
                        "call",
                        node,
                        host_init,
                        shape=shape(),
                        result=result,
                        result_indexed=indexed,
                        via=f"{name.rsplit('.', 1)[-1]} inherits its __init__",
                    )
                return

    def _shape(self, node: ast.Call, positional: list[ast.expr]) -> CallShape:
        """The argument shape of a call whose positional arguments (those the host's
        parameters take) are ``positional``."""
        named = [k for k in node.keywords if k.arg is not None]
        spread, complete = self.spread(node) if len(named) < len(node.keywords) else ((), False)
        end_line, end = self.source.end(node)
        return CallShape(
            positional=len(positional),
            keywords=tuple(k.arg for k in named if k.arg is not None),  # all named
            star=any(isinstance(a, ast.Starred) for a in node.args),
            double_star=len(named) < len(node.keywords),
            positional_spans=tuple(self.source.span(a) for a in positional),
            keyword_spans=tuple(self.source.span(k) for k in named),
            close_span=(end_line, end, end_line, end + 1),
            spread=spread,
            spread_complete=complete,
            keyword_literals=tuple(literal(k.value) for k in named),
            positional_literals=tuple(self._literal(a) for a in positional),
        )

    def _setattr(self, node: ast.Call) -> bool:
        """``setattr(host_module, "X", value)`` (the builtin): a store to ``host_module.X``."""
        func, args = node.func, node.args
        if not (isinstance(func, ast.Name) and func.id == "setattr" and len(args) == 3):
            return False
        if self.module.qualified(func) or not isinstance(args[1], ast.Constant):
            return False
        attr = args[1].value
        if not isinstance(attr, str) or not attr.isidentifier():
            return False
        for name in self.module.qualified(args[0]):
            if self._host(name):
                self._add("attribute", node, f"{name}.{attr}", reads=reads(args[0]) + 1, store=True)
                return True
        return False

    def _arg_classes(self, args: list[ast.expr]) -> tuple[str, ...] | None:
        """The host classes of a host call's positional arguments ('' where unknown), or None
        when none is known."""
        refs = [self.types.infer(a, self.func, self.module) for a in args[:4]]
        paths = tuple(r.path if r is not None and r.kind == "host" else "" for r in refs)
        return paths if any(paths) else None

    def _assigned_name_indexed(self, node: ast.Call) -> bool:
        """For ``x = call(...)``: is ``x`` subscripted in the same function?"""
        parent = self.parents.get(node)
        target = None
        if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
            target = parent.targets[0]
        elif isinstance(parent, ast.AnnAssign | ast.NamedExpr):
            target = parent.target
        if not isinstance(target, ast.Name):
            return False
        return target.id in (self.func.subscripted if self.func else self.module.subscripted)

    def _string_args(self, node: ast.Call, callee: str) -> None:
        """Record strings passed to the host that name code: dotted paths (any argument) and
        method names (first positional argument or ``method=``), for dispatch checks."""
        given = [(i == 0, a) for i, a in enumerate(node.args)]
        given += [(k.arg == "method", k.value) for k in node.keywords]
        for first, value in sorted(given, key=lambda pair: place(pair[1])):
            if not isinstance(value, ast.Constant) or not isinstance(value.value, str):
                continue
            text = value.value
            if dotted(text) or (first and text.isidentifier()):
                self._add("string-ref", value, callee, member=text)


#: Python's descriptor factories: a class attribute made by one is a method, not data.
_DESCRIPTORS = frozenset(
    "property classmethod staticmethod cached_property partial partialmethod "
    "singledispatchmethod".split()
)


def _plain_value(value: ast.expr) -> bool:
    """A literal, a container of them, or a call of a name that is no descriptor factory: data
    a class machinery sees (a bare name may be a function or a type, which hosts tell apart)."""
    if isinstance(value, ast.Constant | ast.List | ast.Tuple | ast.Dict | ast.Set | ast.JoinedStr):
        return True
    if isinstance(value, ast.UnaryOp):
        return isinstance(value.operand, ast.Constant)
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name | ast.Attribute):
        name = value.func.id if isinstance(value.func, ast.Name) else value.func.attr
        return name not in _DESCRIPTORS
    return False


def _optional(annotation: ast.expr) -> bool:
    """``Optional[X]``, ``Union[X, None]`` or ``X | None``, written out (a ``ClassVar`` is not a
    field)."""
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return any(
            isinstance(side, ast.Constant) and side.value is None
            for side in (annotation.left, annotation.right)
        ) or _optional(annotation.left)
    if not isinstance(annotation, ast.Subscript):
        return False
    head = annotation.value
    name = (
        head.id
        if isinstance(head, ast.Name)
        else head.attr
        if isinstance(head, ast.Attribute)
        else ""
    )
    if name == "Optional":
        return True
    if name == "Union" and isinstance(annotation.slice, ast.Tuple):
        return any(isinstance(e, ast.Constant) and e.value is None for e in annotation.slice.elts)
    return False
