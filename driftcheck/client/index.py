"""The first pass over the whole client: every module, class and function, what is assigned to
names and ``self`` attributes, and the calls that may bind receivers (bump-pydantic's repo-wide
metadata). Receiver inference (:mod:`driftcheck.client.types`) answers its questions from here.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import cast

from driftcheck.client.compact import compact
from driftcheck.client.names import NameTable, Source, Walker, parse
from driftcheck.client.texts import Kept, Packed


@dataclass(frozen=True)
class TypeRef:
    """A host class (``kind="host"``) or a client class (``kind="client"``), by dotted path."""

    kind: str
    path: str


@dataclass
class FunctionInfo:
    """A client function: its node, parameters' annotations and locals' assigned values."""

    qualname: str
    node: ast.FunctionDef | ast.AsyncFunctionDef
    module: ModuleInfo
    class_name: str | None
    params: dict[str, ast.expr | None] = field(default_factory=dict)
    locals: dict[str, list[ast.expr]] = field(default_factory=dict)
    bound_self: list[TypeRef] = field(default_factory=list)
    #: Names subscripted in this function (``x[...]``).
    subscripted: set[str] = field(default_factory=set)
    #: Host method names this function replaces on its bound object (monkeypatching).
    replaces: list[str] = field(default_factory=list)


@dataclass
class ClassInfo:
    """A client class: bases (qualified names), extra host bases, and ``self`` attributes."""

    qualname: str
    node: ast.ClassDef
    module: ModuleInfo
    bases: list[str] = field(default_factory=list)
    extra_bases: list[str] = field(default_factory=list)
    attrs: dict[str, list[tuple[ast.expr, FunctionInfo | None]]] = field(default_factory=dict)
    methods: dict[str, FunctionInfo] = field(default_factory=dict)


@dataclass
class ModuleInfo:
    """One parsed client file."""

    name: str
    file: str
    tree: ast.Module
    source: Source
    names: NameTable
    globals: dict[str, list[ast.expr]] = field(default_factory=dict)
    subscripted: set[str] = field(default_factory=set)

    def qualified(self, node: ast.AST) -> list[str]:
        """Dotted paths a name or attribute chain refers to (imports resolved)."""
        return self.names.qualified(node)


#: A placeholder value for names bound by loops and unpacking (never inferred).
UNKNOWN_VALUE = ast.Name(id="__unknown__", ctx=ast.Load())


class ClientIndex:
    """Repo-wide facts about the client, gathered before any use is collected."""

    def __init__(self) -> None:
        self.modules: dict[str, ModuleInfo] = {}
        self.classes: dict[str, ClassInfo] = {}
        self.functions: dict[str, FunctionInfo] = {}
        self.function_of_node: dict[ast.AST, FunctionInfo] = {}
        #: Calls and attribute assignments that may bind receivers (see bindings.py).
        self.binding_calls: list[tuple[ast.Call, FunctionInfo | None, ModuleInfo]] = []
        self.binding_assigns: list[tuple[ast.Assign, FunctionInfo | None, ModuleInfo]] = []
        #: ``id()`` of the annotations recorded as a name's values (``x: Frame = make()``).
        self.annotations: set[int] = set()

    def add_module(self, info: ModuleInfo) -> None:
        """Index a parsed module's classes, functions and assignments."""
        self.modules[info.name] = info
        _Indexer(self, info).walk(info.tree)


