"""Checks: one module per kind of drift; each is ``check(use, ctx) -> list[Finding]``.

A check compares what a client use meets in the baseline host with what it meets in the target,
and reports only what changed (with no baseline, only what cannot work on the target).
"""

from __future__ import annotations

from collections.abc import Callable

from driftcheck.checks import (
    attribute_missing,
    call_signature,
    deprecated,
    implementation_swap,
    missing_symbol,
    override_signature,
    return_semantics,
    string_ref,
)
from driftcheck.checks.context import CheckContext
from driftcheck.client.uses import Use
from driftcheck.findings import Finding

Check = Callable[[Use, CheckContext], list[Finding]]

#: Every registered check, by the kind of drift it reports.
CHECKS: dict[str, Check] = {
    "missing-symbol": missing_symbol.check,
    "attribute-missing": attribute_missing.check,
    "call-signature": call_signature.check,
    "return-semantics": return_semantics.check,
    "string-ref": string_ref.check,
    "override-signature": override_signature.check,
    "deprecated": deprecated.check,
    "implementation-swap": implementation_swap.check,
}

__all__ = ["CHECKS", "Check", "CheckContext"]
