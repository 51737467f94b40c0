"""The matrix reports a terminal and a CI comment show: text (aligned marks), JSON (per client
its statuses, first breaking release and counts) and Markdown (a short table); each with what a
newer database breaks that an older did not, when one is compared (the page is ``page.py``)."""

from __future__ import annotations

import json

from driftcheck.matrix.compare import Change, Comparison
from driftcheck.matrix.results import Matrix, Pair, Row

#: Report formats of ``matrix report`` besides the page.
FORMATS = ("text", "json", "markdown")

#: How each status is marked in the text report.
TEXT_MARKS = {"clean": "ok", "warnings": "W", "errors": "E", "failed": "FAIL", "missing": "."}

#: How each status is marked in the Markdown report.
MARKDOWN_MARKS = {"clean": "✅", "warnings": "⚠️", "errors": "❌", "failed": "💥", "missing": "–"}

#: The most changes a Markdown comment lists (the rest are counted).
MARKDOWN_CHANGES = 20


def headline(matrix: Matrix) -> str:
    """One line: host, clients x releases, the tool's versions, when it ran."""
    first, last = matrix.run_span()
    releases = matrix.releases
    span = f"{releases[0]} … {releases[-1]}" if len(releases) > 1 else releases[0]
    when = first[:16].replace("T", " ")
    if last[:16] != first[:16]:  # the day once when the run ended the day it began
        when += f" … {last[11:16] if last[:10] == first[:10] else last[:16].replace('T', ' ')}"
    return (
        f"{matrix.host}: {len(matrix.clients)} client(s) x {len(releases)} release(s) "
        f"({span}), driftcheck {', '.join(matrix.tool_versions())}, run {when} UTC"
    )


def _mark(pair: Pair | None, marks: dict[str, str], space: str = "") -> str:
    """A pair's mark and the count it shows: errors of an errors pair, warnings of a warnings
    pair (``E3``, ``❌ 3``)."""
    if pair is None:
        return marks["missing"]
    count = {"errors": pair.errors, "warnings": pair.warnings}.get(pair.status, 0)
    return marks.get(pair.status, "?") + (f"{space}{count}" if count else "")


def _summary(comparison: Comparison) -> str:
    """How much is new: pairs worse, new releases breaking a client, new findings."""
    return (
        f"{len(comparison.worse())} pair(s) worse, "
        f"{len(comparison.breaks())} new release(s) breaking a client, "
        f"{comparison.new_findings()} new finding(s)"
    )


def _failed(matrix: Matrix) -> list[Pair]:
    pairs = (matrix.pair(c.spec, r) for c in matrix.clients for r in matrix.releases)
    return [p for p in pairs if p is not None and p.status == "failed"]


def _change_line(change: Change, labels: dict[str, str]) -> str:
    """One change in words: which pair, how its status moved, how many findings are new."""
    where = f"{labels.get(change.spec, change.spec)} against {change.release}"
    than = f" (old newest {change.against})" if change.new_release else ""
    moved = f"{change.was} → {change.now}" if change.worse else f"still {change.now}"
    return f"{where}: {moved}{than}, {len(change.new)} new finding(s)"


def _row_line(row: Row) -> str:
    return f"{row.file}:{row.line} {row.severity} {row.rule}: {' '.join(row.message.split())}"


