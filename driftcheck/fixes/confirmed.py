"""Unsafe fixes confirmed by the client's workload (``driftcheck fix --confirmed-by REPORT``).

``driftcheck probe --fix --unsafe-fixes --format json`` reports every fix it applied with its
safety, and an unsafe fix whose patched run passed every check as *confirmed by the workload*
for that exact host release. Given that report, ``fix`` treats the same fixes (same file, line,
rule and fix text) as safe on that release only: a report for another client or host release
is refused, because a workload run says nothing about a release it did not run on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.version import InvalidVersion, Version

from driftcheck.errors import UsageError
from driftcheck.findings import Finding
from driftcheck.kinds import FixSafety


@dataclass(frozen=True)
class Confirmation:
    """One unsafe fix a workload run confirmed."""

    file: str
    line: int
    rule: str
    description: str
    host_version: str
    #: The report it came from (shown next to the fix).
    source: str

    def matches(self, f: Finding) -> bool:
        """The same fix of the same finding: file, line, rule and fix text."""
        return (
            f.fix is not None
            and f.file == self.file
            and f.line == self.line
            and f.rule == self.rule
            and f.fix.description == self.description
        )


def _same_version(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def read_confirmations(
    path: str | Path, *, client_name: str, client_version: str, host_version: str
) -> list[Confirmation]:
    """The unsafe fixes a probe JSON report (one release, or a range's entry for
    ``host_version``) confirmed for this client on this host release (its safe fixes need
    no confirmation).

    Raises:
        UsageError: The report cannot be read, is not a probe report, or is for another client
            or host release.
    """
    where = str(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"--confirmed-by {where}: cannot read it: {exc.strerror or exc}") from None
    except ValueError:
        raise UsageError(f"--confirmed-by {where}: not a JSON probe report") from None
    if not isinstance(data, dict) or not isinstance(data.get("client"), dict):
        raise UsageError(f"--confirmed-by {where}: not a driftcheck probe report")
    if isinstance(data.get("releases"), list):  # a range report: the entry of this release
        entry = next(
            (
                r.get("report")
                for r in data["releases"]
                if isinstance(r, dict) and _same_version(str(r.get("version")), host_version)
            ),
            None,
        )
        if not isinstance(entry, dict):
            ran = ", ".join(str(r.get("version")) for r in data["releases"] if isinstance(r, dict))
            raise UsageError(
                f"--confirmed-by {where}: the range report has no run on {host_version} "
                f"(it ran {ran or 'nothing'})"
            )
        data = entry
    client = data.get("client") or {}
    name, version = str(client.get("name") or ""), str(client.get("version") or "")
    spec = str(client.get("spec") or "")
    if not name and "==" in spec:
        name = spec.split("==", 1)[0]
    if _norm(name) != _norm(client_name) or not _same_version(version, client_version):
        raise UsageError(
            f"--confirmed-by {where}: the report is for {name or spec}=={version}, "
            f"not {client_name}=={client_version}"
        )
    ran_on = str((data.get("env") or {}).get("host_version") or "")
    host_dist = str((data.get("env") or {}).get("host_dist") or "")
    if not _same_version(ran_on, host_version):
        raise UsageError(
            f"--confirmed-by {where}: the workload ran on {host_dist or 'the host'} "
            f"{ran_on or '?'}, "
            f"not on the target {host_version}"
        )
    out: list[Confirmation] = []
    for fx in data.get("fixes") or []:
        if not isinstance(fx, dict) or fx.get("workload") != "confirmed":
            continue
        if fx.get("safety") != "unsafe":
            continue  # a safe fix needs no confirmation
        out.append(
            Confirmation(
                file=str(fx.get("file")),
                line=int(fx.get("line") or 0),
                rule=str(fx.get("rule")),
                description=str(fx.get("description")),
                host_version=ran_on,
                source=where,
            )
        )
    return out


def _norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def mark_confirmed(
    findings: list[Finding], confirmations: list[Confirmation]
) -> tuple[list[Finding], list[Confirmation]]:
    """Findings whose unsafe fix a confirmation names, made safe (the description says by
    which report); returns the findings and the confirmations that matched none."""
    used: set[Confirmation] = set()
    out: list[Finding] = []
    for f in findings:
        conf = next((c for c in confirmations if c.matches(f)), None)
        if conf is not None:
            used.add(conf)
        if conf is None or f.fix is None or f.fix.safety != "unsafe":
            out.append(f)
            continue
        said = (
            f"{f.fix.description} (confirmed by the workload on {conf.host_version}: "
            f"{Path(conf.source).name})"
        )
        out.append(replace(f, fix=replace(f.fix, safety=FixSafety.SAFE, description=said)))
    return out, [c for c in confirmations if c not in used]
