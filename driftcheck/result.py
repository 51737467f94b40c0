"""A scan's result: the JSON contract and what the outputs (reports, fixes, witnesses) read.

It holds data only; the live host models stay with the pipeline (a host release is carried as
its :class:`~driftcheck.host.release.HostRelease`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from driftcheck.client.uses import Use
from driftcheck.findings import Finding
from driftcheck.host.release import HostRelease
from driftcheck.host.served_model import ServedModel
from driftcheck.rules.ruleset import RuleSet


@dataclass
class ScanResult:
    """Everything a report needs."""

    client_name: str
    client_version: str
    host_name: str
    baseline: str | None
    target: str
    findings: list[Finding]
    skipped: list[tuple[str, str]]
    uses: list[Use]
    client_lines: Mapping[str, list[str]]
    stats: dict[str, Any] = field(default_factory=dict)
    #: The client's analysed texts (a :class:`~driftcheck.client.texts.Texts` from a scan).
    client_texts: Mapping[str, str] = field(default_factory=dict)
    client_root: Path | None = None
    #: The client's files that do not name the host (read, not analysed): a re-scan of a fixed
    #: copy needs the whole tree.
    client_other: dict[str, str] = field(default_factory=dict, repr=False)
    #: The rules the scan used (for reports that describe them).
    rules: RuleSet = field(default_factory=RuleSet)
    #: The host releases scanned against, as plain data (for witnesses; not part of the report).
    target_release: HostRelease | None = field(default=None, repr=False, compare=False)
    baseline_release: HostRelease | None = field(default=None, repr=False, compare=False)
    #: With ``--verify``: the findings a witness refuted (listed apart, not counted) and the
    #: verification's counts, time and environments.
    refuted: list[Finding] = field(default_factory=list)
    verification: dict | None = None
    #: The classes the host builds for the served model (hosts that serve models).
    served: ServedModel | None = field(default=None, compare=False)
    #: Files whose text on disk differs from the analysed text (a notebook's JSON).
    client_raw: dict[str, str] = field(default_factory=dict, repr=False)
    #: The files read and the roots they came from (``Client.summary``).
    discovery: dict = field(default_factory=dict)
    #: A monorepo: each package's own result (findings' paths from the monorepo's top).
    packages: list[dict] = field(default_factory=list)
    #: When ``--against`` named a range or ``@latest`` and the index could not be reached: the
    #: cached release list it was resolved on (``source``, ``age_s``, ``why``).
    release_list: dict | None = None
    #: Where the baseline came from: ``source`` given, pin, inferred (with ``before``, the
    #: client release it precedes, and ``published``, that release's date) or none.
    baseline_origin: dict = field(default_factory=lambda: {"source": "none"})

    def to_dict(self) -> dict:
        """The JSON contract."""
        return {
            "client": {"name": self.client_name, "version": self.client_version},
            "host": {
                "name": self.host_name,
                "baseline": self.baseline,
                "baseline_source": self.baseline_origin.get("source", "none"),
                **(
                    {"baseline_inferred": _inferred(self.baseline_origin)}
                    if self.baseline_origin.get("source") == "inferred"
                    else {}
                ),
                "target": self.target,
                **({"release_list": self.release_list} if self.release_list else {}),
            },
            "findings": [f.to_dict() for f in self.findings],
            "skipped": [{"file": f, "reason": r} for f, r in self.skipped],
            "stats": {k: round(v, 3) if isinstance(v, float) else v for k, v in self.stats.items()},
            **({"discovery": self.discovery} if self.discovery else {}),
            **({"packages": self.packages} if self.packages else {}),
            **({"served_model": self.served.to_dict()} if self.served is not None else {}),
            **(
                {
                    "verification": self.verification,
                    "refuted": [f.to_dict() for f in self.refuted],
                }
                if self.verification is not None
                else {}
            ),
        }


def _inferred(origin: dict) -> dict:
    """What an inferred baseline was inferred from, for the JSON contract."""
    return {"before": origin.get("before"), "published": origin.get("published")}


def baseline_note(baseline: str | None, origin: dict, host: str) -> str:
    """The baseline as a report header says it: its version, and why when inferred
    (``0.9.1, inferred: newest vllm release before trl 0.19.0 of 2025-06-20``)."""
    if baseline and origin.get("source") == "inferred":
        return (
            f"{baseline}, inferred: newest {host} release before "
            f"{origin.get('before')} of {origin.get('published')}"
        )
    return baseline or "none"
