"""The host's API, loaded lazily and statically with griffe.

Only the modules a lookup reaches are visited (``griffe.visit`` on one file at a time), then
imports, re-export chains and base classes are followed on demand. Nothing is imported.
Dataclass and pydantic-dataclass constructors (including PEP 681 ``dataclass_transform``
decorators such as vLLM's ``@config``) are synthesised from their fields, ``InitVar``s included.
"""

from __future__ import annotations

import ast
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import Any, cast

import griffe

from driftcheck.host.attributes import add_instance_attributes
from driftcheck.host.constructors import Signatures
from driftcheck.host.modules import ModuleNames
from driftcheck.host.objects import UNKNOWN, Found, Lookup, annotation_paths, canonical
from driftcheck.host.served import Served
from driftcheck.host.values import PRESENT

__all__ = ["UNKNOWN", "Found", "HostAPI", "Lookup"]
from driftcheck.host.signature import Signature
from driftcheck.host.texts import SourceTexts
from driftcheck.sources.trees import SourceTree

logging.getLogger("griffe").setLevel(logging.ERROR)


class _KeepModuleNode(griffe.Extension):
    """Keeps the ``ast`` tree griffe parsed, so a module's source is parsed once, not twice."""

    def __init__(self) -> None:
        super().__init__()
        self.node: ast.Module | None = None

    def on_module_node(self, *, node: ast.AST | griffe.ObjectNode, **kwargs: object) -> None:
        if isinstance(node, ast.Module):
            self.node = node


