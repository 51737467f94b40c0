"""Text report: findings grouped by client file, each with a code frame and host evidence."""

from __future__ import annotations

from itertools import groupby
from typing import TextIO

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from driftcheck.accepted import Triage
from driftcheck.findings import Finding
from driftcheck.host.served_model import ServedModel
from driftcheck.report.console import report_console
from driftcheck.report.locations import cell_location, where
from driftcheck.result import ScanResult, baseline_note

STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def render(
    result: ScanResult,
    out: TextIO,
    *,
    color: bool | None = None,
    triage: Triage | None = None,
    **_: object,
) -> None:
    """Write the human report (accepted findings are counted, not shown)."""
    console = report_console(out, color=color)
    base = baseline_note(result.baseline, result.baseline_origin, result.host_name)
    console.print(
        f"[bold]{escape(result.client_name)} {escape(result.client_version)}[/] against "
        f"[bold]{escape(result.host_name)} {escape(result.target)}[/] (baseline {escape(base)})"
    )
    if result.release_list:
        line = release_list_line(result.host_name, result.target, result.release_list)
        console.print(f"[yellow]{escape(line)}[/]")
    if result.served is not None:
        console.print(escape(served_line(result.served)))
    if result.discovery:
        console.print(f"[dim]{escape(read_line(result.discovery))}[/]")
    sections = _sections(result)
    for head, findings in sections:
        if head is not None:
            console.print()
            console.print(f"[bold]== {escape(head)}[/]")
        for file, group in groupby(findings, key=lambda f: f.file):
            console.print()
            console.print(f"[bold underline]{escape(file)}[/]")
            for finding in group:
                _finding(console, finding, result.client_lines.get(file, []), result)
    if result.refuted:
        console.print()
        console.print(
            f"[bold]Refuted by their witnesses[/] ({len(result.refuted)}, not counted: the use "
            "works on the target)"
        )
        for f in result.refuted:
            why = f.verification.reason if f.verification else ""
            console.print(
                f"  {escape(where(result, f.file, f.line))}: {escape(f.rule)}: {escape(why)}"
            )
    for file, reason in result.skipped:
        console.print(f"[yellow]skipped[/] {escape(file)}: {escape(reason)}")
    if triage is not None:
        _accepted(console, triage)
    console.print()
    console.print(summary(result))
    if result.verification is not None:
        console.print(verification_line(result.verification))


def release_list_line(host: str, newest: str, listed: dict) -> str:
    """Where the release list that resolved ``@latest`` or a range came from, when not the
    index (``listed``: :func:`driftcheck.sources.versions.stale_listing`)."""
    from driftcheck.sources.versions import age_text

    return (
        f"release list of {host} from the {listed.get('source')}, "
        f"{age_text(listed.get('age_s', 0))} old ({listed.get('why')}): newer releases than "
        f"{newest} may exist"
    )


def _sections(result: ScanResult) -> list[tuple[str | None, list[Finding]]]:
    """One section per package of a monorepo (each with its baseline), else one."""
    if not result.packages:
        return [(None, result.findings)]
    out: list[tuple[str | None, list[Finding]]] = []
    for p in result.packages:
        mine = [f for f in result.findings if f.file.startswith(p["path"] + "/")]
        name = f"{p['client']['name']} {p['client']['version']}".strip()
        files = p["discovery"].get("files", 0)
        out.append(
            (
                f"{p['path']}: {name} (baseline {p['baseline'] or 'none'}; {files} files read; "
                f"{len(mine)} finding(s))",
                mine,
            )
        )
    return out


def read_line(discovery: dict) -> str:
    """``read 12 files from src/ (packages srcpkg), scripts/ (scripts)``."""
    parts = []
    for r in discovery.get("roots", []):
        folder = f"{r['folder']}/" if r["folder"] else "./"
        names = f" {', '.join(r['names'][:4])}" if r["kind"] in ("packages", "package") else ""
        more = "…" if len(r["names"]) > 4 else ""
        parts.append(f"{folder} ({r['kind']}{names}{more}: {r['files']})")
    return f"read {discovery.get('files', 0)} file(s) from {', '.join(parts) or 'nothing'}"


