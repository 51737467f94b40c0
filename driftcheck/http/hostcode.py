"""The host's modules as ``ast`` trees, with the names each one binds: enough to follow a name
from one module to its definition in another (imports, re-exports, relative imports, imports
inside functions), without griffe and without importing anything.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from driftcheck.host.api import HostAPI

Imports = dict[str, tuple[str, str | None]]  # local name -> (module, attribute or None)


class Def:
    """A definition found by name: the module it is in and its node. A definition found through
    the index is parsed only when its node is read (following a name to its definition, or
    asking whether it is a class, parses nothing)."""

    __slots__ = ("_load", "_node", "kind", "module", "name")

    def __init__(
        self,
        module: str,
        node: ast.AST | None,
        name: str,
        *,
        kind: str = "",
        load: Callable[[], ast.AST] | None = None,
    ) -> None:
        self.module = module
        #: The dotted name inside the module (``Class.method`` for methods).
        self.name = name
        self._node = node
        self._load = load
        #: The node's class name (``ClassDef``, ``FunctionDef``, ``Assign``...).
        self.kind = kind or type(node).__name__

    @property
    def node(self) -> ast.AST:
        if self._node is None:
            self._node = cast("Callable[[], ast.AST]", self._load)()
        return self._node

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.name}"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Def)
            and (self.module, self.name) == (other.module, other.name)
            and self.node is other.node
        )

    def __hash__(self) -> int:
        return hash((self.module, self.name))

    def __repr__(self) -> str:
        return f"Def({self.qualname}, {self.kind})"


#: Where a top-level statement (or a method of a top-level class, ``Class.method``) is: the
#: characters of its lines (from its first decorator's), the first of those lines, the
#: statement's own line and column, and its node's class name.
Span = tuple[int, int, int, int, int, str]


@dataclass
class _Index:
    """What name resolution needs of one module: its imports and where each top-level name is
    bound (the statement is parsed again from those lines when asked for)."""

    imports: Imports
    spans: dict[str, Span]


class Defs(Mapping[str, ast.AST]):
    """A module's top-level definitions by name; a statement's node is parsed from its lines on
    first access and kept, so that only the definitions the readers use are held, each as one
    node."""

    def __init__(self, code: HostCode, module: str, spans: dict[str, Span]) -> None:
        self._code = code
        self._module = module
        self._spans = spans

    def __getitem__(self, name: str) -> ast.AST:
        if "." in name:
            raise KeyError(name)
        return self._code.statement(self._module, self._spans[name])

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and "." not in name and name in self._spans

    def __iter__(self) -> Iterator[str]:
        return (n for n in self._spans if "." not in n)

    def __len__(self) -> int:
        return sum(1 for _ in self)


@dataclass
class HostCode:
    """Modules of one host release, read on need. A module's tree is never kept: parsing it
    leaves its imports and the places of its top-level names (:class:`_Index`), and a definition
    asked for by name is parsed alone from its lines and kept. Holding every tree a surface read
    touches cost more than the rest of a cold scan (vLLM 0.31: 170 modules, 79 MB)."""

    api: HostAPI
    _files: dict[str, str] = field(default_factory=dict)
    _index: dict[str, _Index | None] = field(default_factory=dict)
    _nodes: dict[tuple[str, int, int], ast.AST] = field(default_factory=dict)
    #: The texts of the modules parsed (their definitions are parsed again from them).
    _texts: dict[str, str] = field(default_factory=dict)
    #: Needles the readers will ask :meth:`modules_containing` for: the first pass over the
    #: texts looks for them all (a large host's texts are read from its archive on each pass).
    ahead: tuple[str, ...] = ()
    _containing: dict[str, set[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # The release's own files, shared with the host's other passes over all files (read
        # from the release, not kept): these reads feed a fact, they need not grow the snapshot.
        self.sources = self.api.source_texts()
        for rel in self.api.tree.python_files():
            name = self.api.tree.module_name(rel)
            if self.api.owns(name):
                self._files.setdefault(name, rel)

    # -- files -------------------------------------------------------------------------------
    def modules(self) -> list[str]:
        return sorted(self._files)

    def file(self, module: str) -> str:
        return self._files.get(module, "")

    def text(self, module: str) -> str:
        """A module's source ("" when unreadable: it narrows the surface only): the host's kept
        copy, or read from the release and not kept there (the reader keeps the texts of the
        modules it parsed, a small part of the host's)."""
        if module in self._texts:
            return self._texts[module]
        rel = self._files.get(module)
        if not rel:
            return ""
        try:
            return self.sources[rel]
        except KeyError:
            return ""

    def modules_containing(self, *needles: str) -> list[str]:
        """Modules whose text contains any of ``needles`` (a cheap pre-filter), in name order;
        each needle is looked for once (with those of :attr:`ahead` in the same pass)."""
        missing = [n for n in dict.fromkeys((*needles, *self.ahead)) if n not in self._containing]
        if missing:
            found: dict[str, set[str]] = {n: set() for n in missing}
            for m in self.modules():
                text = self.text(m)
                for n in missing:
                    if n in text:
                        found[n].add(m)
            self._containing.update(found)
        return [m for m in self.modules() if any(m in self._containing[n] for n in needles)]

    def parse(self, module: str) -> ast.Module | None:
        """The module's whole tree, parsed afresh and not kept (the caller drops it when done);
        its index is taken from it on the way."""
        text = self._texts[module] = self.text(module)
        try:
            tree = ast.parse(text) if text else None
        except (SyntaxError, ValueError):
            tree = None
        if module not in self._index:
            self._index[module] = None if tree is None else self._indexed(module, tree, text)
        return tree

    def _indexed(self, module: str, tree: ast.Module, text: str) -> _Index:
        imports: Imports = {}
        spans: dict[str, Span] = {}
        package = self.is_package(module)
        starts = [0, *(m.end() for m in _NEWLINE.finditer(text)), len(text)]
        for stmt in top_level(tree.body):
            span = _span(stmt, starts)
            if isinstance(stmt, ast.ClassDef):
                spans[stmt.name] = span
                for stale in [n for n in spans if n.startswith(f"{stmt.name}.")]:
                    del spans[stale]  # the methods of the class the name bound before
                for inner in stmt.body:
                    if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef):
                        spans.setdefault(f"{stmt.name}.{inner.name}", _span(inner, starts))
            elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                spans[stmt.name] = span
            elif isinstance(stmt, ast.Assign):
                for t in stmt.targets:
                    if isinstance(t, ast.Name):
                        spans[t.id] = span
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                spans[stmt.target.id] = span
            else:
                imports.update(import_names(stmt, module, package))
        return _Index(imports, spans)

    def _index_of(self, module: str) -> _Index | None:
        if module not in self._index:
            self.parse(module)
        return self._index[module]

    def statement(self, module: str, span: Span) -> ast.AST:
        """The top-level statement at ``span``, parsed from its own lines on first need (the
        whole module again only where those lines do not parse alone) and kept."""
        key = (module, span[3], span[4])
        node = self._nodes.get(key)
        if node is None:
            node = _parse_span(self.text(module), span)
            if node is None:  # lines that do not parse alone (``else: x = 1``)
                stmts = top_level(ast.parse(self.text(module)).body)
                methods = [m for c in stmts if isinstance(c, ast.ClassDef) for m in c.body]
                node = next(s for s in stmts + methods if (s.lineno, s.col_offset) == key[1:])
            self._nodes[key] = node
        return node

    def has_module(self, module: str) -> bool:
        return module in self._files

    def is_package(self, module: str) -> bool:
        return self._files.get(module, "").endswith("__init__.py")

    # -- names -------------------------------------------------------------------------------
    def imports(self, module: str) -> Imports:
        """Names the module's top level binds by ``import`` (inside ``if``/``try`` too)."""
        index = self._index_of(module)
        return index.imports if index is not None else {}

    def spans(self, module: str) -> dict[str, Span]:
        """Where each top-level name of the module is bound (nothing parsed for it)."""
        index = self._index_of(module)
        return index.spans if index is not None else {}

    def defs(self, module: str) -> Mapping[str, ast.AST]:
        """Classes, functions and assigned names of the module's top level (each node parsed
        when first asked for)."""
        index = self._index_of(module)
        return Defs(self, module, index.spans if index is not None else {})

    def resolve(
        self, module: str, dotted: str, local: Imports | None = None, _depth: int = 0
    ) -> Def | str | None:
        """What ``dotted`` names inside ``module``: a definition, a module name, or None.

        ``local`` holds imports made inside the function being read (they shadow the module's).
        """
        if _depth > 12:
            return None
        head, _, rest = dotted.partition(".")
        imported = (local or {}).get(head) or self.imports(module).get(head)
        span = self.spans(module).get(head)
        if span is not None and not (local and head in local):
            return self._member(module, head, span, rest)
        if imported is None:
            return None
        target, attr = imported
        if attr is None:
            return self._in_module(target, rest, _depth)
        return self._in_module(target, f"{attr}.{rest}" if rest else attr, _depth)

    def _in_module(self, module: str, dotted: str, depth: int) -> Def | str | None:
        if not dotted:
            return module if module in self._files else None
        head, _, rest = dotted.partition(".")
        if head in self.defs(module) or head in self.imports(module):
            return self.resolve(module, dotted, None, depth + 1)
        sub = f"{module}.{head}"
        if sub in self._files:
            return self._in_module(sub, rest, depth + 1)
        return None

    def _def(self, module: str, name: str, span: Span) -> Def:
        """The definition at ``span``, its node parsed when first read."""
        return Def(module, None, name, kind=span[5], load=lambda: self.statement(module, span))

    def _member(self, module: str, head: str, span: Span, rest: str) -> Def | None:
        if not rest:
            return self._def(module, head, span)
        if span[5] == "ClassDef" and "." not in rest:
            return self.method(self._def(module, head, span), rest)
        return None

    def method(self, cls: Def, name: str, _depth: int = 0) -> Def | None:
        """A method defined on a host class or the first of its host bases that has it."""
        spans = self.spans(cls.module)
        at = spans.get(cls.name)
        indexed = at is not None and at[5] == "ClassDef"
        if at is not None and indexed and cls._node is not None:
            place = (getattr(cls._node, "lineno", -1), getattr(cls._node, "col_offset", -1))
            indexed = place == at[3:5]
        if indexed:  # a top-level class: its own method alone, from the index
            own = spans.get(f"{cls.name}.{name}")
            if own is not None:
                return self._def(cls.module, f"{cls.name}.{name}", own)
        node = cast(ast.ClassDef, cls.node)  # asked of classes only
        if not indexed:
            for stmt in node.body:
                if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name == name:
                    return Def(cls.module, stmt, f"{cls.name}.{name}")
        if _depth > 10:
            return None
        for base in node.bases:
            found = self.resolve_class(cls.module, base)
            if found is not None:
                method = self.method(found, name, _depth + 1)
                if method is not None:
                    return method
        return None

    def resolve_class(self, module: str, expr: ast.AST, local: Imports | None = None) -> Def | None:
        """The host class an expression (``Name`` / ``a.B``) names, or None."""
        for _ in range(8):  # ``Alias = OtherClass`` is followed
            name = dotted_name(expr)
            if name is None:
                return None
            found = self.resolve(module, name, local)
            if not isinstance(found, Def):
                return None
            if found.kind == "ClassDef":
                return found
            if found.kind not in ("Assign", "AnnAssign"):
                return None
            value = getattr(found.node, "value", None)
            if not isinstance(value, ast.Name | ast.Attribute):
                return None
            module, expr, local = found.module, value, None
        return None


