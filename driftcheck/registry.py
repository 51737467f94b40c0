"""One registry of ids: the kinds of drift, the built-in checks, and (given a rule set) the rules.

Every finding carries an id (``rule``) and a ``kind``. A built-in check's id and kind come from
its declaration (:data:`CHECK_IDS` is derived from :mod:`driftcheck.checks.catalog`); a rule's
from its file. ``--disable`` and ``disable = [...]`` take exactly these
ids: a check id or rule id drops that id's findings, a kind drops every finding of the kind.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from driftcheck.checks import catalog
from driftcheck.checks.declaration import Check
from driftcheck.errors import UsageError
from driftcheck.kinds import KIND_MEANING, WITNESS_DOES, FixSafety, Kind, Severity, Witness
from driftcheck.kinds import KIND_WITNESS as _KIND_WITNESS


class _HasId(Protocol):
    """A rule, as far as ids go."""

    id: str


class _HasKind(Protocol):
    """A rule, as far as kinds go."""

    id: str
    kind: str


class _Reported(Protocol):
    """A finding, as far as ids go."""

    @property
    def rule(self) -> str: ...

    @property
    def kind(self) -> str: ...


#: Kind of drift -> what it means (the ``kind`` of every finding is one of these).
KINDS: dict[str, str] = {str(kind): meaning for kind, meaning in KIND_MEANING.items()}
SEVERITIES: tuple[str, ...] = tuple(str(s) for s in Severity)

#: What ``--verify``'s witness programs do, per witness check (:class:`~driftcheck.kinds.Witness`
#: says what they never do).
WITNESS_CHECKS: dict[str, str] = {str(w): does for w, does in WITNESS_DOES.items()}


@dataclass(frozen=True)
class BuiltinCheck:
    """One id a built-in check reports, flattened from its declaration."""

    id: str
    kind: Kind
    severity: Severity
    #: The module whose docstring documents the check (SARIF help, ``rules show``).
    module: str
    witness: Witness
    fixes: tuple[FixSafety, ...]
    codemods: tuple[str, ...]
    #: The declaration it comes from.
    check: Check

    @property
    def doc(self) -> str:
        """The check's documentation (its module's docstring)."""
        return self.check.doc


#: Every built-in check id, with its kind and default severity, in the order the checks run.
CHECK_IDS: dict[str, BuiltinCheck] = {
    r.id: BuiltinCheck(r.id, r.kind, r.severity, c.module, r.witness, r.fixes, r.codemods, c)
    for c in catalog.CHECKS
    for r in c.ids
}

#: The witness of each kind (a rule can declare another in ``[witness]``), and of the checks
#: whose claim differs from their kind's.
KIND_WITNESS: dict[str, str] = {str(k): str(w) for k, w in _KIND_WITNESS.items()} | {
    c.id: str(c.witness) for c in CHECK_IDS.values() if c.witness != _KIND_WITNESS[c.kind]
}


def known_ids(rules: Iterable[_HasId]) -> dict[str, str]:
    """Every id a user may name -> what it is (``check``, ``kind`` or ``rule``; a check id that
    is also a kind is both)."""
    out: dict[str, str] = {}
    for kind in KINDS:
        out[kind] = "kind"
    for check_id in CHECK_IDS:
        out[check_id] = "check and kind" if check_id in KINDS else "check"
    for rule in rules:
        out[rule.id] = "rule"
    return dict(sorted(out.items()))


def check_ids(ids: Iterable[str], rules: Iterable[_HasId], *, where: str) -> None:
    """Fail on an id that is no check, kind or rule (a typo would disable nothing), listing the
    valid ones."""
    known = known_ids(rules)
    for given in ids:
        if given in known:
            continue
        close = difflib.get_close_matches(given, known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UsageError(f"{where}: unknown id {given!r}{hint}; valid ids: {', '.join(known)}")


def kinds_of(rules: Iterable[_HasKind]) -> dict[str, str]:
    """Every check and rule id -> its kind."""
    out: dict[str, str] = {c.id: c.kind for c in CHECK_IDS.values()}
    out.update({r.id: r.kind for r in rules})
    return out


def is_disabled(finding: _Reported, disabled: set[str] | frozenset[str]) -> bool:
    """True when ``disabled`` names the finding's id or its kind."""
    return finding.rule in disabled or finding.kind in disabled