def _finding(console: Console, f: Finding, lines: list[str], result: ScanResult) -> None:
    head = Text()
    cell = cell_location(result, f.file, f.line)
    if cell is not None:
        head.append(f"{f.file} cell {cell[0]}, line {cell[1]}:{f.column}", style="bold")
    else:
        head.append(f"{f.file}:{f.line}:{f.column}", style="bold")
    head.append("  ")
    head.append(f.severity, style=STYLE.get(f.severity, ""))
    head.append(f"  {f.kind}  [{f.rule}]", style="dim")
    console.print(head)
    console.print(f"  {escape(f.message)}")
    last = max(f.end_line, f.line) if f.end_line - f.line < 4 else f.line
    first, offset = f.line, 0
    if cell is not None:  # the cell's own lines, as the notebook holds them
        from driftcheck.client.notebooks import cell_source

        lines = cell_source(result.client_raw.get(f.file, ""), cell[0]) or lines
        offset = f.line - cell[1]
        first, last = f.line - offset, last - offset
    for n in range(max(1, first - 1), min(len(lines), last + 1) + 1):
        marker = ">" if first <= n <= last else " "
        console.print(
            Text(f"  {marker} {n:>4} | {lines[n - 1]}", style="" if marker == ">" else "dim")
        )
    for ev in f.evidence:
        note = f"  ({ev.note})" if ev.note else ""
        console.print(
            f"    [dim]{escape(ev.version)}:[/] {escape(ev.file)}:{ev.line}{escape(note)}"
        )
    if f.first_breaking:
        console.print(f"    [dim]first breaks in {escape(f.first_breaking)}[/]")
    if f.fix is not None:
        console.print(f"    fix ({f.fix.safety}): {escape(f.fix.description)}")
    if f.verification is not None:
        style = {"confirmed": "green", "refuted": "magenta"}.get(f.verification.status, "dim")
        console.print(
            f"    [{style}]witness: {f.verification.status}[/]: {escape(f.verification.reason)}"
        )


def _accepted(console: Console, triage: Triage) -> None:
    if triage.accepted:
        n = len(triage.accepted)
        console.print(f"[dim]{n} accepted finding(s) not shown ({escape(str(triage.path))})[/]")
    for e in triage.stale:
        console.print(
            f"[yellow]stale[/] accepted drift no longer occurs: {escape(e.rule)} "
            f"{escape(e.file)} {escape(e.symbol)} [dim]({e.fingerprint})[/]"
        )


def verification_line(v: dict) -> str:
    """One line: what the witnesses showed."""
    return (
        f"Witnesses: {v['confirmed']} confirmed, {v['refuted']} refuted, "
        f"{v['unverifiable']} unverifiable ({v['seconds']:.1f} s)."
    )


def summary(result: ScanResult) -> str:
    """One line: counts by severity."""
    if not result.findings:
        return "No drift found."
    counts = {
        s: sum(1 for f in result.findings if f.severity == s) for s in ("error", "warning", "info")
    }
    parts = [f"{n} {s}{'s' if n != 1 else ''}" for s, n in counts.items() if n]
    files = len({f.file for f in result.findings})
    return f"Found {len(result.findings)} drift(s) in {files} file(s): {', '.join(parts)}."


def served_line(served: ServedModel) -> str:
    """``served model: NAME -> Class (module)``, or why no class was found."""
    if served.top is None:
        return f"served model: {served.model}: {served.problem}"
    module, _, cls = served.top.rpartition(".")
    arch = "" if served.architecture == cls else f" (architecture {served.architecture})"
    return f"served model: {served.model}{arch} -> {cls} ({module})"
