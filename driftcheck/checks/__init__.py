"""Checks: one module per kind of drift, each with its declaration
(:class:`~driftcheck.checks.declaration.Check`), listed in :mod:`driftcheck.checks.catalog`.
What the pipeline runs is derived from that list: :data:`PER_USE` on every use,
:data:`WHOLE_CLIENT` once on all of them, :data:`MERGING` last, given every finding.

A check compares what a client use meets in the baseline host with what it meets in the target,
and reports only what changed (with no baseline, only what cannot work on the target).
"""

from __future__ import annotations

from collections.abc import Callable

from driftcheck.checks.catalog import CHECKS
from driftcheck.checks.context import CheckContext
from driftcheck.checks.declaration import Check, CheckId, Runs
from driftcheck.client.use import Use
from driftcheck.findings import Finding

#: The entries the pipeline calls, by :class:`Runs`.
UseCheck = Callable[[Use, CheckContext], list[Finding]]
ClientCheck = Callable[[CheckContext], list[Finding]]
MergingCheck = Callable[[list[Finding], CheckContext], list[Finding]]


def _per_use(declared: Check) -> UseCheck:
    """The check's entry; a lazy check's is imported on the first use of a kind it reads."""
    if not declared.lazy:
        return declared.load()
    loaded: list[UseCheck] = []

    def lazily(use: Use, ctx: CheckContext) -> list[Finding]:
        if use.kind not in declared.loads_on:
            return []
        if not loaded:
            loaded.append(declared.load())
        return loaded[0](use, ctx)

    lazily.__qualname__ = f"lazy {declared.module}"
    return lazily


#: The checks run on every use.
PER_USE: tuple[UseCheck, ...] = tuple(_per_use(c) for c in CHECKS if c.runs is Runs.PER_USE)
#: The checks run once on all of the client's uses.
WHOLE_CLIENT: tuple[ClientCheck, ...] = tuple(
    c.load() for c in CHECKS if c.runs is Runs.WHOLE_CLIENT
)
#: The checks run last, given every other finding (the drift rules, which merge mined ones).
MERGING: tuple[MergingCheck, ...] = tuple(c.load() for c in CHECKS if c.runs is Runs.MERGING)

__all__ = [
    "CHECKS",
    "MERGING",
    "PER_USE",
    "WHOLE_CLIENT",
    "Check",
    "CheckContext",
    "CheckId",
    "ClientCheck",
    "MergingCheck",
    "Runs",
    "UseCheck",
]
