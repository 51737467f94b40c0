"""Reading client source with :mod:`ast`: positions, source text, a source-ordered walk, and what
a name in a module refers to (imports anywhere in the file and module-level definitions).

The client is analysed with the standard library's parser: libcst rebuilds every node on every
walk, which made whole-ecosystem scans take tens of minutes. libcst stays where code is rewritten
(the codemods), and positions here are reported the way libcst reports them (1-based lines,
columns counted in characters), so a finding points at the node a codemod looks for.

Shadowing of an imported name by a local variable is not modelled.
"""

from __future__ import annotations

import ast
import re
import warnings
from array import array
from collections import deque
from collections.abc import Callable, Iterator
from itertools import accumulate
from operator import add
from typing import Any, cast

from driftcheck.client.compact import PLAIN
from driftcheck.client.texts import Packed, keep, unpack

_NEWLINE = re.compile(r"\r\n|\r|\n")
_NEWLINE_BYTES = re.compile(rb"\r\n|\r|\n")
#: An encoding declaration (PEP 263) that is not UTF-8's.
_OTHER_CODING = re.compile(
    rb"^[ \t\f]*#.*?coding[:=][ \t]*(?!(?:utf[-_]?8|UTF[-_]?8)(?:-sig)?\b)[-\w.]+", re.M
)


def _head_end(code: bytes) -> int:
    """Where a text's first two lines end (an encoding is declared in one of them)."""
    first = code.find(b"\n")
    second = code.find(b"\n", first + 1) if first >= 0 else -1
    return len(code) if second < 0 else second


#: Node classes CPython shares between trees (contexts and operators): never walked.
_SHARED = (ast.expr_context, ast.operator, ast.boolop, ast.unaryop, ast.cmpop)
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_DEF = re.compile(r"(?:async\s+)?def\s+")
_FROM = re.compile(r"from\s+")
_CLASS = re.compile(r"class\s+")


