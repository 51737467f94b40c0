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
