"""A host module's namespace the way the import system builds it.

* :func:`exports` — ``__all__`` read from every module-level statement that builds it
  (``=``, ``+=``, ``.extend``, ``.append``, other modules' ``__all__``), with whether it is
  complete (a loop or an unreadable part leaves it open).
* :func:`star_lookup` — a name brought in by ``from .x import *``: through ``x.__all__`` when
  ``x`` has one, else through ``x``'s public names (chained, cycle-safe).
* :func:`module_getattr` — what the module's ``__getattr__`` does for a name
  (:mod:`driftcheck.host.served`), as a lookup.

Lookups answer a :class:`~driftcheck.host.objects.Found`, a
:class:`~driftcheck.host.served.Served` (present without a known object, deprecated, removed),
``UNKNOWN`` or ``None`` (absent).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass

import griffe

from driftcheck.host.objects import UNKNOWN, Found, Lookup
from driftcheck.host.served import Interpreter, serve
from driftcheck.host.values import (
    ABSENT,
    DEPRECATED,
    PRESENT,
    REMOVED,
    UNK,
    HostAPI,
    Mod,
    Served,
    Trace,
    module_statements,
)


@dataclass(frozen=True)
class Exports:
    """A module's ``__all__``: the names it lists, and whether that list is all of it."""

    names: frozenset[str]
    complete: bool


def exports(api: HostAPI, module: str) -> Exports | None:
    """``module.__all__`` (None when the module defines none)."""
    row = api.fact(f"exports:{module}", lambda: _exports_row(api, module))
    if row is None:
        return None
    names, complete = row
    return Exports(frozenset(names), bool(complete))


def _exports_row(api: HostAPI, module: str) -> list | None:
    text = api.module_text(module)
    tree = api._ast(module, text) if text is not None else None
    if tree is None:
        return None
    cache = api.__dict__.setdefault("_exports_busy", set())
    if module in cache:  # ``a.__all__`` built from ``b.__all__`` built from ``a.__all__``
        return [[], False]
    cache.add(module)
    try:
        return _read_all(api, module, tree)
    finally:
        cache.discard(module)


def _read_all(api: HostAPI, module: str, tree: ast.Module) -> list | None:
    interp = Interpreter(api, module)
    names: list[str] = []
    complete = True
    seen = False

    def add(node: ast.expr, replace: bool = False) -> None:
        nonlocal complete, names
        value = interp.expr(node, Trace({}), module, 0)
        if isinstance(value, str):
            value = (value,)
        if not isinstance(value, tuple | list | frozenset | set) or UNK in value:
            complete = False
            if replace:
                names = []
            return
        got = [v for v in value if isinstance(v, str)]
        names = got if replace else names + got

    top = module_statements(tree.body)
    for stmt in top:
        if isinstance(stmt, ast.Assign) and _is_all(stmt.targets):
            seen = True
            add(stmt.value, replace=True)
        elif isinstance(stmt, ast.AnnAssign) and _is_all([stmt.target]) and stmt.value:
            seen = True
            add(stmt.value, replace=True)
        elif isinstance(stmt, ast.AugAssign) and _is_all([stmt.target]):
            add(stmt.value)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            func = stmt.value.func
            if (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id == "__all__"
            ):
                if func.attr in ("extend", "append") and stmt.value.args:
                    add(stmt.value.args[0])
                elif func.attr == "remove" and stmt.value.args:
                    value = interp.expr(stmt.value.args[0], Trace({}), module, 0)
                    names = [n for n in names if n != value]
                else:
                    complete = False
    if not seen:
        return None
    # ``__all__`` changed inside a loop or a function: the list is open.
    inside = {id(s) for s in top}
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and id(node) not in inside and _touches_all(node):
            if not isinstance(node, ast.If | ast.Try | ast.With | ast.Module):
                complete = False
    return [sorted(set(names)), complete]


def _is_all(targets: Sequence[ast.expr]) -> bool:
    return any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets)


def _touches_all(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Assign | ast.AugAssign | ast.AnnAssign):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return _is_all(targets)
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        func = stmt.value.func
        return (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == "__all__"
        )
    if isinstance(stmt, ast.For | ast.While | ast.FunctionDef):
        return any(_touches_all(s) for s in stmt.body if isinstance(s, ast.stmt))
    return False


