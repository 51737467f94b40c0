"""GitHub Actions workflow commands: one annotation per finding, on the client's line.

``::error file=src/pkg/mod.py,line=12,endLine=12,col=9,title=…::message`` — GitHub shows it on
the pull request's diff. Values are escaped as the Actions toolkit does: ``%``, CR and LF in the
message; additionally ``:`` and ``,`` in properties.
"""

from __future__ import annotations

from typing import TextIO

from driftcheck.accepted import Triage
from driftcheck.findings import Finding
from driftcheck.report.locations import cell_location, client_path, host_path
from driftcheck.result import ScanResult

COMMANDS = {"error": "error", "warning": "warning", "info": "notice"}


def render(result: ScanResult, out: TextIO, *, triage: Triage | None = None, **_: object) -> None:
    """Write one workflow command per finding (and per stale accepted entry)."""
    for f in result.findings:
        out.write(annotation(result, f) + "\n")
    for entry in triage.stale if triage else []:
        where = {"file": str(triage.path)} if triage and triage.path else {}
        out.write(
            command(
                "warning",
                {**where, "title": "driftcheck: stale accepted drift"},
                f"{entry.rule} at {entry.file} ({entry.symbol}) is accepted but no longer "
                f"occurs; remove entry {entry.fingerprint}",
            )
            + "\n"
        )


def annotation(result: ScanResult, f: Finding) -> str:
    """The workflow command for one finding."""
    cell = cell_location(result, f.file, f.line)
    offset = f.line - cell[1] if cell is not None else 0  # a notebook: lines within the cell
    props = {"file": client_path(result, f.file), "line": str(f.line - offset)}
    if f.end_line > f.line:
        props["endLine"] = str(f.end_line - offset)
    props["col"] = str(f.column)
    if f.end_column:
        props["endColumn"] = str(f.end_column)
    props["title"] = f"driftcheck {f.rule}: {f.symbol}" + (f" (cell {cell[0]})" if cell else "")
    lines = [f.message]
    for ev in f.evidence:
        note = f" ({ev.note})" if ev.note else ""
        lines.append(
            f"{result.host_name} {ev.version}: {host_path(result.host_name, ev)}"
            f"{':' + str(ev.line) if ev.line else ''}{note}"
        )
    if f.first_breaking:
        lines.append(f"first breaks in {f.first_breaking}")
    if f.fix is not None:
        lines.append(f"fix ({f.fix.safety}): {f.fix.description}")
    return command(COMMANDS.get(f.severity, "warning"), props, "\n".join(lines))


def command(name: str, props: dict[str, str], message: str) -> str:
    """``::name k=v,k=v::message`` with GitHub's escaping."""
    head = ",".join(f"{k}={escape_property(v)}" for k, v in props.items())
    return f"::{name}{' ' + head if head else ''}::{escape_data(message)}"


def escape_data(text: str) -> str:
    """A message: ``%``, CR and LF are percent-encoded (``%`` first)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A property value: as a message, and ``:`` and ``,`` too (they delimit properties)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")
