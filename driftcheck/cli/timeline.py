"""``driftcheck timeline``: one client across every host release in a range."""

from __future__ import annotations

import sys

import click

from driftcheck.cli.options import id_list


@click.command("timeline")
@click.argument("client")
@click.option("--host", "host", required=True, metavar="NAME", help="The host package.")
@click.option("--from", "first", required=True, metavar="VERSION", help="First host release.")
@click.option(
    "--to",
    "last",
    default="latest",
    show_default=True,
    metavar="VERSION",
    help="Last host release, or 'latest'.",
)
@click.option(
    "--baseline", metavar="VERSION", help="Baseline host version (default: the client's pin)."
)
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@click.option(
    "--svg", "svg", type=click.Path(dir_okay=False), help="Also save the table as an SVG picture."
)
@click.option(
    "--disable",
    multiple=True,
    callback=id_list,
    metavar="ID",
    help="Check, kind or rule id not to report (repeat, or comma-separate).",
)
@click.option("--exclude", multiple=True, metavar="GLOB", help="Client files not to read (repeat).")
@click.option(
    "--include",
    multiple=True,
    metavar="GLOB",
    help="Client files to read beyond what its packaging declares (repeat).",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False),
    help="Settings file (default: the directory client's pyproject.toml [tool.driftcheck]).",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress messages.")
def timeline_cmd(
    client: str,
    host: str,
    first: str,
    last: str,
    baseline: str | None,
    fmt: str,
    svg: str | None,
    disable: list[str],
    exclude: tuple[str, ...],
    include: tuple[str, ...],
    config_path: str | None,
    quiet: bool,
) -> None:
    """Scan CLIENT against every HOST release in a range: where each drift first appears.

    It reads the client as ``scan`` does: ``--exclude`` / ``--include`` / ``--disable`` win
    over ``[tool.driftcheck]``, whose ``rules`` and ``baseline`` are used too."""
    import json

    from driftcheck.config import config_for
    from driftcheck.registry import check_ids
    from driftcheck.report.timeline import render_timeline
    from driftcheck.rules import load_rules
    from driftcheck.timelines import timeline

    cfg = config_for(client, config_path)
    rules = load_rules(*cfg.rules)
    if disable:
        check_ids(disable, rules, where="--disable")
    else:
        check_ids(cfg.disable, rules, where=f"{cfg.path}: 'disable'")
    progress = None if quiet or not sys.stderr.isatty() else (lambda m: click.echo(m, err=True))
    result = timeline(
        client,
        host,
        first,
        last,
        baseline=baseline if baseline is not None else cfg.baseline,
        progress=progress,
        rules=rules,
        exclude=list(exclude or cfg.exclude),
        include=list(include or cfg.include),
        disable=list(disable or cfg.disable),
    )
    if fmt == "json":
        click.echo(json.dumps(result.to_dict(), indent=2))
    else:
        render_timeline(result, sys.stdout, svg=svg)
    sys.exit(0)