def star_lookup(api: HostAPI, owner: Found, name: str, seen: frozenset[str]) -> Lookup:
    """``name`` as one of ``owner``'s ``from x import *`` statements brings it (or None)."""
    result: Lookup = None
    for key, alias in owner.obj.members.items():
        if not key.endswith("/*") or not isinstance(alias, griffe.Alias):
            continue
        source = alias.target_path
        if not api.owns(source):
            result = UNKNOWN  # a foreign module's star import can bring any name
            continue
        mark = f"{source}.{name}"
        if mark in seen:
            continue
        mod = api.module(source)
        if mod is None:
            continue
        listed = exports(api, source)
        if listed is not None:
            if name in listed.names:
                got = api.member(Found(mod, source), name, seen | {mark})
                return got if got is not None else UNKNOWN  # listed, bound at run time
            if not listed.complete:
                # An open ``__all__`` (built in a loop, by a helper) copies what its module
                # binds: a public name the module binds is taken as exported.
                if not name.startswith("_"):
                    got = api.member(Found(mod, source), name, seen | {mark}, namespace_only=True)
                    if got is UNKNOWN:
                        result = UNKNOWN
                    elif got is not None:
                        return got
            continue
        if name.startswith("_"):
            continue  # without __all__, a star import skips private names
        got = api.member(Found(mod, source), name, seen | {mark}, namespace_only=True)
        if got is UNKNOWN:
            result = UNKNOWN
        elif got is not None:
            return got
    return result


def module_getattr(api: HostAPI, owner: Found, name: str) -> Lookup:
    """What the module's ``__getattr__`` answers for ``name``, as a lookup."""
    served = serve(api, owner.path, name)
    if served.status == PRESENT:
        if served.returns and api.owns(served.returns) and served.returns != served.path:
            got = api.resolve(served.returns)
            if isinstance(got, Found):
                return got
        return served
    if served.status in (DEPRECATED, REMOVED):
        return served
    if served.status == ABSENT:
        return None
    return UNKNOWN


def stub_lookup(api: HostAPI, owner: Found, name: str, seen: frozenset[str]) -> Lookup:
    """``name`` as the module's ``.pyi`` stub declares it (None when there is no stub or the
    stub does not declare it)."""
    stub = api.stub(owner.path)
    if stub is None:
        return None
    if name not in stub.members:
        if stub.overloads.get(name):  # only ``@overload`` signatures: present, no one signature
            first = stub.overloads[name][0]
            return Served(
                PRESENT,
                f"{owner.path}.{name}",
                file=api.stub_file(owner.path) or "",
                line=getattr(first, "lineno", 0) or 0,
            )
        return None
    member = stub.members[name]
    if isinstance(member, griffe.Alias):
        target = member.target_path
        if api.owns(target) and f"{target}" not in seen:
            got = api.resolve(target, seen | {f"{owner.path}.{name}"})
            if isinstance(got, Found):
                return got
        return Served(PRESENT, f"{owner.path}.{name}", file=api.stub_file(owner.path) or "")
    return Found(member, f"{owner.path}.{name}")


@dataclass(frozen=True)
class Written:
    """The names a module writes into its own namespace at run time (``globals()[n] = v``).

    ``names``: name -> line of the write, from loops over literal tuples, lists, dict keys or
    another host module's complete ``__all__``, and from literal keys. ``foreign``: (module,
    line) of loops that copy another distribution's ``__all__`` (scipy's ``for k in
    numpy.__all__: globals()[k] = …``): any public name may come from there. ``complete``:
    every write was read (else the module's other names stay undecided).
    """

    names: dict[str, int]
    foreign: tuple[tuple[str, int], ...]
    complete: bool
    #: Names a loop sets under an ``if`` or ``try`` (``float128`` where the platform has it).
    maybe: frozenset[str] = frozenset()


def written(api: HostAPI, module: str) -> Written:
    """What ``module`` writes into its own globals (a fact kept in the snapshot)."""
    row = api.fact(f"written:5:{module}", lambda: _written_row(api, module))
    names, foreign, complete, maybe = row
    return Written(
        {str(k): int(v) for k, v in names},
        tuple((str(m), int(n)) for m, n in foreign),
        bool(complete),
        frozenset(str(n) for n, _ in maybe),
    )


