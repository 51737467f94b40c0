"""One registry of ids: the kinds of drift, the built-in checks, and (given a rule set) the rules.

Every finding carries an id (``rule``) and a ``kind``. A built-in check's id and kind come from
:data:`CHECKS`; a rule's from its file. ``--disable`` and ``disable = [...]`` take exactly these
ids: a check id or rule id drops that id's findings, a kind drops every finding of the kind.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from driftcheck.errors import UsageError


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
KINDS: dict[str, str] = {
    "missing-symbol": "a host name the client reaches is gone from the target",
    "moved-symbol": "a host name the client reaches now lives elsewhere",
    "call-signature": "a call that bound at baseline no longer binds",
    "return-semantics": "a used result whose return gained None, became None or changed shape",
    "call-protocol": "a host method that gained a mandatory follow-up call",
    "attribute-missing": "an attribute read off a typed host receiver is gone",
    "override-signature": "a client stand-in for a host method no longer accepts what the host passes",
    "string-ref": "host code named in a string is gone",
    "behaviour-change": "the code runs, but does something else (defaults, implementation swaps)",
    "deprecated": "a host API the client uses now warns that it is deprecated",
    "served-model": "the class the served model's config selects lacks what the client reaches",
    "http-route": "an HTTP route the client calls is gone, moved, or registered only under a flag",
    "http-request": "a request body field the client sends is gone, renamed, or newly required",
    "http-response": "a response field the client reads is no longer sent",
    "cli-flag": "a server flag the client's launch command passes is gone, renamed or deprecated",
}
SEVERITIES = ("info", "warning", "error")

#: What ``--verify``'s witness programs do, per witness check. All of them import host modules
#: and read attributes (a module ``__getattr__`` runs); only ``warns`` runs more: the import in a
#: fresh interpreter, so that import-time code runs again under a warnings recorder. None calls
#: or constructs host objects: binding a call's arguments to the host's runtime signature is
#: what a call or a dataclass/pydantic/msgspec construction checks first, and the rest is the
#: workload's to show (``driftcheck probe``).
WITNESS_CHECKS: dict[str, str] = {
    "resolve": "import the module and read the attribute chain the client reads",
    "bind": "bind the call's arguments to inspect.signature() of what it calls",
    "positions": "bind the positional arguments and name the parameter each lands on",
    "member": "look the member up on the receiver's class (MRO, fields, annotations, slots)",
    "default": "read the default of a field or parameter",
    "params": "read the runtime signature of the host method a client function stands in for",
    "warns": "import or read the name in a fresh interpreter, recording the warnings raised",
    "workload": "nothing: only the real workload shows it (driftcheck probe)",
}
#: The witness of each kind (a rule can declare another in ``[witness]``), and of the checks
#: whose claim differs from their kind's.
KIND_WITNESS: dict[str, str] = {
    "missing-symbol": "resolve",
    "moved-symbol": "resolve",
    "string-ref": "resolve",
    "call-signature": "bind",
    "positional-shift": "positions",
    "default-change": "default",
    "attribute-missing": "member",
    "override-signature": "params",
    "deprecated": "warns",
    "return-semantics": "workload",
    "call-protocol": "workload",
    "behaviour-change": "workload",
    "served-model": "workload",
    "http-route": "workload",
    "http-request": "workload",
    "http-response": "workload",
    "cli-flag": "workload",
}


@dataclass(frozen=True)
class BuiltinCheck:
    """A check driftcheck runs on every use, whatever the host."""

    id: str
    kind: str
    severity: str
    #: The module whose docstring documents the check (SARIF help, ``rules show``).
    module: str


#: Every built-in check id, with its kind and default severity.
CHECKS: dict[str, BuiltinCheck] = {
    c.id: c
    for c in (
        BuiltinCheck(
            "missing-symbol", "missing-symbol", "error", "driftcheck.checks.missing_symbol"
        ),
        BuiltinCheck("moved-symbol", "moved-symbol", "error", "driftcheck.checks.missing_symbol"),
        BuiltinCheck("stale-patch", "missing-symbol", "warning", "driftcheck.checks.stale_patch"),
        BuiltinCheck(
            "call-signature", "call-signature", "error", "driftcheck.checks.call_signature"
        ),
        BuiltinCheck("positional-shift", "call-signature", "error", "driftcheck.checks.positional"),
        BuiltinCheck(
            "return-semantics", "return-semantics", "error", "driftcheck.checks.return_semantics"
        ),
        BuiltinCheck("call-protocol", "call-protocol", "error", "driftcheck.checks.protocol"),
        BuiltinCheck(
            "attribute-missing", "attribute-missing", "error", "driftcheck.checks.attribute_missing"
        ),
        BuiltinCheck(
            "override-signature",
            "override-signature",
            "error",
            "driftcheck.checks.override_signature",
        ),
        BuiltinCheck("string-ref", "string-ref", "error", "driftcheck.checks.string_ref"),
        BuiltinCheck(
            "implementation-swap",
            "behaviour-change",
            "info",
            "driftcheck.checks.implementation_swap",
        ),
        BuiltinCheck("deprecated", "deprecated", "warning", "driftcheck.checks.deprecated"),
        BuiltinCheck(
            "default-change", "behaviour-change", "warning", "driftcheck.checks.default_change"
        ),
        BuiltinCheck(
            "host-migration", "return-semantics", "error", "driftcheck.checks.host_migration"
        ),
        BuiltinCheck("served-model", "served-model", "error", "driftcheck.checks.served_model"),
        BuiltinCheck("http-route-removed", "http-route", "error", "driftcheck.checks.http_routes"),
        BuiltinCheck("http-route-flag", "http-route", "error", "driftcheck.checks.http_routes"),
        BuiltinCheck(
            "http-request-field", "http-request", "error", "driftcheck.checks.http_request"
        ),
        BuiltinCheck(
            "http-response-field", "http-response", "error", "driftcheck.checks.http_response"
        ),
        BuiltinCheck("http-cli-flag", "cli-flag", "error", "driftcheck.checks.http_flags"),
    )
}


def known_ids(rules: Iterable[_HasId]) -> dict[str, str]:
    """Every id a user may name -> what it is (``check``, ``kind`` or ``rule``; a check id that
    is also a kind is both)."""
    out: dict[str, str] = {}
    for kind in KINDS:
        out[kind] = "kind"
    for check_id in CHECKS:
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
    out = {c.id: c.kind for c in CHECKS.values()}
    out.update({r.id: r.kind for r in rules})
    return out


def is_disabled(finding: _Reported, disabled: set[str] | frozenset[str]) -> bool:
    """True when ``disabled`` names the finding's id or its kind."""
    return finding.rule in disabled or finding.kind in disabled
