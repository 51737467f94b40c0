"""Timeline report: findings by release, first breaking release per drift, newest clean one."""

from __future__ import annotations

from typing import TextIO

from packaging.version import Version
from rich.markup import escape
from rich.table import Table

from driftcheck.report.svg import recording_console, save_svg
from driftcheck.timelines import TimelineResult


def render_timeline(result: TimelineResult, out: TextIO, *, svg: str | None = None) -> None:
    """Print the release table and the drift table (and save them as SVG when asked)."""
    console = recording_console(out, svg=svg)
    console.print(
        f"[bold]{escape(result.client_name)} {escape(result.client_version)}[/] across "
        f"{escape(result.host)} {result.versions[0]} … {result.versions[-1]} "
        f"(baseline {escape(result.baseline or 'none')})"
    )
    first = result.first_breaking()
    releases = Table("release", "findings", "new in this release", box=None)
    for v in result.versions:
        if v in result.errors:
            releases.add_row(v, "-", f"[red]{escape(result.errors[v])}[/]")
            continue
        new = [f for fp, (fv, f) in first.items() if fv == v]
        label = ", ".join(f"{f.rule} ({f.file.rsplit('/', 1)[-1]}:{f.line})" for f in new)
        releases.add_row(v, str(len(result.findings.get(v, []))), escape(label))
    console.print(releases)
    drifts = Table("first breaks in", "severity", "kind", "where", "symbol", box=None)
    for v, f in sorted(
        first.values(), key=lambda item: (Version(item[0]), item[1].file, item[1].line)
    ):
        drifts.add_row(v, f.severity, f.kind, f"{f.file}:{f.line}", escape(f.symbol))
    console.print()
    console.print(drifts)
    clean = result.newest_clean()
    console.print()
    console.print(
        f"Newest clean release: [bold]{clean}[/]" if clean else "No release in the range is clean."
    )
    save_svg(console, svg, f"driftcheck timeline: {result.client_name} on {result.host}")