def _span(stmt: ast.stmt, starts: list[int]) -> Span:
    decorators = getattr(stmt, "decorator_list", None) or []
    first = min([stmt.lineno, *(d.lineno for d in decorators)])
    last = min(stmt.end_lineno or stmt.lineno, len(starts) - 1)
    return starts[first - 1], starts[last], first, stmt.lineno, stmt.col_offset, type(stmt).__name__


_NEWLINE = re.compile(r"\r\n|\r|\n")


def _parse_span(text: str, span: Span) -> ast.AST | None:
    """The statement at ``span`` parsed from its lines alone (an indented one inside an ``if 1:``),
    with the line numbers and columns it has in the module; None where the lines do not parse
    alone or hold no such statement."""
    start, end, first, line, col, _ = span
    lines = text[start:end]
    indented = lines[:1] in (" ", "\t")
    try:
        tree = ast.parse("if 1:\n" + lines if indented else lines)
    except (SyntaxError, ValueError):
        return None
    ast.increment_lineno(tree, first - 2 if indented else first - 1)
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        stmt = todo.pop()
        if (stmt.lineno, stmt.col_offset) == (line, col) and not (
            indented and stmt is tree.body[0]
        ):
            return stmt
        for part in ("body", "orelse", "handlers", "finalbody"):
            todo.extend(getattr(stmt, part, None) or [])
    return None


