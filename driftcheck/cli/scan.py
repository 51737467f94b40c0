"""``driftcheck scan``: report what in a client breaks on the target host."""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import TextIO

import click

from driftcheck.cli.options import (
    REPORT_FORMATS,
    exit_quickly,
    run_settings,
    scan_options,
    status,
)
from driftcheck.findings import severity_rank
from driftcheck.kinds import Severity


@click.command()
@click.argument("client")
@scan_options
@click.option(
    "--format", "fmt", type=click.Choice(REPORT_FORMATS), default="text", show_default=True
)
@click.option(
    "--fail-on",
    type=click.Choice([str(s) for s in Severity]),
    default=None,
    show_default="error",
    help="Lowest severity that makes the exit code 1.",
)
@click.option(
    "--accepted",
    "accepted_path",
    type=click.Path(exists=True, dir_okay=False),
    help="Accepted-drift file whose findings are not reported. "
    "Default: .driftcheck-accepted.toml in the project folder, when present.",
)
@click.option(
    "--write-baseline",
    "write_baseline",
    type=click.Path(dir_okay=False, writable=True),
    metavar="FILE",
    help="Record the current findings as accepted drift in FILE (each with a reason to fill "
    "in) and exit 0.",
)
@click.option("--output", "-o", type=click.File("w"), default="-", help="Write the report here.")
@click.option(
    "--verify",
    is_flag=True,
    help="Run each finding's witness program on the real baseline and target releases "
    "(managed environments, built once): confirmed, refuted (not counted) or unverifiable.",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress messages.")
def scan(
    client: str,
    against: str | None,
    host: str | None,
    baseline: str | None,
    fmt: str,
    fail_on: str | None,
    disable: list[str],
    exclude: tuple[str, ...],
    include: tuple[str, ...],
    config_path: str | None,
    rule_dirs: tuple[str, ...],
    mined_only: bool,
    model: str | None,
    accepted_path: str | None,
    write_baseline: str | None,
    output: TextIO,
    verify: bool,
    quiet: bool,
) -> None:
    """Report what in CLIENT breaks on the target host.

    CLIENT is NAME==VERSION (fetched), an installed distribution's NAME, or a directory. A
    directory client's settings are read from [tool.driftcheck] in its pyproject.toml;
    flags given here win over them.
    """
    exit_quickly()  # nothing it builds is of use once its report is written
    from pathlib import Path

    from driftcheck.accepted import DEFAULT_NAME, load_accepted, triage, write_accepted
    from driftcheck.pipeline import scan as run_scan
    from driftcheck.registry import kinds_of
    from driftcheck.report import FORMATS

    settings = run_settings(click.get_current_context().params)
    cfg = settings.pop("config")
    disabled = settings["disable"]
    with status(quiet) as progress:
        result = run_scan(client, progress=progress, **settings)
        if verify:
            from driftcheck.witness.verify import verify_result

            result = verify_result(result, progress=progress)
    if write_baseline:
        header = f"{result.client_name} against {result.host_name} {result.target}"
        entries = write_accepted(Path(write_baseline), result.findings, header=header)
        click.echo(
            f"driftcheck: recorded {len(entries)} accepted finding(s) in {write_baseline}; "
            "give each a reason",
            err=True,
        )
        sys.exit(0)
    path = Path(accepted_path) if accepted_path else cfg.accepted
    if path is None and cfg.root is not None and (cfg.root / DEFAULT_NAME).is_file():
        path = cfg.root / DEFAULT_NAME
    entries = load_accepted(path) if path is not None else []
    split = triage(
        result.findings, entries, path, disabled=disabled, kinds=kinds_of(settings["rules"])
    )
    for e in split.stale:
        click.echo(
            f"driftcheck: warning: stale accepted drift in {path}: {e.rule} {e.file} "
            f"{e.symbol} ({e.fingerprint}) no longer occurs; remove the entry",
            err=True,
        )
    reported = replace(result, findings=split.reported)
    FORMATS[fmt](reported, output, triage=split)
    threshold = severity_rank(fail_on or cfg.fail_on or "error")
    sys.exit(1 if any(severity_rank(f.severity) >= threshold for f in split.reported) else 0)
