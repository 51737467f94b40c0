"""``driftcheck timeline``: one client across every host release in a range."""

from __future__ import annotations

import sys

import click

from driftcheck.cli.options import client_options, exit_quickly, run_settings


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
@client_options
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
    model: str | None,
    quiet: bool,
) -> None:
    """Scan CLIENT against every HOST release in a range: where each drift first appears.

    Each release is checked as ``scan --against HOST==RELEASE`` checks it, with the same served
    model (``--model``): ``--exclude`` / ``--include`` / ``--disable`` / ``--model`` win over
    ``[tool.driftcheck]``, whose ``rules`` and ``baseline`` are used too."""
    exit_quickly()  # nothing it builds is of use once its report is written
    import json

    from driftcheck.report.timeline import render_timeline
    from driftcheck.timelines import timeline

    settings = run_settings(
        {
            "client": client,
            "config_path": config_path,
            "against": None,
            "host": host,
            "baseline": baseline,
            "disable": disable,
            "exclude": exclude,
            "include": include,
            "rule_dirs": (),
            "model": model,
        }
    )
    progress = None if quiet or not sys.stderr.isatty() else (lambda m: click.echo(m, err=True))
    result = timeline(
        client,
        host,
        first,
        last,
        baseline=settings["baseline"],
        progress=progress,
        rules=settings["rules"],
        exclude=settings["exclude"],
        include=settings["include"],
        disable=settings["disable"],
        model=settings["model"],
    )
    if fmt == "json":
        click.echo(json.dumps(result.to_dict(), indent=2))
    else:
        render_timeline(result, sys.stdout, svg=svg)
    sys.exit(0)
