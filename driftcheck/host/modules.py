"""How a host module's names are found (a mixin of :class:`driftcheck.host.api.HostAPI`): its
own bindings, its submodules, its star imports, its stub, its ``__getattr__`` read as data
(:mod:`driftcheck.host.namespace`, :mod:`driftcheck.host.served`); ``del``eted names and
namespaces written at run time; what stays undecided."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import griffe

from driftcheck.host.namespace import (
    Exports,
    exports,
    module_getattr,
    star_lookup,
    stub_lookup,
    written,
)
from driftcheck.host.objects import UNKNOWN, Found, Lookup
from driftcheck.host.values import DEPRECATED, PRESENT, REMOVED, Served


class ModuleNames:
    """Module lookups; the host API supplies ``module``, ``module_text``, ``tree`` and the rest."""

    tree: Any
    modules: dict
    unknown_names: set[str]
    parse_errors: list[tuple[str, str]]
    module: Callable[[str], griffe.Module | None]
    module_text: Callable[[str], str | None]
    owns: Callable[[str], bool]
    resolve: Callable[..., Lookup]
    member: Callable[..., Lookup]
    fact: Callable[[str, Callable[[], object]], Any]
    _follow: Callable[..., Lookup]
    _ast: Callable[[str, str], ast.Module | None]

    def _module_member(
        self, owner: Found, name: str, _seen: frozenset[str], namespace_only: bool
    ) -> Lookup:
        """:meth:`member` on a module (memoised there: a module's namespace does not change)."""
        obj = owner.obj
        sub = f"{owner.path}.{name}"
        bound = obj.members.get(name)
        # A griffe Module member is a visited submodule, not a binding of the package.
        if (
            bound is not None
            and not isinstance(bound, griffe.Module)
            and name not in self._deleted(owner.path)
        ):
            got = self._follow(obj.members[name], sub, _seen)
            if got is UNKNOWN and not namespace_only:
                # ``from ._core import float64``, bound at run time: the stub declares it.
                stubbed = stub_lookup(self, owner, name, _seen)
                if stubbed is not None:
                    return stubbed
            if got is UNKNOWN and isinstance(bound, griffe.Alias) and not namespace_only:
                # Not through a star import: an open ``__all__`` only guesses what it copies,
                # and the importing module's ``__getattr__`` may still decide (numpy 1.24's
                # ``np.float``, bound in numerictypes, not exported, removed by name).
                return self._reexport(bound, sub) or got
            return got
        if self.module(sub) is not None:
            if "__getattr__" in obj.members and not namespace_only:
                # A submodule the package does not import is no attribute of it until
                # imported: where its ``__getattr__`` picks the name out, that is what
                # ``pkg.sub`` does (numpy 2.0's ``np.compat``). Imports still find it.
                served = module_getattr(self, owner, name)
                if isinstance(served, Served) and served.status in (REMOVED, DEPRECATED):
                    return served
            return Found(self.modules[sub], sub)
        if getattr(obj, "compiled", False):
            return self._unknown(sub)
        line = self._unpacked(owner.path).get(name)
        if line is not None:  # ``(A, B, _) = list(Style)``: bound, though griffe skips it
            file = self.tree.module_file(owner.path) or ""
            return Served(PRESENT, sub, file=file, line=line)
        starred = star_lookup(self, owner, name, _seen)
        if starred is not None and starred is not UNKNOWN:
            return starred
        dynamic = self._dynamic(owner, name) if starred is None else None
        if isinstance(dynamic, Served) and not namespace_only:
            return dynamic  # set at run time by a loop the module's own code spells out
        if namespace_only:
            if isinstance(dynamic, Served):
                dynamic = UNKNOWN  # what a star import copies of it stays a guess, as before
            if dynamic is UNKNOWN:
                self.unknown_names.add(sub)
                return UNKNOWN
            return starred
        # The module's ``__getattr__`` runs for what the namespace lacks: where it picks the
        # name out (serves it, warns, raises) that is what happens, whatever the stub says.
        has_getattr = "__getattr__" in obj.members
        served = module_getattr(self, owner, name) if has_getattr else None
        if served is not None and served is not UNKNOWN:
            return served
        stubbed = stub_lookup(self, owner, name, _seen)
        if stubbed is not None:
            return stubbed
        if served is UNKNOWN or starred is UNKNOWN:
            return self._unknown(sub)
        if not has_getattr and dynamic is UNKNOWN:
            return self._unknown(sub)
        return None  # not bound, and the module's ``__getattr__`` raises the catch-all

    def exports(self, module: str) -> Exports | None:
        """``module.__all__`` as the module builds it (None when it defines none)."""
        return exports(self, module)

    def _deleted(self, module: str) -> frozenset[str]:
        """Names the module's top level ``del``s once bound (griffe keeps them as members)."""
        cache = self.__dict__.setdefault("_deleted_names", {})
        if module not in cache:
            cache[module] = frozenset(
                self.fact(f"deleted:{module}", lambda: self._read_deleted(module))
            )
        return cache[module]

    def _read_deleted(self, module: str) -> list[str]:
        text = self.module_text(module) or ""
        names: set[str] = set()
        if "\ndel " in text or text.startswith("del "):
            tree = self._ast(module, text)
            for stmt in _top_level(tree.body if tree is not None else []):
                if isinstance(stmt, ast.Delete):
                    names.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
        return sorted(names)

    def _unpacked(self, module: str) -> dict[str, int]:
        """Names the module's top level binds by unpacking (``a, b = pair``, ``(X, Y, _) =
        list(Style)``, ``[*rest] = ...``) with their lines: griffe records no member for a
        tuple target, yet the name is bound as surely as by ``a = ...``."""
        cache = self.__dict__.setdefault("_unpacked_names", {})
        if module not in cache:
            cache[module] = {
                str(k): int(v)
                for k, v in self.fact(
                    f"unpacked:1:{module}", lambda: self._read_unpacked(module)
                ).items()
            }
        return cache[module]

    def _read_unpacked(self, module: str) -> dict[str, int]:
        text = self.module_text(module) or ""
        if not _UNPACKING.search(text):
            return {}
        tree = self._ast(module, text)
        names: dict[str, int] = {}
        for stmt in _top_level(tree.body if tree is not None else []):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else []
            for target in targets:
                if isinstance(target, ast.Tuple | ast.List):
                    for bound in _unpacked_names(target):
                        names.setdefault(bound, stmt.lineno)
        return names

    def _open(self, module: Found) -> bool:
        """Whether the module writes its own namespace at run time (``globals()[k] = v``)."""
        cache = self.__dict__.setdefault("_open_modules", {})
        if module.path not in cache:

            def read() -> bool:
                text = self.module_text(module.path) or ""
                return _OPEN_NAMESPACE.search(text) is not None

            cache[module.path] = bool(self.fact(f"open:2:{module.path}", read))
        return cache[module.path]

    def _dynamic(self, owner: Found, name: str) -> Lookup:
        """``name`` as the module's run-time writes to its own globals bind it: present where a
        loop over literal names (or another module's ``__all__``) sets it, None where every
        write was read and none sets it, UNKNOWN where some write could not be read."""
        if not self._open(owner):
            return None
        got = written(self, owner.path)
        path, file = f"{owner.path}.{name}", self.tree.module_file(owner.path) or ""
        if name in got.names:
            return Served(PRESENT, path, file=file, line=got.names[name])
        if name in got.maybe:
            return UNKNOWN
        if got.foreign and not name.startswith("_"):
            # ``for k in numpy.__all__: globals()[k] = …``: the other distribution's names,
            # which this host cannot list; a public name is taken as copied.
            module, line = got.foreign[0]
            return Served(
                PRESENT,
                path,
                message=f"copied from {module}.__all__",
                file=file,
                line=line,
                returns=f"{module}.{name}",
            )
        return None if got.complete else UNKNOWN

    def _reexport(self, alias: griffe.Alias, path: str) -> Served | None:
        """A module-level import of another distribution's object (``from builtins import
        float``, ``from numpy import pi``): present, standing for that object."""
        try:
            target = alias.target_path
        except Exception:  # griffe cannot always name an alias's target
            return None
        if not target or self.owns(target) or alias.parent is None:
            return None
        if not isinstance(alias.parent, griffe.Module):
            return None
        file = self.tree.module_file(alias.parent.path) or ""
        return Served(PRESENT, path, file=file, line=alias.alias_lineno or 0, returns=target)

    def _unknown(self, path: str) -> Lookup:
        """A module attribute the host's own files leave undecided: what the host's stub
        distribution (``<pkg>-stubs``) declares, else UNKNOWN (counted for the stats)."""
        declared = self._distributed_stub(path)
        if declared is not None:
            return declared
        self.unknown_names.add(path)
        return UNKNOWN

    def _distributed_stub(self, path: str) -> Lookup:
        """``path`` as a separate ``<pkg>-stubs`` distribution of this release declares it."""
        provider = getattr(self, "stub_provider", None)
        if provider is None or "." not in path:
            return None
        cache = self.__dict__.setdefault("_dist_stubs", {})
        if "tree" not in cache:
            try:
                cache["tree"] = provider()
            except Exception:  # no stubs, no network: the name stays undecided
                cache["tree"] = None
        tree = cache["tree"]
        module, _, name = path.rpartition(".")
        if tree is None:
            return None
        if module not in cache:
            top, _, rest = module.replace(".", "/").partition("/")
            stubs = f"{top}-stubs/{rest}" if rest else f"{top}-stubs"
            rel = next(
                (c for c in (f"{stubs}.pyi", f"{stubs}/__init__.pyi") if tree.exists(c)), None
            )
            try:
                cache[module] = (
                    griffe.visit(
                        module.rsplit(".", 1)[-1], filepath=Path(rel), code=tree.read_text(rel)
                    )
                    if rel
                    else None
                )
            except Exception:  # an unreadable stub narrows nothing
                cache[module] = None
        stub = cache[module]
        if stub is None:
            return None
        member = stub.members.get(name)
        if isinstance(member, griffe.Function | griffe.Class | griffe.Attribute):
            return Found(member, path)
        if member is not None or stub.overloads.get(name):
            return Served(PRESENT, path, file=str(stub.filepath))
        return None

    def stub(self, dotted: str) -> griffe.Module | None:
        """The ``.pyi`` stub beside module ``dotted``'s ``.py`` file (None without one)."""
        stubs = self.__dict__.setdefault("_stubs", {})
        if dotted in stubs:
            return stubs[dotted]
        stubs[dotted] = None
        rel = self.stub_file(dotted)
        if rel is not None:
            try:
                stubs[dotted] = griffe.visit(
                    dotted.rsplit(".", 1)[-1],
                    filepath=Path(rel),
                    code=self.tree.read_text(rel),
                    parent=self.module(dotted.rsplit(".", 1)[0]) if "." in dotted else None,
                )
            except Exception as exc:  # an unreadable stub only narrows what is known
                self.parse_errors.append((rel, f"{type(exc).__name__}: {exc}"))
        return stubs[dotted]

    def stub_file(self, dotted: str) -> str | None:
        """The stub file of a module whose source is a ``.py`` file (or compiled): beside it,
        or in a ``<package>-stubs`` folder of the same tree (PEP 561 stub packages)."""
        rel = self.tree.module_file(dotted)
        if rel is not None and rel.endswith(".pyi"):
            return None  # the stub is the module itself
        base = dotted.replace(".", "/")
        top, _, rest = base.partition("/")
        stubs = f"{top}-stubs/{rest}" if rest else f"{top}-stubs"
        for cand in (
            f"{base}.pyi",
            f"{base}/__init__.pyi",
            f"{stubs}.pyi",
            f"{stubs}/__init__.pyi",
        ):
            if self.tree.exists(cand):
                return cand
        return None


_OPEN_NAMESPACE = re.compile(
    r"\b(?:globals|vars)\(\)\s*(?:\[|\.update\(|\.setdefault\()"
    r"|setattr\(\s*sys\.modules\[__name__\]|sys\.modules\[__name__\]\.__dict__\.update"
    r"|^[ \t]+global[ \t]+\w",
    re.MULTILINE,
)


#: A line that may start an unpacking assignment at the top level (``a, b =``, ``(a,``, ``[a,``).
_UNPACKING = re.compile(r"^(?:[(\[]|[A-Za-z_]\w*\s*,)", re.M)


def _unpacked_names(target: ast.Tuple | ast.List) -> list[str]:
    """The plain names an unpacking target binds, through nested tuples and ``*rest``."""
    out: list[str] = []
    for elt in target.elts:
        if isinstance(elt, ast.Starred):
            elt = elt.value
        if isinstance(elt, ast.Name):
            out.append(elt.id)
        elif isinstance(elt, ast.Tuple | ast.List):
            out.extend(_unpacked_names(elt))
    return out


def _top_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """Module-level statements, through ``if``/``try`` blocks (not into functions)."""
    out: list[ast.stmt] = []
    for stmt in body:
        out.append(stmt)
        if isinstance(stmt, ast.If | ast.Try):
            for block in (stmt.body, stmt.orelse, getattr(stmt, "finalbody", [])):
                out.extend(_top_level(block))
            for handler in getattr(stmt, "handlers", []):
                out.extend(_top_level(handler.body))
    return out
