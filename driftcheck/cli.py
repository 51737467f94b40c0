"""Command line: a thin layer over the library (``driftcheck scan`` and friends)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import NoReturn

import click

from driftcheck.cli_probe_timeline import probe, timeline_cmd
from driftcheck.cli_rules_cache import cache_group, rules
from driftcheck.errors import DriftcheckError
from driftcheck.findings import SEVERITIES, severity_rank


class _Group(click.Group):
    """Turns driftcheck errors, bad usage and environment errors into one line on stderr and
    exit code 2 (``DRIFTCHECK_DEBUG=1`` shows the traceback instead)."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: object,
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as exc:
            _usage_error(exc)
            raise  # only for NoArgsIsHelpError, which click shows as help

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except DriftcheckError as exc:
            if _debug():
                raise
            _fail(str(exc), exc.exit_code)
        except click.UsageError as exc:
            _usage_error(exc)
            raise
        except click.ClickException as exc:
            # e.g. the --output file cannot be opened (click opens it lazily, at first write)
            if _debug():
                raise
            _fail(exc.format_message(), 2)
        except KeyboardInterrupt:
            click.echo("driftcheck: interrupted", err=True)
            sys.exit(130)
        except BrokenPipeError:
            raise  # click's own handling: quiet exit when the reader went away
        except OSError as exc:
            # Writing the report, reading a file: an environment problem, not a bug.
            if _debug():
                raise
            where = f" ({exc.filename})" if exc.filename else ""
            _fail(f"{exc.strerror or exc}{where}", 2)


def _debug() -> bool:
    return os.environ.get("DRIFTCHECK_DEBUG", "") not in ("", "0")


def _fail(message: str, code: int) -> NoReturn:
    """Print one line (never a traceback) and exit."""
    line = " ".join(str(message).split()) or "unknown error"
    click.echo(f"driftcheck: error: {line}", err=True)
    sys.exit(code)


def _usage_error(exc: click.UsageError) -> None:
    """One line for click's own usage errors, except 'no arguments', which shows help."""
    if type(exc).__name__ == "NoArgsIsHelpError" or _debug():
        return
    hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
    _fail(f"{exc.format_message()}{hint}", exc.exit_code)


@click.group(cls=_Group)
@click.version_option(package_name="driftcheck")
def main() -> None:
    """Find API drift between a client package and the host library it calls into."""


#: Report formats (``driftcheck.report.FORMATS``; kept here so ``--help`` stays fast).
REPORT_FORMATS = ("text", "json", "sarif", "github")


def _ids(_ctx: click.Context, _param: click.Parameter, value: tuple[str, ...]) -> list[str]:
    """``--disable a --disable b`` or ``--disable a,b``."""
    return [part for item in value for part in item.replace(",", " ").split()]


@contextmanager
def _status(quiet: bool) -> Iterator[Callable[[str], None] | None]:
    """A rich spinner on stderr showing the scan's progress messages, on a terminal only."""
    if quiet or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.markup import escape

    with Console(stderr=True).status("scanning") as status:
        yield lambda message: status.update(escape(message))


