"""``driftcheck matrix report``: a matrix database as a page, a table, JSON or Markdown."""

from __future__ import annotations

import click


@click.command("report")
@click.option(
    "--db",
    "db",
    required=True,
    type=click.Path(dir_okay=False),
    metavar="PATH",
    help="The matrix database 'matrix run' wrote.",
)
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False, writable=True),
    metavar="FILE",
    help="Also write the self-contained HTML page (heatmap, findings, filters) to FILE.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "markdown"]),
    default="text",
    show_default=True,
    help="What is printed on stdout (markdown: a short table for a CI comment).",
)
@click.option(
    "--compare",
    "old",
    type=click.Path(dir_okay=False),
    metavar="OLD",
    help="An older matrix database: show what this one breaks that it did not.",
)
@click.option("--host", metavar="NAME", help="The host to report (needed when PATH holds several).")
def report(db: str, html_path: str | None, fmt: str, old: str | None, host: str | None) -> None:
    """Report the matrix database PATH: clients x releases, each client's first breaking
    release (the first, in version order, with errors) and, with --compare, the pairs that got
    worse, the new findings and the new releases that break a client the old newest did not."""
    from pathlib import Path

    from driftcheck.matrix.compare import compare_matrices
    from driftcheck.matrix.page import render_html
    from driftcheck.matrix.report import render_json, render_markdown, render_text
    from driftcheck.matrix.results import load_matrix

    matrix = load_matrix(db, host)
    comparison = compare_matrices(matrix, load_matrix(old, matrix.host)) if old else None
    if html_path:
        Path(html_path).write_text(render_html(matrix, comparison), encoding="utf-8")
    render = {"text": render_text, "json": render_json, "markdown": render_markdown}[fmt]
    click.echo(render(matrix, comparison), nl=False)
