"""Client predicates: the gate a function's result is, read path by path.

``def is_vllm_available(min_version=None)`` that returns ``False`` when the installed version is
below ``min_version`` and ``True`` (or "the package is there") otherwise is the gate "version >=
min_version" once the call's arguments are bound. Each ``return`` counts under the conditions
of the ``if``\\ s that lead to it (a branch that always returns leaves the rest of the body under
the other condition); a condition on the predicate's own arguments is decided; one that is not
about the host does not restrict (on a side that has the host, "the host is installed" holds).
"""

from __future__ import annotations

import ast
from typing import Any, Protocol, cast

from driftcheck.client.names import FUNCTIONS
from driftcheck.gates import ALWAYS, NEVER, Gate, all_of, negate

Scope = Any  # gate_reader.Scope: where an expression is read


class GateReader(Protocol):
    """What a predicate is read with (``gate_reader.GateReader``)."""

    def gate(self, expr: ast.expr, scope: Scope) -> Gate | None: ...

    def decide(self, test: ast.expr, scope: Scope) -> bool | None: ...


_EXITS = (ast.Return, ast.Raise)
_LIMIT = 64  # return paths followed per predicate


#: One way through a body: the host gates that hold on it, and what is known of the truth of
#: the conditions on it that are not about the host (``if available:`` taken or not).
Path = tuple[tuple[Gate, ...], tuple[tuple[str, bool], ...]]


def predicate_gate(
    reader: GateReader, body: list[ast.stmt], scope: Scope, name: str
) -> Gate | None:
    """The gate a predicate's body returns (None: not about the host, or always true)."""
    returns, _ = _block(reader, body, scope, [((), ())], {})
    alternatives: list[Gate] = []
    for (conds, facts), value in returns[:_LIMIT]:
        known = dict(facts).get(ast.unparse(value))
        if _constant_is(value, False) or known is False:
            continue
        value_gate = None if _constant_is(value, True) or known else reader.gate(value, scope)
        parts = [g for g in (*conds, value_gate) if g is not None]
        if not parts:
            return None  # true whatever the host: not a gate
        alternatives.append(cast(Gate, all_of(parts)))  # parts is not empty
    if len(returns) > _LIMIT:
        return Gate("unknown", name=f"{name}(...)")
    if not alternatives:
        return NEVER
    unique = tuple(dict.fromkeys(alternatives))
    return unique[0] if len(unique) == 1 else Gate("or", unique)


#: An ``if`` test's gate, read once per predicate whatever the number of paths reaching it.
Tests = dict[int, Gate | None]


def _block(
    reader: GateReader, body: list[ast.stmt], scope: Scope, paths: list[Path], tests: Tests
) -> tuple[list[tuple[Path, ast.expr]], list[Path]]:
    """The returns a block can reach (each with its path), and the paths that run past it."""
    returns: list[tuple[Path, ast.expr]] = []
    for stmt in body:
        if not paths or len(paths) > _LIMIT:
            break
        if isinstance(stmt, (*FUNCTIONS, ast.ClassDef)):
            continue
        after: list[Path] = []
        for path in paths:
            got, through = _statement(reader, stmt, scope, path, tests)
            returns += got
            after += through
        paths = list(dict.fromkeys(after))
    return returns, paths


def _statement(
    reader: GateReader, stmt: ast.stmt, scope: Scope, path: Path, tests: Tests
) -> tuple[list[tuple[Path, ast.expr]], list[Path]]:
    conds, facts = path
    if isinstance(stmt, ast.Return):
        return [(path, stmt.value if stmt.value is not None else ast.Constant(None))], []
    if isinstance(stmt, ast.Raise):
        return [], []
    if isinstance(stmt, ast.If):
        if id(stmt.test) not in tests:
            tests[id(stmt.test)] = condition(reader, stmt.test, scope)
        test = tests[id(stmt.test)]
        text = ast.unparse(stmt.test)
        taken: Path = (conds + ((test,) if test is not None else ()), facts)
        skipped: Path = (conds + ((negate(test),) if test is not None else ()), facts)
        if test is None:  # not about the host: remember which way it went
            taken = (conds, facts + ((text, True),))
            skipped = (conds, facts + ((text, False),))
        returns: list[tuple[Path, ast.expr]] = []
        through: list[Path] = []
        if test != NEVER:
            got, past = _block(reader, stmt.body, scope, [taken], tests)
            returns += got
            through += past
        if test != ALWAYS:
            got, past = _block(reader, stmt.orelse, scope, [skipped], tests)
            returns += got
            through += past
        return returns, through
    returns = []
    for name in ("body", "orelse", "finalbody"):
        block = getattr(stmt, name, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            returns += _block(reader, block, scope, [path], tests)[0]
    for handler in getattr(stmt, "handlers", None) or []:
        returns += _block(reader, handler.body, scope, [path], tests)[0]
    return returns, [path]


def condition(reader: GateReader, test: ast.expr, scope: Scope) -> Gate | None:
    """An ``if`` test inside a predicate: decided when it is about the predicate's arguments
    (ALWAYS / NEVER), a host gate, or None (not about the host)."""
    decided = reader.decide(test, scope)
    if decided is not None:
        return ALWAYS if decided else NEVER
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        parts: list[Gate] = []
        for value in test.values:
            got = condition(reader, value, scope)
            if got == NEVER:
                return NEVER
            if got is not None and got != ALWAYS:
                parts.append(got)
        return all_of(parts) if parts else None
    return reader.gate(test, scope)


def _constant_is(expr: ast.expr, value: bool) -> bool:
    if value is False:
        return isinstance(expr, ast.Constant) and expr.value in (False, None)
    return isinstance(expr, ast.Constant) and expr.value is True