def _written_row(api: HostAPI, module: str) -> list:
    text = api.module_text(module) or ""
    tree = api._ast(module, text) if text else None
    if tree is None:
        return [[], [], False, []]
    interp = Interpreter(api, module)
    names: dict[str, int] = {}
    maybe: dict[str, int] = {}
    foreign: list[tuple[str, int]] = []
    read = 0
    for name, line, guarded in _global_writes(tree):
        (maybe if guarded else names).setdefault(name, line)
    for stmt in module_statements(tree.body):
        if not isinstance(stmt, ast.For):
            key = _written_key(stmt)
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                names.setdefault(key.value, stmt.lineno)
                read += 1
            continue
        var = loop_variable(stmt.target)
        writes = [
            n for n in ast.walk(stmt) if isinstance(n, ast.stmt | ast.expr) and _written_key(n)
        ]
        if var is None or not writes:
            continue
        keys = [_written_key(w) for w in writes]
        if not all(isinstance(k, ast.Name) and k.id == var for k in keys):
            continue
        source = _all_of_foreign(interp, stmt.iter, module)
        if source is not None:
            foreign.append((source, writes[0].lineno))
            read += len(writes)
            continue
        loop = _loop_values(interp, stmt.iter, module)
        if loop is None:
            continue
        ids = {id(w) for w in writes}
        guarded = any(
            isinstance(node, ast.If | ast.Try) and any(id(n) in ids for n in ast.walk(node))
            for node in ast.walk(stmt)
        )
        for name in loop:  # a write under ``if``/``try`` may not run: those stay undecided
            (maybe if guarded else names).setdefault(name, writes[0].lineno)
        read += len(writes)
    total = sum(1 for node in ast.walk(tree) if _writes_namespace(node))
    return [sorted(names.items()), foreign, read >= total, sorted(maybe.items())]


def _global_writes(tree: ast.Module) -> list[tuple[str, int, bool]]:
    """Names a module-level function declares ``global`` and assigns, where the module calls
    that function at its top level (SQLAlchemy 1.4's ``def __go(lcls): global __all__; __all__ =
    sorted(...)`` run as ``__go(locals())``): (name, line, whether the assignment sits under an
    ``if``/``try``/loop of the function, so that it may not run)."""
    defs = {s.name: s for s in tree.body if isinstance(s, ast.FunctionDef)}
    called = [
        defs[s.value.func.id]
        for s in tree.body
        if isinstance(s, ast.Expr)
        and isinstance(s.value, ast.Call)
        and isinstance(s.value.func, ast.Name)
        and s.value.func.id in defs
    ]
    out: list[tuple[str, int, bool]] = []
    for func in called:
        declared = {n for g in ast.walk(func) if isinstance(g, ast.Global) for n in g.names}
        if declared:
            _assigned_globals(func.body, declared, False, out)
    return out


def _assigned_globals(
    body: list[ast.stmt], declared: set[str], guarded: bool, out: list[tuple[str, int, bool]]
) -> None:
    """Assignments to ``declared`` names in a function body, into ``out`` (name, line, whether
    an ``if``/``try``/loop/``with`` holds them), not entering nested scopes."""
    for stmt in body:
        targets = (
            stmt.targets
            if isinstance(stmt, ast.Assign)
            else [stmt.target]
            if isinstance(stmt, ast.AnnAssign | ast.AugAssign) and stmt.value is not None
            else []
        )
        out.extend(
            (t.id, stmt.lineno, guarded)
            for t in targets
            if isinstance(t, ast.Name) and t.id in declared
        )
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue  # its own scope
        for field in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.AST):
                nested = [
                    n for h in inner for n in (h.body if isinstance(h, ast.ExceptHandler) else [h])
                ]
                _assigned_globals(nested, declared, True, out)