def parse(code: str | bytes | Packed) -> ast.Module:
    """Parse a client file (raises SyntaxError, ValueError, RecursionError or MemoryError).

    ``code`` may be a kept text's UTF-8 bytes (:mod:`driftcheck.client.texts`): parsed as they
    are, with the same positions, without a decoded copy (one declaring another encoding is
    decoded first: its bytes are UTF-8 whatever it declares). Warnings the compiler emits about
    the client's code (invalid escapes, ...) are not ours to print."""
    code = unpack(code)
    if isinstance(code, bytes) and _OTHER_CODING.search(code, 0, _head_end(code)):
        code = code.decode("utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(code)


class Source:
    """The text of one client file, addressed the way :mod:`ast` addresses it.

    Its lines are kept as where each starts and ends in the text, not as strings: a string per
    line was 97 MB for transformers' 1,436 files, held while every tree is, at the scan's peak.
    The text is held as :func:`~driftcheck.client.texts.keep` gives it (given bytes, a kept
    form shared with the client's texts): as UTF-8 bytes, lines are where each starts and ends
    in them, and a line is decoded when it is read.
    """

    def __init__(self, given: str | bytes | Packed) -> None:
        self.code = keep(given)
        self._ascii = self.code.isascii()
        # Where each line starts and ends, found when a line is first asked for: most files'
        # positions are read as they are (an ASCII text's byte column is its column), and
        # the two arrays were 11 MB for transformers' files.
        self._lines: tuple[array, array] | None = None

    def _located(self) -> tuple[array, array]:
        """(where each line starts, where it ends) in the kept text."""
        if self._lines is not None:
            return self._lines
        code: Any = unpack(self.code)  # str or bytes: each split below gives what it is given
        wide = isinstance(code, bytes)
        cr: Any = b"\r" if wide else "\r"
        lf: Any = b"\n" if wide else "\n"
        if cr in code:  # line breaks of more kinds, or of two characters
            newline: Any = _NEWLINE_BYTES if wide else _NEWLINE
            lines = newline.split(code)
            seps = map(len, newline.findall(code))
            starts = array("I", accumulate(map(add, map(len, lines[:-1]), seps), initial=0))
        else:  # only ``\n``: a plain split, three times faster than the pattern's
            lines = code.split(lf)
            starts = array("I", accumulate((len(x) + 1 for x in lines[:-1]), initial=0))
        self._lines = starts, array("I", map(add, starts, map(len, lines)))
        return self._lines

    def __len__(self) -> int:
        """How many lines the text has."""
        return len(self._located()[0])

    def line(self, line: int) -> str:
        """The text of 1-based ``line`` (without its line break)."""
        i = line - 1
        starts, ends = self._located()
        text = unpack(self.code)[starts[i] : ends[i]]
        return text if isinstance(text, str) else text.decode("utf-8", errors="replace")

    def column(self, line: int, offset: int) -> int:
        """0-based character column of a UTF-8 byte ``offset`` in 1-based ``line``."""
        if self._ascii or not 0 < line <= len(self._located()[0]):
            return offset
        text = self.line(line)
        if text.isascii():
            return offset
        return len(text.encode("utf-8")[:offset].decode("utf-8", errors="replace"))

    def start(self, node: ast.AST) -> tuple[int, int]:
        """(1-based line, 0-based character column) where ``node`` starts."""
        line = getattr(node, "lineno", 1)
        return line, self.column(line, getattr(node, "col_offset", 0))

    def end(self, node: ast.AST) -> tuple[int, int]:
        """(1-based line, 0-based character column) just past the end of ``node``."""
        line = cast(int, getattr(node, "end_lineno", None) or getattr(node, "lineno", 1))
        offset: int | None = getattr(node, "end_col_offset", None)
        if offset is None:
            return line, 0
        return line, self.column(line, offset)

    def span(self, node: ast.AST) -> tuple[int, int, int, int]:
        """(line, column, end line, end column) of ``node``: 1-based, end exclusive."""
        line, column = self.start(node)
        end_line, end = self.end(node)
        return line, column + 1, end_line, end + 1

    def segment(self, node: ast.AST) -> str:
        """The source text of ``node`` (as written, formatting kept)."""
        located = cast(ast.expr, node)  # a node without a position raises AttributeError
        try:
            first, last = located.lineno, located.end_lineno
            start, end = located.col_offset, located.end_col_offset
        except AttributeError:
            return ""
        if first is None or last is None or end is None:
            return ""
        rows = [self.line(i + 1).encode("utf-8") for i in range(len(self))[first - 1 : last]]
        if not rows:
            return ""
        if len(rows) == 1:
            return rows[0][start:end].decode("utf-8", errors="replace")
        rows[0] = rows[0][start:]
        rows[-1] = rows[-1][:end]
        return b"\n".join(rows).decode("utf-8", errors="replace")

    def after(self, node: ast.AST, keyword: re.Pattern[str]) -> tuple[int, int]:
        """Position just after ``keyword`` at the start of ``node`` (a ``def``'s name, a
        ``from`` import's module), or the node's own start when the text is unusual."""
        line, col = self.start(node)
        if 0 < line <= len(self):
            text = self.line(line)
            m = keyword.match(text, col)
            if m is not None and m.end() < len(text):
                return line, m.end()
        return line, col

    def def_name(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[int, int]:
        """Where a function's name is written."""
        return self.after(node, _DEF)

    def class_name(self, node: ast.ClassDef) -> tuple[int, int]:
        """Where a class statement's name is written."""
        return self.after(node, _CLASS)

    def from_module(self, node: ast.ImportFrom) -> tuple[int, int]:
        """Where a ``from`` import's module name is written."""
        return self.after(node, _FROM)


def children(node: ast.AST) -> list[ast.AST]:
    """Child nodes in source order (decorators before the body; call arguments and dict
    entries as written)."""
    read = _READERS.get(type(node))
    if read is not None:
        try:
            return read(node)
        except AttributeError:  # a node made by hand without every field
            pass
    return _children(node)


def _children(node: ast.AST) -> list[ast.AST]:
    kind = type(node)
    ordered = _ORDERED.get(kind)
    if ordered is not None:
        return ordered(node)
    fields = _FIELDS.get(kind)
    if fields is None:
        fields = _FIELDS[kind] = tuple(f for f in kind._fields if f not in _NO_NODES)
    out = []
    for name in fields:
        field = getattr(node, name, None)
        if isinstance(field, ast.AST):
            if not isinstance(field, _SHARED):
                out.append(field)
        elif isinstance(field, list):
            for item in field:
                if isinstance(item, ast.AST) and not isinstance(item, _SHARED):
                    out.append(item)
    return out


def _function_children(func: ast.FunctionDef) -> list[ast.AST]:
    out: list[ast.AST] = [*func.decorator_list, func.args]
    if func.returns is not None:
        out.append(func.returns)
    out += func.body
    return out


def _class_children(cls: ast.ClassDef) -> list[ast.AST]:
    return [*cls.decorator_list, *cls.bases, *cls.keywords, *cls.body]


def _call_children(call: ast.Call) -> list[ast.AST]:
    if call.keywords and call.args:
        return [call.func, *sorted([*call.args, *call.keywords], key=place)]
    return [call.func, *call.args, *call.keywords]


def _dict_children(entries: ast.Dict) -> list[ast.AST]:
    out: list[ast.AST] = []
    for key, value in zip(entries.keys, entries.values, strict=True):
        if key is not None:
            out.append(key)
        out.append(value)
    return out


def _kinds(plain: type[ast.AST]) -> list[type]:
    """``plain`` and its compact classes (:mod:`driftcheck.client.compact`)."""
    return [kind for kind, of in PLAIN.items() if of is plain]


#: The node classes whose children are not in the order of their fields, plain and compact.
_ORDERED: dict[type, Callable[[Any], list[ast.AST]]] = {
    kind: order
    for plain, order in (
        (ast.FunctionDef, _function_children),
        (ast.AsyncFunctionDef, _function_children),
        (ast.ClassDef, _class_children),
        (ast.Call, _call_children),
        (ast.Dict, _dict_children),
    )
    for kind in _kinds(plain)
}


#: Fields that never hold a node to walk: names, numbers, strings, and the shared context and
#: operator nodes (skipping them saves a look at each on every node).
_NO_NODES = frozenset(
    "ctx op ops id attr arg name kind type_comment level module conversion is_async simple".split()
)
#: Node class -> the fields :func:`children` looks at (``_fields`` less :data:`_NO_NODES`).
_FIELDS: dict[type, tuple[str, ...]] = {
    kind: () for plain in (ast.Constant, ast.MatchSingleton) for kind in _kinds(plain)
}

#: The types of the :mod:`ast` grammar whose values are not nodes.
_NOT_NODES = frozenset({"identifier", "string", "constant", "int", "object"})
#: A node class's signature in the grammar, as its docstring gives it: ``Call(expr func, expr*
#: args, keyword* keywords)``.
_SIGNATURE = re.compile(r"(\w+)\((.*)\)")


def _reader(plain: type[ast.AST]) -> Callable[[Any], list[ast.AST]] | None:
    """A function reading the children of a ``plain`` node as :func:`_children` does, written
    from the class's signature in the grammar (its docstring): a node field is read directly, a
    list of nodes added whole (only ``None`` taken out, which ``kw_defaults`` may hold). None
    when the signature cannot be read or does not match the class's fields."""
    found = _SIGNATURE.fullmatch((plain.__doc__ or "").strip())
    if found is None or found.group(1) != plain.__name__:
        return None
    kinds = [f.split() for f in found.group(2).split(",")] if found.group(2) else []
    if [k[-1] for k in kinds] != list(plain._fields) or any(len(k) != 2 for k in kinds):
        return None
    lines, lists = ["out = []"], False
    for kind, name in kinds:
        base = kind.rstrip("*?")
        if name in _NO_NODES or base in _NOT_NODES:
            continue
        if kind.endswith("*"):
            lines.append(f"out += n.{name}")
            lists = True
        elif kind.endswith("?"):
            lines += [f"v = n.{name}", "if v is not None: out.append(v)"]
        else:
            lines.append(f"out.append(n.{name})")
    if len(lines) == 1:
        return _none
    if lists:
        lines.append("if None in out: out = [c for c in out if c is not None]")
    code = "def read(n):\n" + "".join(f"    {line}\n" for line in [*lines, "return out"])
    space: dict[str, Any] = {}
    exec(code, space)  # noqa: S102 (source written above from the grammar's field names)
    return cast(Callable[[Any], list[ast.AST]], space["read"])


def _none(node: ast.AST) -> list[ast.AST]:
    return []


#: Node class -> the function reading its children (plain and compact classes alike).
_READERS: dict[type, Callable[[Any], list[ast.AST]]] = {}
for _kind, _plain in PLAIN.items():
    _read = _ORDERED.get(_kind) or _reader(_plain)
    if _read is not None:
        _READERS[_kind] = _read


def place(node: ast.AST) -> tuple[int, int]:
    """(line, byte column) of a node, for ordering nodes as written."""
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)


class Walker:
    """A source-ordered walk calling ``visit_<Class>(node)`` before a node's children (return
    False to skip them) and ``leave_<Class>(node)`` after, with each node's parent recorded
    (unless the class sets ``records_parents`` to False).

    The hooks are cached as the class's functions, not as bound methods: a bound method held
    by its own instance is a reference cycle, which kept each finished walker (and its map of
    parents, one entry per node) alive until the cyclic GC ran."""

    records_parents = True

    def __init__(self) -> None:
        self.parents: dict[ast.AST, ast.AST] = {}
        self._visit: dict[type, tuple] = {}

    def walk(self, tree: ast.AST) -> None:
        """Walk ``tree`` and everything below it."""
        self._walk(tree)

    def _walk(self, node: ast.AST) -> None:
        kind = type(node)
        hooks = self._visit.get(kind)
        if hooks is None:
            name, cls = kind.__name__, type(self)
            hooks = (
                getattr(cls, f"visit_{name}", None),
                getattr(cls, f"leave_{name}", None),
                _READERS.get(kind, _children),
            )
            self._visit[kind] = hooks
        visit, leave, read = hooks
        if visit is None or visit(self, node) is not False:
            try:
                kids = read(node)
            except AttributeError:  # a node made by hand without every field
                kids = _children(node)
            if kids:
                if self.records_parents:
                    parents = self.parents
                    for child in kids:
                        parents[child] = node
                        self._walk(child)
                else:
                    for child in kids:
                        self._walk(child)
        if leave is not None:
            leave(self, node)


def walk_statements(tree: ast.AST) -> Iterator[ast.AST]:
    """``tree`` and every statement, ``except`` handler and match case below it, in
    :func:`ast.walk`'s (breadth-first) order; no expression holds any of them, so none is
    walked."""
    todo: deque[ast.AST] = deque([tree])
    while todo:
        node = todo.popleft()
        yield node
        for name in node._fields:
            if name in _HOLDING:
                held = getattr(node, name, None)
                if isinstance(held, list):
                    todo.extend(held)


#: The fields that hold statements, handlers or match cases (in any node).
_HOLDING = frozenset(("body", "handlers", "orelse", "finalbody", "cases"))


def statements(body: list[ast.stmt], depth: int = 0) -> Iterator[tuple[ast.stmt, int]]:
    """Every statement below ``body`` with its function/class nesting depth."""
    for stmt in body:
        yield stmt, depth
        inner = depth + 1 if isinstance(stmt, (*FUNCTIONS, ast.ClassDef)) else depth
        for field in ("body", "orelse", "finalbody"):
            block = getattr(stmt, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield from statements(block, inner)
        for handler in getattr(stmt, "handlers", None) or []:
            yield from statements(handler.body, inner)
        for case in getattr(stmt, "cases", None) or []:
            yield from statements(case.body, inner)


def dotted(node: ast.AST) -> str:
    """``a.b.c`` for a chain of names, else ""."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = dotted(node.value)
        return f"{head}.{node.attr}" if head else ""
    return ""


def _catches_import(handler: ast.ExceptHandler) -> bool:
    names = (
        handler.type.elts
        if isinstance(handler.type, ast.Tuple)
        else [handler.type]
        if handler.type is not None
        else []
    )
    return handler.type is None or any(
        dotted(n) in ("ImportError", "ModuleNotFoundError", "Exception") for n in names
    )


class NameTable:
    """Imported aliases and module-level definitions of one module."""

    def __init__(self, module_name: str, is_package: bool) -> None:
        self.module_name = module_name
        self.is_package = is_package
        self.imports: dict[str, str] = {}
        self.defined: set[str] = set()

    def collect(self, tree: ast.Module) -> NameTable:
        """Read the imports and top-level definitions of a parsed module (statements only)."""
        tries: list[ast.Try] = []
        for stmt, depth in statements(tree.body):
            if isinstance(stmt, ast.Try):
                tries.append(stmt)
            if isinstance(stmt, ast.Import):
                self._import(stmt)
            elif isinstance(stmt, ast.ImportFrom):
                self._import_from(stmt)
            elif depth == 0:
                if isinstance(stmt, (*FUNCTIONS, ast.ClassDef)):
                    self.defined.add(stmt.name)
                elif isinstance(stmt, ast.Assign):
                    for target in stmt.targets:
                        if isinstance(target, ast.Name):
                            self.defined.add(target.id)
        self._prefer_try_imports(tries)
        return self

    def _prefer_try_imports(self, tries: list[ast.Try]) -> None:
        """``try: from new import X / except ImportError: from old import X``: X is the try's
        import wherever that import works, so that is the one a name refers to (``tries``:
        the module's ``try`` statements in :func:`statements` order, found by the one walk)."""
        for stmt in tries:
            if not any(_catches_import(h) for h in stmt.handlers):
                continue
            saved = dict(self.imports)
            for inner in stmt.body:
                if isinstance(inner, ast.ImportFrom):
                    self._import_from(inner)
                elif isinstance(inner, ast.Import):
                    self._import(inner)
            preferred = {k: v for k, v in self.imports.items() if saved.get(k) != v}
            self.imports = {**saved, **preferred}

    def _import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.imports[alias.asname] = alias.name
            else:
                root = alias.name.split(".", 1)[0]
                self.imports.setdefault(root, root)

    def from_base(self, node: ast.ImportFrom) -> str:
        """The absolute module a ``from`` import reads (relative imports resolved; "" if none)."""
        base = node.module or ""
        if node.level:
            parts = self.module_name.split(".")
            keep = len(parts) - node.level + (1 if self.is_package else 0)
            if keep < 0:
                return ""
            base = ".".join([*parts[:keep], *([base] if base else [])])
        return base

    def _import_from(self, node: ast.ImportFrom) -> None:
        base = self.from_base(node)
        if not base:
            return
        for alias in node.names:
            if alias.name == "*":
                return
            self.imports[alias.asname or alias.name] = f"{base}.{alias.name}"

    # -- queries ---------------------------------------------------------------------------
    def qualified(self, node: ast.AST) -> list[str]:
        """Dotted paths a Name or Attribute chain refers to ([] for locals and builtins)."""
        if isinstance(node, ast.Name):
            if node.id in self.imports:
                return [self.imports[node.id]]
            if node.id in self.defined:
                return [f"{self.module_name}.{node.id}"]
            return []
        if isinstance(node, ast.Attribute):
            return [f"{base}.{node.attr}" for base in self.qualified(node.value)]
        return []

    def imported_root(self, node: ast.AST) -> bool:
        """True when an attribute chain starts at an imported name."""
        while isinstance(node, ast.Attribute):
            node = node.value
        return isinstance(node, ast.Name) and node.id in self.imports