def top_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """Statements of a module's top level, looking into ``if`` / ``try`` blocks."""
    out: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, ast.If):
            out.extend(top_level(stmt.body))
            out.extend(top_level(stmt.orelse))
        elif isinstance(stmt, ast.Try):
            out.extend(top_level(stmt.body))
            for handler in stmt.handlers:
                out.extend(top_level(handler.body))
            out.extend(top_level(stmt.orelse))
        else:
            out.append(stmt)
    return out


def import_names(stmt: ast.stmt, module: str, is_package: bool) -> Imports:
    """The names one ``import`` statement binds."""
    out: Imports = {}
    if isinstance(stmt, ast.Import):
        for alias in stmt.names:
            if alias.asname:
                out[alias.asname] = (alias.name, None)
            else:
                head = alias.name.split(".", 1)[0]
                out[head] = (head, None)
    elif isinstance(stmt, ast.ImportFrom):
        base = absolute(module, is_package, stmt.module, stmt.level)
        for alias in stmt.names:
            if alias.name != "*":
                out[alias.asname or alias.name] = (base, alias.name)
    return out


def local_imports(func: ast.AST, module: str, is_package: bool) -> Imports:
    """Imports made anywhere inside a function body."""
    out: Imports = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Import | ast.ImportFrom):
            out.update(import_names(node, module, is_package))
    return out


def absolute(module: str, is_package: bool, target: str | None, level: int) -> str:
    """The absolute module a (possibly relative) ``from`` import names."""
    if not level:
        return target or ""
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    base = ".".join(parts)
    return f"{base}.{target}" if target and base else (target or base)


def dotted_name(expr: ast.AST) -> str | None:
    """``a.b.C`` of a Name/Attribute chain, or None."""
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if isinstance(expr, ast.Name):
        parts.append(expr.id)
        return ".".join(reversed(parts))
    return None


def literal_str(expr: ast.AST | None) -> str | None:
    """A string literal's value (implicit concatenation included), or None."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value
    return None


def keyword(call: ast.Call, name: str) -> ast.AST | None:
    return next((k.value for k in call.keywords if k.arg == name), None)