@dataclass
class HostAPI(Signatures, ModuleNames):
    """One version of a host library, read from its source tree."""

    tree: SourceTree
    name: str
    version: str
    modules: dict[str, griffe.Module | None] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    parse_errors: list[tuple[str, str]] = field(default_factory=list)
    #: Opens the release's ``<pkg>-stubs`` distribution when one exists (asked only for names
    #: the host's own files leave undecided); None for hosts that are not index releases.
    stub_provider: Callable[[], SourceTree | None] | None = None

    def __post_init__(self) -> None:
        self.roots = set(self.tree.top_level_packages())
        # The snapshot's parsed modules are restored on the first module lookup: a run whose
        # results are cached never pays for unpickling them.
        self._restore = getattr(self.tree, "load_modules", None)
        self.restored = 0
        self._sig_cache: dict[str, Signature | None] = {}
        self.unknown_names: set[str] = set()
        #: Names the scanned client reaches that stayed undecided (set by the pipeline).
        self.undecided: list[str] = []
        self._keeper = _KeepModuleNode()
        self._extensions = griffe.load_extensions(self._keeper)

    # -- modules ---------------------------------------------------------------------------
    def owns(self, dotted: str) -> bool:
        """True when ``dotted`` lies inside one of this host's top-level packages."""
        return dotted.split(".", 1)[0] in self.roots

    def module(self, dotted: str) -> griffe.Module | None:
        """Visit and return module ``dotted`` (None when the host has no such module)."""
        if dotted in self.modules:
            return self.modules[dotted]
        if self._restore is not None:
            restored, self._restore = self._restore(), None
            if restored:
                self.modules.update(restored)
                self.restored = len(self.modules)
                if dotted in self.modules:
                    return self.modules[dotted]
        rel = self.tree.module_file(dotted)
        mod: griffe.Module | None = None
        parent = self.module(dotted.rsplit(".", 1)[0]) if "." in dotted else None
        if rel is not None:
            code = self.tree.read_text(rel)
            self.texts[dotted] = code
            self._keeper.node = None
            try:
                # Visiting with the parent package lets griffe resolve relative imports.
                mod = griffe.visit(
                    dotted.rsplit(".", 1)[-1],
                    filepath=Path(rel),
                    code=code,
                    parent=parent,
                    extensions=self._extensions,
                )
            except Exception as exc:  # griffe raises plain exceptions on odd syntax
                self.parse_errors.append((rel, f"{type(exc).__name__}: {exc}"))
                mod = None
            if mod is not None:
                # griffe's parse of the same text, used once and not kept: most visited
                # modules are never read as syntax again (``_ast`` parses those that are).
                tree = self._keeper.node or self._ast(dotted, code)
                self._keeper.node = None
                if tree is not None:
                    add_instance_attributes(mod, tree)
        elif self.tree.is_compiled(dotted):
            # An extension module without a stub: it exists, its names cannot be read.
            mod = griffe.Module(
                dotted.rsplit(".", 1)[-1], filepath=Path(dotted.replace(".", "/")), parent=parent
            )
            mod.compiled = True  # type: ignore[attr-defined]  # driftcheck's own mark on the module
        elif self.tree.is_package(dotted):
            mod = griffe.Module(
                dotted.rsplit(".", 1)[-1], filepath=Path(dotted.replace(".", "/")), parent=parent
            )
        self.modules[dotted] = mod
        return mod

    def module_text(self, dotted: str) -> str | None:
        """Source text of a visited module."""
        if dotted not in self.texts:
            rel = self.tree.module_file(dotted)
            if rel is None:
                return None
            self.texts[dotted] = self.tree.read_text(rel)
        return self.texts.get(dotted)

    def fact(self, key: str, compute: Callable[[], object]) -> Any:
        """A host-wide fact computed once per release (kept in the snapshot when there is one).
        Typed Any: a snapshot gives it back as decoded JSON (lists where tuples went in)."""
        cache = self.__dict__.setdefault("_facts", {})
        if key not in cache:
            keeper = getattr(self.tree, "fact", None)
            cache[key] = keeper(key, compute) if keeper else compute()
        return cache[key]

    def source_texts(self) -> SourceTexts:
        """Every Python file of the host's own packages as text (relative path -> text), read
        from the release itself (not its snapshot) by the passes over all files
        (raise-guards, definitions, the host's call sites, signature probes, the HTTP surface),
        each text read from the release once and spilled to a temporary file for the later
        passes, none kept in memory (:mod:`driftcheck.host.texts`); the snapshot keeps only the
        modules a scan visited. An unreadable file is left out."""
        cached = self.__dict__.get("_source_texts")
        if cached is None:
            tree = getattr(self.tree, "real", self.tree)
            own = [r for r in self.tree.python_files() if self.owns(self.tree.module_name(r))]
            cached = SourceTexts(read=tree.read_text, files=own, spill=tree.spill_dir)
            self.__dict__["_source_texts"] = cached
        return cached

    def loaded_files(self) -> int:
        """How many host files were visited so far."""
        return len(self.texts)

    # -- lookups ---------------------------------------------------------------------------
    def resolve(self, path: str, _seen: frozenset[str] = frozenset(), imported: int = 0) -> Lookup:
        """Resolve a dotted path through modules, re-exports and class bases (memoised: a
        release does not change).

        ``imported``: how many leading parts the import system brings in (``from
        numpy.compat.py3k import asstr``: all of them); a submodule among them is imported
        whatever its package's ``__getattr__`` says, only the parts read after them as
        attributes (``np.compat.py3k``) meet it.
        """
        imported = imported if imported > 1 else 0
        if _seen:
            return self._resolve(path, _seen, imported)
        memo = self.__dict__.setdefault("_resolved", {})
        key = (path, imported) if imported else path
        if key not in memo:
            memo[key] = self._resolve(path, _seen, imported)
        return memo[key]

    def _resolve(self, path: str, _seen: frozenset[str], imported: int = 0) -> Lookup:
        if not path or not self.owns(path) or path in _seen:
            return UNKNOWN if path in _seen else None
        seen = _seen | {path}
        parts = path.split(".")
        for i in range(len(parts), 0, -1):
            modpath = ".".join(parts[:i])
            mod = self.module(modpath)
            if mod is not None:
                break
        else:
            return None
        # ``np.compat``: a package's __getattr__ may stand in the way of an attribute read
        for k in range(max(1, imported), i):
            parent = self.modules.get(".".join(parts[:k]))
            if parent is not None and "__getattr__" in parent.members:
                bound = parent.members.get(parts[k])
                if bound is None or isinstance(bound, griffe.Module):
                    got = self.member(Found(parent, ".".join(parts[:k])), parts[k], seen)
                    if isinstance(got, Served):
                        return got
        current: Lookup = Found(mod, modpath)
        for name in parts[i:]:
            if not isinstance(current, Found):
                return current
            current = self.member(current, name, seen)
        return current

    def member(
        self,
        owner: Found,
        name: str,
        _seen: frozenset[str] = frozenset(),
        namespace_only: bool = False,
    ) -> Lookup:
        """Look ``name`` up on a module or class (classes: through the MRO).

        On a module, the way ``import`` finds it: its own bindings, its submodules, its
        ``from x import *`` statements, its ``.pyi`` stub, then its ``__getattr__`` read as data
        (``namespace_only`` stops before the stub and ``__getattr__``: what a star import
        without ``__all__`` copies is the namespace alone).
        """
        obj = owner.obj
        if isinstance(obj, griffe.Module):
            memo = self.__dict__.setdefault("_module_members", {})
            key = (owner.path, name, namespace_only)
            if key in memo:
                return memo[key]
            got = self._module_member(owner, name, _seen, namespace_only)
            if _seen and not isinstance(got, Found | Served):
                # Looked up inside another resolution: a cycle cut short there (numpy 2's
                # ndarray, re-exported by a module whose stub names numpy.ndarray) may have
                # made it absent; only a lookup of its own decides that.
                return got
            memo[key] = got
            return got
        if isinstance(obj, griffe.Class):
            return self.class_member(owner, name, _seen)
        if isinstance(obj, griffe.Attribute):
            cls = self.annotation_class(obj.annotation, obj)
            if cls is not None:
                return self.class_member(cls, name, _seen)
        return UNKNOWN

    def _follow(
        self, member: griffe.Object | griffe.Alias, path: str, seen: frozenset[str]
    ) -> Lookup:
        if isinstance(member, griffe.Alias):
            target = member.target_path
            if not self.owns(target):
                return UNKNOWN
            return self.resolve(target, seen)
        if isinstance(member, griffe.Attribute):
            # ``AsyncLLMEngine = AsyncLLM``: a module-level name bound to another host object is
            # that object (a class alias, a function alias), not an attribute of its own.
            aliased = _canonical(member.value) if member.value is not None else None
            if aliased and aliased != path and self.owns(aliased) and member.parent is not None:
                if isinstance(member.parent, griffe.Module) and _is_plain_name(member.value):
                    got = self.resolve(aliased, seen)
                    if isinstance(got, Found) and got.kind in ("class", "function"):
                        return got
            elif (
                aliased
                and "." in aliased
                and not self.owns(aliased)
                and isinstance(member.parent, griffe.Module)
                and _is_plain_name(member.value)
            ):
                # ``Future = asyncio.Future``: another distribution's object (the standard
                # library's), present; its members are that object's, not read here.
                return Served(
                    PRESENT,
                    path,
                    file=Found(member, path).file,
                    line=member.lineno or 0,
                    returns=aliased,
                )
            if isinstance(member.parent, griffe.Class):
                got = self._class_alias(member, path)
                if got is not None:
                    return got
        return Found(member, path)

    def _class_alias(self, member: griffe.Attribute, path: str) -> Found | None:
        """``opener = open`` / ``build = staticmethod(make)`` in a class body: the method it
        names (its signature is the alias's)."""
        value = member.value
        wrapper = ""
        if isinstance(value, griffe.ExprCall) and len(value.arguments) == 1:
            wrapper = str(value.function)
            value = value.arguments[0]
            if wrapper not in ("staticmethod", "classmethod"):
                return None
        if not isinstance(value, griffe.ExprName | str):
            return None
        name = str(value)
        sibling = member.parent.members.get(name) if member.parent is not None else None
        if not isinstance(sibling, griffe.Function) or sibling is member:
            return None
        if wrapper in ("staticmethod", "classmethod") and wrapper not in sibling.labels:
            return None  # the wrapper changes how it binds: no one signature to take
        return Found(sibling, path)

    def mro(self, cls: Found, _depth: int = 0) -> tuple[list[Found], bool]:
        """Host classes in method-resolution order, and whether every base was resolved."""
        out: list[Found] = [cls]
        complete = True
        if _depth > 30 or not isinstance(cls.obj, griffe.Class):
            return out, complete
        busy = self.__dict__.setdefault("_mro_busy", set())
        if cls.path in busy:  # a base named through a class whose MRO is being read
            return out, False
        # Asked once per use: an MRO read from the top (no other being read) is kept.
        done = self.__dict__.setdefault("_mro_done", {})
        top = not busy
        if top and cls.path in done:
            chain, complete = done[cls.path]
            return list(chain), complete
        busy.add(cls.path)
        try:
            got = self._mro(cls, out, _depth)
        finally:
            busy.discard(cls.path)
        if top:
            done[cls.path] = (list(got[0]), got[1])
        return got

    def _mro(self, cls: Found, out: list[Found], _depth: int) -> tuple[list[Found], bool]:
        complete = True
        for base in cast(griffe.Class, cls.obj).bases:  # an MRO is asked of classes only
            path = _canonical(base)
            if path in (None, "object", "builtins.object"):
                continue
            if path in (
                "typing.Generic",
                "typing.Protocol",
                "abc.ABC",
                "typing_extensions.Protocol",
            ):
                continue
            found = self.resolve(path) if self.owns(path) else UNKNOWN
            if isinstance(found, Found) and isinstance(found.obj, griffe.Class):
                sub, sub_complete = self.mro(found, _depth + 1)
                out.extend(s for s in sub if s.path not in {o.path for o in out})
                complete = complete and sub_complete
            else:
                complete = False
        return out, complete

    def class_member(self, cls: Found, name: str, _seen: frozenset[str] = frozenset()) -> Lookup:
        """A class member through the host part of the MRO.

        Returns None only when every class on the MRO is the host's and none defines it (nor a
        ``__getattr__``); when a base lies outside the host, returns UNKNOWN instead.
        """
        chain, complete = self.mro(cls)
        for klass in chain:
            members = klass.obj.members
            if name in members:
                return self._follow(members[name], f"{klass.path}.{name}", _seen)
        if any("__getattr__" in k.obj.members for k in chain):
            return UNKNOWN
        return None if complete else UNKNOWN

    def defined_in_host_mro(self, cls: Found, name: str) -> Found | None:
        """Where the host part of a class's MRO defines ``name`` (ignores external bases)."""
        chain, _ = self.mro(cls)
        for klass in chain:
            if name in klass.obj.members:
                got = self._follow(klass.obj.members[name], f"{klass.path}.{name}", frozenset())
                return got if isinstance(got, Found) else None
        return None

    # -- types -----------------------------------------------------------------------------
    def annotation_class(
        self, annotation: object, context: griffe.Object | None = None
    ) -> Found | None:
        """The host class an annotation names (``X``, ``X | None``, ``Optional[X]``)."""
        for path in annotation_paths(annotation):
            found = self.resolve(path) if self.owns(path) else None
            if isinstance(found, Found) and isinstance(found.obj, griffe.Class):
                return found
        return None

    def return_class(self, func: Found) -> Found | None:
        """The host class a function's return annotation names, when it names exactly one."""
        if not isinstance(func.obj, griffe.Function):
            return None
        return self.annotation_class(func.obj.returns, func.obj)

    def class_node(self, cls: Found) -> ast.ClassDef | None:
        """The ``ast`` node of a host class (for facts the API model does not carry)."""
        return cast(ast.ClassDef | None, self.def_node(cls))  # a class's line is its class

    def def_node(
        self, found: Found
    ) -> ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef | None:
        """The ``ast`` node of a host class or function, found by its line (the same node each
        time it is asked)."""
        module = found.obj.module.path
        text = self.module_text(module)
        if text is None:
            return None
        asked = self.__dict__.setdefault("_defs", {}).setdefault(module, {})
        key = (found.obj.name, found.line)
        if key not in asked:
            asked[key] = self._definition(module, text, key, _lines_of(found))
        return asked[key]

    def _definition(
        self, module: str, text: str, key: tuple[str, int], lines: tuple[int, int] | None = None
    ) -> _Def | None:
        """One definition of a module. Only what is asked for is kept: the module is parsed
        once for where each definition lies, and a definition asked for later is parsed from
        its own lines. Keeping the whole tree for the few definitions asked of it held 58 MB
        at the peak of transformers' scan against torch (19 modules of stubs and large files).
        A tree kept for other readers (:meth:`_ast`) gives its own node.

        ``lines``: the definition's first line (its first decorator's) and last line, as the
        visit of the module read them: then the definition is parsed from those lines alone,
        and the whole module only where they are not all of that definition (a scan of
        transformers with torch's snapshot cached parsed torch's largest modules whole for a
        few definitions each)."""
        kept = self.__dict__.get("_ast_cache", {})
        spans = self.__dict__.setdefault("_def_spans", {})
        if module not in kept and module not in spans and lines is not None and "\r" not in text:
            starts = self.__dict__.setdefault("_def_starts", {})
            if module not in starts:
                starts[module] = _line_starts(text)
            span = _lines_span(starts[module], text, *lines)
            node = _parse_definition(text, key[0], span) if span is not None else None
            if node is not None and _whole_at(text, starts[module], *lines):
                return node
        if module not in kept and module in spans:
            span = spans[module].get(key)
            if span is None:
                return None
            node = _parse_definition(text, key[0], span)
            if node is not None:
                return node
        tables = self.__dict__.setdefault("_kept_defs", {})
        table = tables.get(module)
        if table is None:
            tree = kept[module] if module in kept else _parse(text)
            table = {}
            for node in _definitions(tree.body if tree is not None else []):
                for line in (node.lineno, *(d.lineno for d in node.decorator_list)):
                    table.setdefault((node.name, line), node)
            if module in kept or "\r" in text:
                # nodes of a tree kept anyway; or lines the parser also ends at ``\r``,
                # numbered otherwise than the spans count them: the table is kept
                tables[module] = table
            else:
                starts = _line_starts(text)
                spans[module] = {k: _span(n, starts) for k, n in table.items()}
        return table.get(key)

    def _ast(self, modpath: str, text: str) -> ast.Module | None:
        cache = self.__dict__.setdefault("_ast_cache", {})
        if modpath not in cache:
            try:
                cache[modpath] = ast.parse(text)
            except (SyntaxError, ValueError):
                cache[modpath] = None
        return cache[modpath]


