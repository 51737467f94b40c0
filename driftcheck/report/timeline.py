"""Timeline report: findings by release, first breaking release per drift, newest clean one."""

from __future__ import annotations

import io
from typing import TextIO

from packaging.version import Version
from rich.console import RenderableType
from rich.markup import escape
from rich.table import Table

from driftcheck.report.console import report_console
from driftcheck.report.svg import recording_console, save_svg
from driftcheck.report.text import release_list_line
from driftcheck.result import baseline_note
from driftcheck.timelines import TimelineResult

#: The widest SVG picture, in columns: a wider table folds (a picture is not scrolled).
SVG_WIDTH = 160


def render_timeline(result: TimelineResult, out: TextIO, *, svg: str | None = None) -> None:
    """Print the release table and the drift table, full paths and symbols in them (and save
    them as SVG when asked, as wide as the widest table up to :data:`SVG_WIDTH`)."""
    parts: list[RenderableType] = [
        f"[bold]{escape(result.client_name)} {escape(result.client_version)}[/] across "
        f"{escape(result.host)} {result.versions[0]} … {result.versions[-1]} "
        f"(baseline {escape(baseline_note(result.baseline, result.baseline_origin, result.host))})"
    ]
    if result.release_list:
        line = release_list_line(result.host, result.versions[-1], result.release_list)
        parts.append(f"[yellow]{escape(line)}[/]")
    first = result.first_breaking()
    releases = Table("release", "findings", "new in this release", box=None)
    for v in result.versions:
        if v in result.errors:
            releases.add_row(v, "-", f"[red]{escape(result.errors[v])}[/]")
            continue
        new = [f for fp, (fv, f) in first.items() if fv == v]
        label = ", ".join(f"{f.rule} ({f.file}:{f.line})" for f in new)
        releases.add_row(v, str(len(result.findings.get(v, []))), escape(label))
    drifts = Table("first breaks in", "severity", "kind", "where", "symbol", box=None)
    for v, f in sorted(
        first.values(), key=lambda item: (Version(item[0]), item[1].file, item[1].line)
    ):
        drifts.add_row(v, f.severity, f.kind, f"{f.file}:{f.line}", escape(f.symbol))
    for table in (releases, drifts):
        for column in table.columns:
            # Words stay whole; a narrow terminal breaks a path or symbol, never cuts it.
            column.overflow = "fold"
            column.no_wrap = column.header in ("release", "findings", "severity", "kind")
    clean = result.newest_clean()
    parts += [releases, "", drifts, ""]
    parts.append(
        f"Newest clean release: [bold]{clean}[/]" if clean else "No release in the range is clean."
    )
    console = report_console(out)
    for part in parts:
        console.print(part)
    if svg:
        wide = max(console.measure(t).maximum for t in (releases, drifts))
        picture = recording_console(io.StringIO(), svg=svg, width=min(max(wide, 80), SVG_WIDTH))
        for part in parts:
            picture.print(part)
        save_svg(picture, svg, f"driftcheck timeline: {result.client_name} on {result.host}")