@main.command()
@click.argument("client")
@click.option(
    "--against",
    "against",
    metavar="SPEC",
    help="Target host: NAME==VERSION, a range or NAME@latest (newest matching release), "
    "NAME (installed) or a path. Default: the installed host.",
)
@click.option("--host", "host", metavar="NAME", help="Host name when --against does not give one.")
@click.option(
    "--baseline",
    metavar="VERSION",
    help="Host version the client was written against. Default: the client's own pin.",
)
@click.option(
    "--format", "fmt", type=click.Choice(REPORT_FORMATS), default="text", show_default=True
)
@click.option(
    "--fail-on",
    type=click.Choice(SEVERITIES),
    default=None,
    show_default="error",
    help="Lowest severity that makes the exit code 1.",
)
@click.option(
    "--disable",
    multiple=True,
    callback=_ids,
    metavar="ID",
    help="Rule or check id not to report (repeat, or comma-separate).",
)
@click.option(
    "--exclude",
    multiple=True,
    metavar="GLOB",
    help="Client files not to read, relative to its root (repeat; a folder excludes its files).",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False),
    help="Settings file: a pyproject.toml ([tool.driftcheck]) or a TOML file of the same keys. "
    "Default: the directory client's pyproject.toml.",
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
    config_path: str | None,
    accepted_path: str | None,
    write_baseline: str | None,
    output: click.utils.LazyFile,
    quiet: bool,
) -> None:
    """Report what in CLIENT breaks on the target host.

    CLIENT is NAME==VERSION (fetched), an installed distribution's NAME, or a directory. A
    directory client's settings are read from [tool.driftcheck] in its pyproject.toml;
    flags given here win over them.
    """
    from pathlib import Path

    from driftcheck.accepted import DEFAULT_NAME, load_accepted, triage, write_accepted
    from driftcheck.config import check_rule_ids, config_for
    from driftcheck.pipeline import scan as run_scan
    from driftcheck.report import FORMATS

    cfg = config_for(client, config_path)
    check_rule_ids(disable, where="--disable")
    disabled = set(disable or cfg.disable)
    with _status(quiet) as progress:
        result = run_scan(
            client,
            against or cfg.against,
            baseline=baseline or cfg.baseline,
            host=host or cfg.host,
            progress=progress,
            exclude=list(exclude or cfg.exclude),
            disabled_rules=disabled,
        )
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
    split = triage(result.findings, entries, path, disabled=disabled)
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


@main.command()
@click.argument("client")
@click.option("--against", "against", metavar="SPEC", help="Target host (as for scan).")
@click.option("--host", "host", metavar="NAME", help="Host name when --against does not give one.")
@click.option("--baseline", metavar="VERSION", help="Host version the client was written against.")
@click.option(
    "--out",
    "out",
    type=click.Path(file_okay=False),
    default="driftcheck-patches",
    show_default=True,
    help="Where to write the patches.",
)
@click.option(
    "--apply",
    "apply_",
    is_flag=True,
    help="Rewrite the client's files in place (directory clients).",
)
@click.option("--unsafe-fixes", is_flag=True, help="Also apply fixes marked unsafe.")
def fix(
    client: str,
    against: str | None,
    host: str | None,
    baseline: str | None,
    out: str,
    apply_: bool,
    unsafe_fixes: bool,
) -> None:
    """Write patches for CLIENT's drift (or apply them with --apply).

    Exits 1 when fixes are pending (patches written), 0 when none are needed.
    """
    from pathlib import Path

    from driftcheck.fixes.patches import apply_in_place, plan, require_directory, write_patches
    from driftcheck.pipeline import scan as run_scan

    result = run_scan(client, against, baseline=baseline, host=host)
    fix_plan = plan(result.findings, result.client_texts, unsafe=unsafe_fixes)
    for ff in fix_plan.files:
        for f in ff.applied:
            click.echo(f"{f.file}:{f.line}: {f.rule} -> {f.fix.description} ({f.fix.safety})")
        for f, why in ff.declined:
            click.echo(f"{f.file}:{f.line}: {f.rule}: not fixed: {why}")
    for f in fix_plan.skipped_unsafe:
        click.echo(
            f"{f.file}:{f.line}: {f.rule}: unsafe fix skipped (use --unsafe-fixes): {f.fix.description}"
        )
    for f in fix_plan.manual:
        guide = f.fix.description if f.fix else f.message
        click.echo(f"{f.file}:{f.line}: {f.rule}: manual: {guide}")
    for file, reason in result.skipped:
        click.echo(f"{file}: skipped, left untouched: {reason}")
    if not fix_plan.pending:
        click.echo("No fixes needed.")
        sys.exit(0)
    if apply_:
        root = require_directory(result.client_root, client)
        done, refused = apply_in_place(fix_plan, root)
        for rel in done:
            click.echo(f"rewrote {rel}")
        for rel, why in refused:
            click.echo(f"refused {rel}: {why}", err=True)
        sys.exit(1 if refused else 0)
    written = write_patches(fix_plan, Path(out))
    for path in written:
        click.echo(f"wrote {path}")
    sys.exit(1)


# Secondary commands live in their own modules; the group and its error handling stay here.
main.add_command(rules)
main.add_command(probe)
main.add_command(timeline_cmd)
main.add_command(cache_group)