_DEFS = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
_Def = ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
#: Where a definition lies: its first line (its first decorator's), its last line, its own line,
#: whether it is indented, and where its first line starts and its last line ends in the text.
_Span = tuple[int, int, int, bool, int, int]


def _parse(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def _line_starts(text: str) -> list[int]:
    """Where each line of a text without ``\\r`` starts, and one past its end."""
    return [0, *accumulate(len(line) + 1 for line in text.split("\n"))]


def _span(node: _Def, starts: list[int]) -> _Span:
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    last = node.end_lineno or node.lineno
    return first, last, node.lineno, node.col_offset > 0, starts[first - 1], starts[last] - 1


def _lines_span(starts: list[int], text: str, first: int, last: int) -> _Span | None:
    """The span of a definition known only by its first and last lines (None: the text has
    no such lines): its own line is not known (0: its first line is checked instead, see
    :func:`_parse_definition`)."""
    if not 0 < first <= last < len(starts):
        return None
    start = starts[first - 1]
    return first, last, 0, text[start : start + 1] in (" ", "\t"), start, starts[last] - 1


def _lines_of(found: Found) -> tuple[int, int] | None:
    """A definition's first line (its first decorator's) and last line, as griffe read them."""
    obj = found.obj
    last = getattr(obj, "endlineno", None)
    if not last or not obj.lineno:
        return None
    decorators = [d.lineno for d in getattr(obj, "decorators", ()) or () if d.lineno]
    return min([obj.lineno, *decorators]), last


def _whole_at(text: str, starts: list[int], first: int, last: int) -> bool:
    """Whether a definition whose lines ``first`` to ``last`` parse as one is all there: the
    line of code above is no decorator's (``@``, or a bracket not indented deeper than the
    definition, which may close one) and the one below is not indented deeper than its first
    line (a body cut short parses too). Where that cannot be told (tabs and spaces mixed, a
    form feed), False."""
    head = text[starts[first - 1] : starts[first] - 1]
    own = head[: len(head) - len(head.lstrip(" \t"))]
    for n in range(first - 2, -1, -1):
        line = text[starts[n] : starts[n + 1] - 1]
        code = line.lstrip(" \t")
        if not code or code.startswith("#"):
            continue
        if code.startswith(("@", "\f")) or (
            code.startswith((")", "]", "}")) and own.startswith(line[: len(line) - len(code)])
        ):
            return False  # a decorator's line, or the end of a bracket one may have opened
        break
    for n in range(last, len(starts) - 1):
        line = text[starts[n] : starts[n + 1] - 1]
        code = line.lstrip(" \t")
        if not code or code.startswith("#"):
            continue
        if code.startswith("\f"):
            return False  # a form feed resets the indent's count: not known
        indent = line[: len(line) - len(code)]
        return own.startswith(indent)  # as deep or shallower: the definition ended above
    return True


def _parse_definition(text: str, name: str, span: _Span) -> _Def | None:
    """Definition ``name`` at ``span`` parsed from its own lines, at the same lines and columns
    as in the whole module (an indented one inside an ``if 1:`` on the line above); None where
    what is parsed is not that definition."""
    first, last, line, indented, start, end = span
    head = "\n" * (first - 2) + "if 1:\n" if indented else "\n" * (first - 1)
    try:
        body = ast.parse(head + text[start:end]).body
    except (SyntaxError, ValueError, RecursionError):
        return None
    if indented and len(body) == 1 and isinstance(body[0], ast.If):
        body = body[0].body
    node = body[0] if len(body) == 1 else None
    if (
        isinstance(node, _DEFS)
        and node.name == name
        and (node.end_lineno, node.col_offset > 0) == (last, indented)
        and (
            node.lineno == line
            or (line == 0 and min([node.lineno, *(d.lineno for d in node.decorator_list)]) == first)
        )
    ):
        return node
    return None


def _definitions(
    body: list[ast.stmt],
) -> list[ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef]:
    """Every class and function defined in ``body``, at any depth (statements only are walked:
    a definition is a statement, so expressions need not be)."""
    out = []
    todo = list(body)
    while todo:
        stmt = todo.pop()
        if isinstance(stmt, _DEFS):
            out.append(stmt)
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            block = getattr(stmt, name, None)
            if isinstance(block, list):
                todo.extend(block)
    return out


_canonical = canonical


def _is_plain_name(value: object) -> bool:
    """True for an expression that only names something (``A`` or ``a.b.C``), no call."""
    return type(value).__name__ in ("ExprName", "ExprAttribute")