def render_text(matrix: Matrix, comparison: Comparison | None = None) -> str:
    """The matrix as aligned columns: a mark per pair, then each client's first breaking
    release; the failed pairs and their reasons; what is new since ``comparison``'s database."""
    changed = comparison.changed_pairs() if comparison else set()
    rows = [["client", *matrix.releases, "first breaking"]]
    for client in matrix.clients:
        marks = []
        for release in matrix.releases:
            mark = _mark(matrix.pair(client.spec, release), TEXT_MARKS)
            marks.append(mark + ("*" if (client.spec, release) in changed else ""))
        rows.append([client.label, *marks, matrix.first_breaking(client.spec) or "none"])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = [headline(matrix), ""]
    out += [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    legend = "ok clean, W<n> warnings, E<n> errors, FAIL scan failed, . not run"
    out += ["", "legend: " + legend + (", * worse or new findings" if changed else "")]
    failed = _failed(matrix)
    if failed:
        out += ["", f"{len(failed)} failed pair(s):"]
        out += [
            f"  {p.client_spec} against {p.release}: {p.why or 'no reason given'}" for p in failed
        ]
    if comparison is not None:
        labels = {c.spec: c.label for c in matrix.clients}
        out += [
            "",
            f"Compared with {comparison.old}: {_summary(comparison)}",
        ]
        for change in comparison.changes:
            out.append("  " + _change_line(change, labels))
            out += [f"    + {_row_line(row)}" for row in change.new]
    return "\n".join(out) + "\n"


def row_data(row: Row) -> dict:
    """A finding as JSON-ready data (the JSON report's and the page's)."""
    return {
        "fingerprint": row.fingerprint,
        "rule": row.rule,
        "kind": row.kind,
        "severity": row.severity,
        "file": row.file,
        "line": row.line,
        "symbol": row.symbol,
        "message": row.message,
        "fix": row.fix,
        "fix_safety": row.fix_safety,
    }


def comparison_data(comparison: Comparison) -> dict:
    """The comparison as JSON-ready data (``compare`` of the JSON report)."""
    return {
        "old": comparison.old,
        "worse": len(comparison.worse()),
        "breaks": len(comparison.breaks()),
        "new_findings": comparison.new_findings(),
        "changes": [
            {
                "spec": c.spec,
                "release": c.release,
                "against": c.against,
                "was": c.was,
                "now": c.now,
                "worse": c.worse,
                "new_release": c.new_release,
                "breaks": c.breaks,
                "new": [row_data(r) for r in c.new],
            }
            for c in comparison.changes
        ],
    }


def report_data(matrix: Matrix, comparison: Comparison | None = None) -> dict:
    """The JSON report: per client its status per release, first breaking release and counts."""
    first, last = matrix.run_span()
    clients = []
    for client in matrix.clients:
        cells: dict[str, dict | None] = {}
        totals = {"errors": 0, "warnings": 0, "infos": 0}
        for release in matrix.releases:
            pair = matrix.pair(client.spec, release)
            cells[release] = None
            if pair is not None:
                counts = {key: getattr(pair, key) for key in totals}
                cells[release] = {"status": pair.status, **counts, "why": pair.why}
                totals = {key: totals[key] + counts[key] for key in totals}
        clients.append(
            {
                "spec": client.spec,
                "name": client.name,
                "version": client.version,
                "first_breaking": matrix.first_breaking(client.spec),
                "statuses": matrix.status_counts(client.spec),
                "findings": totals,
                "releases": cells,
            }
        )
    return {
        "host": matrix.host,
        "database": matrix.database,
        "releases": list(matrix.releases),
        "tool_versions": matrix.tool_versions(),
        "run": {"first": first, "last": last},
        "statuses": matrix.status_counts(),
        "clients": clients,
        "compare": comparison_data(comparison) if comparison is not None else None,
    }


def render_json(matrix: Matrix, comparison: Comparison | None = None) -> str:
    """:func:`report_data` as indented JSON."""
    return json.dumps(report_data(matrix, comparison), indent=2) + "\n"


def markdown_text(text: str) -> str:
    """Text safe in a Markdown table cell of a CI comment: one line, no pipe, no HTML."""
    text = " ".join(text.split())
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")


def render_markdown(matrix: Matrix, comparison: Comparison | None = None) -> str:
    """A short Markdown table for a CI comment: clients x releases with status marks and each
    client's first breaking release (🔺 marks a pair worse than, or with findings new since,
    ``comparison``'s database; the first :data:`MARKDOWN_CHANGES` changes are listed below)."""
    changed = comparison.changed_pairs() if comparison else set()
    releases = " | ".join(markdown_text(r) for r in matrix.releases)
    out = [f"**{markdown_text(headline(matrix))}**", ""]
    out += [
        f"| client | {releases} | first breaking |",
        "|" + " --- |" * (len(matrix.releases) + 2),
    ]
    for client in matrix.clients:
        marks = []
        for release in matrix.releases:
            mark = _mark(matrix.pair(client.spec, release), MARKDOWN_MARKS, " ")
            marks.append(mark + (" 🔺" if (client.spec, release) in changed else ""))
        first = matrix.first_breaking(client.spec)
        shown = f"**{markdown_text(first)}**" if first else "none"
        out.append(f"| {markdown_text(client.label)} | {' | '.join(marks)} | {shown} |")
    legend = (f"{m} {'not run' if s == 'missing' else s}" for s, m in MARKDOWN_MARKS.items())
    out += ["", " · ".join(legend)]
    if comparison is not None:
        labels = {c.spec: c.label for c in matrix.clients}
        out += [
            "",
            f"🔺 Compared with `{markdown_text(comparison.old)}`: {_summary(comparison)}",
            "",
        ]
        shown_changes = comparison.changes[:MARKDOWN_CHANGES]
        out += [f"- {markdown_text(_change_line(c, labels))}" for c in shown_changes]
        if len(comparison.changes) > MARKDOWN_CHANGES:
            out.append(f"- … and {len(comparison.changes) - MARKDOWN_CHANGES} more")
    return "\n".join(out) + "\n"
