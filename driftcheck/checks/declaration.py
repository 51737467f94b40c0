"""What a check declares about itself: the ids it reports and, per id, the kind, default
severity, witness and the fixes it offers; how it runs; where its code and documentation are.

Each check module holds one :class:`Check` (a lazy check's is held by its light entry, so that
it can be read without loading the check); :mod:`driftcheck.checks.catalog` lists them, and the
registry, ``driftcheck rules``, the SARIF rule descriptors and the docs' check table are derived
from that list.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass

from driftcheck.kinds import FixSafety, Kind, Severity, Witness, Word


class Runs(Word):
    """When the pipeline calls a check's entry."""

    #: ``check(use, ctx) -> list[Finding]`` on every use the target runs.
    PER_USE = "per-use"
    #: ``check(ctx) -> list[Finding]`` once, on all of the client's uses.
    WHOLE_CLIENT = "whole-client"
    #: ``check(findings, ctx) -> list[Finding]`` once, last: it adds its findings to the
    #: others' and merges those it reports again.
    MERGING = "merging"


@dataclass(frozen=True)
class CheckId:
    """One id a check reports, with what every finding of that id has in common.

    Attributes:
        id: The finding's ``rule`` (what ``--disable`` and the SARIF ``ruleId`` name).
        kind: The finding's kind.
        severity: Its default severity (a finding may say less, never more).
        witness: What ``--verify`` runs to show it (a finding may declare another).
        fixes: The fixes its findings may carry (none: it never offers one).
        codemods: The codemods those fixes name (:data:`driftcheck.fixes.codemods.CODEMODS`).
    """

    id: str
    kind: Kind
    severity: Severity
    witness: Witness
    fixes: tuple[FixSafety, ...] = ()
    codemods: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # A check named after its kind passes the kind's value: keep the id a plain string.
        object.__setattr__(self, "id", str(self.id))


@dataclass(frozen=True)
class Check:
    """One check module: what it reports, how it runs, and its documentation.

    Attributes:
        module: The module that holds the check's code; its docstring is the check's
            documentation (SARIF help, ``driftcheck rules show ID``).
        ids: The ids it reports, each with its kind, severity, witness and fixes (none: its
            ids come from elsewhere, as the drift rules' do).
        runs: When the pipeline calls it.
        entry: The function the pipeline calls.
        lazy: Loaded on the first use it can apply to (:attr:`loads_on`), not with the
            pipeline: a scan of a client without such uses never imports it.
        loads_on: The use kinds a lazy check applies to (every other use gets no finding).
    """

    module: str
    ids: tuple[CheckId, ...]
    runs: Runs = Runs.PER_USE
    entry: str = "check"
    lazy: bool = False
    loads_on: frozenset[str] = frozenset()

    @property
    def name(self) -> str:
        """The module's own name (``missing_symbol``)."""
        return self.module.rpartition(".")[2]

    @property
    def doc(self) -> str:
        """The check's documentation: its module's docstring (importing the module)."""
        return inspect.cleandoc(importlib.import_module(self.module).__doc__ or "")

    def load(self) -> Callable[..., list]:
        """The entry the pipeline calls (importing the module on first call)."""
        fn: Callable[..., list] = getattr(importlib.import_module(self.module), self.entry)
        return fn
