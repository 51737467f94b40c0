"""The report of a probe across releases: a table release x (unpatched, patched) -> the stage
reached and the time, the errors one line each (with the blame when it is outside the host's
API), the fixes per release, and the newest release on which the patched client passes."""

from __future__ import annotations

import io
import json
from typing import TextIO

from driftcheck.probes.ranges import RangeReport, ReleaseRun, cell_dict


def _cell(row: ReleaseRun, label: str, host: str) -> str:
    if row.error is not None:
        return "not run"
    run = row.run(label)
    if run is None:
        return "- (no fix needed)" if label == "patched" and row.no_fix_needed else "-"
    c = cell_dict(run, host)
    return f"{'PASSED' if c['ok'] else 'FAILED at ' + str(c['stage'])} {c['seconds']:.0f}s"


def _fixes(row: ReleaseRun) -> str:
    if row.report is None or not row.report.fixes:
        return "-"
    verdicts = row.report.fix_verdicts()
    unsafe = [f for f in verdicts if f.get("safety") == "unsafe"]
    text = f"{len(verdicts)}"
    if unsafe:
        seen = sorted({str(f.get("workload", "not run")) for f in unsafe})
        text += f" ({len(unsafe)} unsafe: {'/'.join(seen)})"
    return text


def _env(row: ReleaseRun) -> str:
    if row.env_source == "built" and row.build_seconds is not None:
        return f"built {row.build_seconds:.0f}s"
    return row.env_source or "-"


#: How the SVG picture draws a run's verdict.
_SVG_STYLES = {"PASSED": "bold green", "FAILED": "bold red", "confirmed": "green"}


def render_range_text(report: RangeReport, out: TextIO, *, svg: str | None = None) -> None:
    """The table, the errors, the newest passing release (and the same as an SVG picture at
    ``svg``, as ``timeline --svg`` draws its tables)."""
    if svg:
        from driftcheck.report.svg import text_svg

        text = io.StringIO()
        render_range_text(report, text)
        out.write(text.getvalue())
        title = f"driftcheck probe: {report.client} across {report.host} releases"
        text_svg(text.getvalue(), svg, title, styles=_SVG_STYLES)
        return
    w = out.write
    opts = report.options
    ver = f" ({report.client_version})" if report.client_version else ""
    first, last = (
        (report.releases[0].version, report.releases[-1].version) if report.releases else ("", "")
    )
    flags = " --fix" if opts.fix else ""
    flags += " --unsafe-fixes" if opts.unsafe_fixes else ""
    w(
        f"driftcheck probe: {report.client}{ver} against {report.host} {first} .. {last} "
        f"({len(report.releases)} releases){flags}\n\n"
    )
    rows = [("release", "unpatched", "patched", "fixes", "env", "total")]
    for r in report.releases:
        rows.append(
            (
                r.version,
                _cell(r, "unpatched", report.host),
                _cell(r, "patched", report.host),
                _fixes(r),
                _env(r),
                f"{r.seconds:.0f}s",
            )
        )
    widths = [max(len(row[i]) for row in rows) + 2 for i in range(len(rows[0]))]
    for row in rows:
        w(
            "".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
            + "\n"
        )
    errors = list(_error_lines(report))
    if errors:
        w("\nerrors\n")
        for line in errors:
            w(line + "\n")
    unsafe = _unsafe_lines(report)
    if unsafe:
        w("\nunsafe fixes\n")
        for line in unsafe:
            w(line + "\n")
    newest = report.newest_patched_pass()
    w(f"\nnewest release on which the {'patched ' if opts.fix else ''}client passes: ")
    w(f"{newest or 'none'}\n")
    w(f"total {report.seconds:.0f} s\n")


def _error_lines(report: RangeReport) -> list[str]:
    out: list[str] = []
    for r in report.releases:
        if r.error is not None:
            out.append(f"  {r.version}  not run: {r.error}")
            continue
        for label in ("unpatched", "patched"):
            run = r.run(label)
            if run is None or run.ok:
                continue
            c = cell_dict(run, report.host)
            out.append(f"  {r.version} {label}  {c['stage']}: {c['error']}")
            blamed = r.blame(label, report.host)
            if not (blamed and blamed["kind"] == "outside-host"):
                if run.error and run.error.get("client_frame"):
                    out.append(f"      client frame: {str(run.error['client_frame'])[:200]}")
            if blamed:
                out.append(f"      {blamed['text']}")
    return out


def _unsafe_lines(report: RangeReport) -> list[str]:
    out: list[str] = []
    for r in report.releases:
        for fx in r.report.fix_verdicts() if r.report else []:
            if fx.get("safety") != "unsafe":
                continue
            where = f"  {r.version}  {fx.get('file')}:{fx.get('line')} {fx.get('rule')}: "
            if fx.get("workload") == "confirmed":
                out.append(where + "confirmed by the workload")
            elif fx.get("workload") == "untested":
                out.append(where + "untested: the patched run failed outside the host's API")
            else:
                out.append(where + f"not confirmed ({fx.get('failure', 'not run')})"[:300])
    return out


def render_range_json(report: RangeReport, out: TextIO) -> None:
    json.dump(report.to_dict(), out, indent=2, default=str)
    out.write("\n")