def _writes_namespace(node: ast.AST) -> bool:
    """A write into the module's own globals, anywhere in it (``globals()[k] = v``,
    ``globals().update(…)``, ``setattr(sys.modules[__name__], …)``, ``…__dict__.update``);
    reads (``return globals()[name]``) are not."""
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del):
        return _is_globals(node.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr in ("update", "setdefault", "pop", "__setitem__"):
            return (
                _is_globals(node.func.value)
                or ast.unparse(node.func.value).replace(" ", "") == "sys.modules[__name__].__dict__"
            )
    return (
        isinstance(node, ast.Call)
        and ast.unparse(node.func) == "setattr"
        and bool(node.args)
        and ast.unparse(node.args[0]).replace(" ", "") == "sys.modules[__name__]"
    )


def _is_globals(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("globals", "vars")
        and not node.args
    )


def _written_key(node: ast.AST) -> ast.expr | None:
    """The key of a write into the module's globals: ``globals()[k] = v``, ``setattr(
    sys.modules[__name__], k, v)`` (None: not such a write)."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        if (
            isinstance(target, ast.Subscript)
            and isinstance(target.value, ast.Call)
            and isinstance(target.value.func, ast.Name)
            and target.value.func.id in ("globals", "vars")
            and not target.value.args
        ):
            return target.slice
    if isinstance(node, ast.Expr):
        call = node.value
        if (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id == "setattr"
            and len(call.args) == 3
            and ast.unparse(call.args[0]).replace(" ", "") == "sys.modules[__name__]"
        ):
            return call.args[1]
    return None


def loop_variable(target: ast.expr) -> str | None:
    """The loop variable that holds the name: ``for n in …`` or ``for n, v in ….items()``."""
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Tuple) and target.elts and isinstance(target.elts[0], ast.Name):
        return target.elts[0].id
    return None


def _loop_values(interp: Interpreter, node: ast.expr, module: str) -> list[str] | None:
    """The names a loop runs over, where they are written out (None: not readable): a literal
    tuple, list, set or dict (its keys; ``.keys()``/``.items()``), a module-level name bound
    once to one and never changed, or another host module's complete ``__all__``. A table
    another module builds (numpy's ``allTypes``) is not read: its value may be partial."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("keys", "items")
        and not node.args
    ):
        node = node.func.value
    if isinstance(node, ast.Name):
        tree = interp.tree(module)
        bound = _bound_once(tree, node.id) if tree is not None else None
        if bound is None:
            return None
        node = bound
    if isinstance(node, ast.Attribute) and node.attr == "__all__":
        value = interp.expr(node, Trace({}), module, 0)  # complete ``__all__`` only
        if isinstance(value, tuple) and UNK not in value:
            return [v for v in value if isinstance(v, str)]
        return None
    elts = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None)
    if not isinstance(node, ast.Dict | ast.Tuple | ast.List | ast.Set) or elts is None:
        return None
    if all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in elts):
        return [e.value for e in elts]  # type: ignore[union-attr]
    return None


_MUTATORS = ("update", "append", "extend", "add", "setdefault", "pop", "insert", "remove")


def _bound_once(tree: ast.Module, name: str) -> ast.expr | None:
    """The literal container a module-level name is bound to, where it is bound once and
    nothing changes it afterwards (None otherwise)."""
    values = [
        stmt.value
        for stmt in module_statements(tree.body)
        if isinstance(stmt, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets)
    ]
    if len(values) != 1:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            if node.target.id == name:
                return None
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del):
            if isinstance(node.value, ast.Name) and node.value.id == name:
                return None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            func = node.func
            if isinstance(func.value, ast.Name) and func.value.id == name:
                if func.attr in _MUTATORS:
                    return None
        if isinstance(node, ast.Global) and name in node.names:
            return None
    return values[0]


def _all_of_foreign(interp: Interpreter, node: ast.expr, module: str) -> str | None:
    """``numpy.__all__`` where ``numpy`` is another distribution's module: its name."""
    if not (isinstance(node, ast.Attribute) and node.attr == "__all__"):
        return None
    base = interp.expr(node.value, Trace({}), module, 0)
    if isinstance(base, Mod) and not interp.api.owns(base.path):
        return base.path
    if isinstance(node.value, ast.Name):  # ``import numpy as _num`` … ``del _num``
        tree = interp.tree(module)
        for stmt in module_statements(tree.body if tree is not None else []):
            if isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    if (alias.asname or alias.name) == node.value.id and "." not in alias.name:
                        return None if interp.api.owns(alias.name) else alias.name
    return None
