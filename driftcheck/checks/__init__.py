"""Checks: one module per kind of drift; each is ``check(use, ctx) -> list[Finding]``, or, for
checks that look at the whole client at once, ``check(ctx) -> list[Finding]``. The ids and kinds
they report are registered in :mod:`driftcheck.registry`.

A check compares what a client use meets in the baseline host with what it meets in the target,
and reports only what changed (with no baseline, only what cannot work on the target).
"""

from __future__ import annotations

from collections.abc import Callable

from driftcheck.checks import (
    attribute_missing,
    call_signature,
    default_change,
    deprecated,
    host_migration,
    http,
    implementation_swap,
    missing_symbol,
    override_signature,
    positional,
    protocol,
    return_semantics,
    served_model,
    stale_patch,
    string_ref,
)
from driftcheck.checks.context import CheckContext
from driftcheck.client.use import Use
from driftcheck.findings import Finding

Check = Callable[[Use, CheckContext], list[Finding]]
ClientCheck = Callable[[CheckContext], list[Finding]]

#: The checks run on every use.
PER_USE: tuple[Check, ...] = (
    missing_symbol.check,
    stale_patch.check,
    attribute_missing.check,
    served_model.check,
    call_signature.check,
    positional.check,
    default_change.check,
    host_migration.check,
    return_semantics.check,
    string_ref.check,
    override_signature.check,
    deprecated.check,
    implementation_swap.check,
    http.check,  # routes, request bodies, response reads, launch flags (loaded on first use)
)
#: The checks run once on all of the client's uses.
WHOLE_CLIENT: tuple[ClientCheck, ...] = (protocol.protocol_findings,)

__all__ = ["PER_USE", "WHOLE_CLIENT", "Check", "CheckContext", "ClientCheck"]