class _Indexer(Walker):
    records_parents = False  # read by no visit: a map of every node for nothing

    def __init__(self, index: ClientIndex, module: ModuleInfo) -> None:
        super().__init__()
        self.index = index
        self.module = module
        self.class_stack: list[ClassInfo] = []
        self.func_stack: list[FunctionInfo] = []

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        prefix = self.class_stack[-1].qualname if self.class_stack else self.module.name
        info = ClassInfo(qualname=f"{prefix}.{node.name}", node=node, module=self.module)
        for base in node.bases:
            names = self.module.qualified(base)
            if names:
                info.bases.append(names[0])
        self.index.classes[info.qualname] = info
        self.class_stack.append(info)

    def leave_ClassDef(self, node: ast.ClassDef) -> None:
        self.class_stack.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        cls = self.class_stack[-1] if self.class_stack and not self.func_stack else None
        prefix = (
            self.func_stack[-1].qualname
            if self.func_stack
            else (cls.qualname if cls else self.module.name)
        )
        info = FunctionInfo(
            qualname=f"{prefix}.{node.name}",
            node=node,
            module=self.module,
            class_name=cls.qualname if cls else None,
        )
        a = node.args
        for param in (*a.posonlyargs, *a.args, *a.kwonlyargs):
            info.params[param.arg] = param.annotation
        if cls is not None:
            cls.methods[node.name] = info
        self.index.functions[info.qualname] = info
        self.index.function_of_node[node] = info
        self.func_stack.append(info)

    def leave_FunctionDef(self, node: ast.AST) -> None:
        self.func_stack.pop()

    visit_AsyncFunctionDef = visit_FunctionDef
    leave_AsyncFunctionDef = leave_FunctionDef

    def _record(self, target: ast.expr, value: ast.expr) -> None:
        func = self.func_stack[-1] if self.func_stack else None
        if isinstance(target, ast.Name):
            store = func.locals if func else self.module.globals
            store.setdefault(target.id, []).append(value)
        elif (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and func is not None
            and func.class_name
            and target.value.id == first_param(func.node)
        ):
            cls = self.index.classes[func.class_name]
            cls.attrs.setdefault(target.attr, []).append((value, func))
        elif isinstance(target, ast.Tuple | ast.List):
            starred = any(isinstance(el, ast.Starred) for el in target.elts)
            for i, el in enumerate(target.elts):
                if starred or value is UNKNOWN_VALUE or isinstance(el, ast.Starred):
                    self._record(el.value if isinstance(el, ast.Starred) else el, UNKNOWN_VALUE)
                else:  # ``a, b = f()``: ``a`` is ``f()[0]``
                    item = ast.Subscript(value=value, slice=ast.Constant(i), ctx=ast.Load())
                    self._record(el, ast.copy_location(item, value))

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._record(t, node.value)
        if isinstance(node.value, ast.Call) and any(
            isinstance(t, ast.Attribute) for t in node.targets
        ):
            func = self.func_stack[-1] if self.func_stack else None
            self.index.binding_assigns.append((node, func, self.module))

    def visit_Call(self, node: ast.Call) -> None:
        if len(node.args) + len(node.keywords) >= 2 or any(
            k.arg is not None
            and isinstance(k.value, ast.Constant)
            and isinstance(k.value.value, str)
            for k in node.keywords
        ):
            func = self.func_stack[-1] if self.func_stack else None
            self.index.binding_calls.append((node, func, self.module))

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.value, ast.Name):
            if self.func_stack:
                self.func_stack[-1].subscripted.add(node.value.id)
            else:
                self.module.subscripted.add(node.value.id)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.index.annotations.add(id(node.annotation))
        self._record(node.target, node.annotation)
        if node.value is not None:
            self._record(node.target, node.value)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self._record(node.target, node.value)

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self._record(node.target, UNKNOWN_VALUE)

    visit_AsyncFor = visit_For

    def visit_withitem(self, node: ast.withitem) -> None:
        if node.optional_vars is not None:
            self._record(node.optional_vars, node.context_expr)


def first_param(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The name of a function's first positional parameter."""
    params = [*node.args.posonlyargs, *node.args.args]
    return params[0].arg if params else None


def parse_module(
    name: str, file: str, code: str | bytes | Packed, kept: Kept | None = None
) -> ModuleInfo:
    """Parse one client file (raises SyntaxError, ValueError, RecursionError, MemoryError).

    ``code`` is its text or the kept form of it (:mod:`driftcheck.client.texts`), ``kept`` the
    kept form where ``code`` is the text: the module's source shares it."""
    tree = parse(code)
    try:
        tree = cast(ast.Module, compact(tree))
    except RecursionError:
        pass  # the tree as parsed (the index says it is too deeply nested to analyse)
    names = NameTable(name, is_package=file.endswith("__init__.py")).collect(tree)
    return ModuleInfo(
        name=name, file=file, tree=tree, source=Source(code if kept is None else kept), names=names
    )


def assigns_class_attr(node: ast.ClassDef, name: str) -> bool:
    """Whether a class body assigns ``name`` (``x = ...`` or ``x: T = ...``)."""
    return name in class_attrs(node)


def class_attrs(node: ast.ClassDef) -> list[str]:
    """The names a class body assigns (``x = ...`` or ``x: T = ...``)."""
    out: list[str] = []
    for stmt in node.body:
        if isinstance(stmt, ast.Assign):
            out += [t.id for t in stmt.targets if isinstance(t, ast.Name)]
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            out.append(stmt.target.id)
    return out
