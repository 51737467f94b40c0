"""Command line: a thin layer over the library (``driftcheck scan`` and friends)."""

from __future__ import annotations

import sys

import click

from driftcheck.errors import DriftcheckError
from driftcheck.findings import SEVERITIES, severity_rank


class _Group(click.Group):
    """Turns driftcheck errors into one line on stderr and exit code 2."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except DriftcheckError as exc:
            click.echo(f"driftcheck: error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("driftcheck: interrupted", err=True)
            sys.exit(130)


@click.group(cls=_Group)
@click.version_option(package_name="driftcheck")
def main() -> None:
    """Find API drift between a client package and the host library it calls into."""


@main.command()
@click.argument("client")
@click.option(
    "--against",
    "against",
    metavar="SPEC",
    help="Target host: NAME==VERSION, NAME (installed) or a path. Default: the installed host.",
)
@click.option("--host", "host", metavar="NAME", help="Host name when --against does not give one.")
@click.option(
    "--baseline",
    metavar="VERSION",
    help="Host version the client was written against. Default: the client's own pin.",
)
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@click.option(
    "--fail-on",
    type=click.Choice(SEVERITIES),
    default="error",
    show_default=True,
    help="Lowest severity that makes the exit code 1.",
)
@click.option("--output", "-o", type=click.File("w"), default="-", help="Write the report here.")
@click.option("--quiet", "-q", is_flag=True, help="No progress messages.")
def scan(
    client: str,
    against: str | None,
    host: str | None,
    baseline: str | None,
    fmt: str,
    fail_on: str,
    output: click.utils.LazyFile,
    quiet: bool,
) -> None:
    """Report what in CLIENT breaks on the target host.

    CLIENT is NAME==VERSION (fetched), an installed distribution's NAME, or a directory.
    """
    from driftcheck.pipeline import scan as run_scan
    from driftcheck.report import FORMATS

    progress = None if quiet or not sys.stderr.isatty() else (lambda m: click.echo(m, err=True))
    result = run_scan(client, against, baseline=baseline, host=host, progress=progress)
    FORMATS[fmt](result, output)
    threshold = severity_rank(fail_on)
    sys.exit(1 if any(severity_rank(f.severity) >= threshold for f in result.findings) else 0)
