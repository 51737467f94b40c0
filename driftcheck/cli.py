"""Command line: a thin layer over the library (``driftcheck scan`` and friends)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import NoReturn

import click

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


@main.group()
def rules() -> None:
    """List and show the rules (host knowledge kept as data under rules/)."""


@rules.command("list")
@click.option("--host", "host", metavar="NAME", help="Only rules for this host.")
def rules_list(host: str | None) -> None:
    """One line per rule: id, host, versions, kind, severity, fix."""
    from rich.console import Console
    from rich.table import Table

    from driftcheck.rules import load_rules

    table = Table("id", "host", "versions", "kind", "severity", "fix", box=None)
    for rule in load_rules():
        if host and rule.host != host:
            continue
        fix = rule.fix.safety if rule.fix else "-"
        table.add_row(rule.id, rule.host, str(rule.versions), rule.kind, rule.severity, fix)
    Console(width=120).print(table)


@rules.command("show")
@click.argument("rule_id")
def rules_show(rule_id: str) -> None:
    """Everything about one rule, its cases included."""
    from driftcheck.errors import UsageError
    from driftcheck.rules import load_rules

    found = {r.id: r for r in load_rules()}
    rule = found.get(rule_id)
    if rule is None:
        raise UsageError(f"no rule {rule_id!r}; `driftcheck rules list` shows them")
    click.echo(f"{rule.id}  ({rule.kind}, {rule.severity}, {rule.host} {rule.versions})")
    click.echo(f"file: {rule.path}")
    if rule.message:
        click.echo(f"\n{rule.message}")
    if rule.match:
        click.echo(f"\nmatch: {rule.match}")
    if rule.conditions:
        click.echo(f"conditions: {rule.conditions}")
    if rule.binding:
        click.echo(f"binding: {rule.binding}")
    if rule.fix:
        click.echo(f"fix ({rule.fix.safety}): {rule.fix.description}")
    for ref in rule.references:
        click.echo(f"reference: {ref}")
    for case in rule.cases:
        note = f" — {case.note}" if case.note else ""
        click.echo(f"\n[{case.kind}]{note}\n{case.code.strip()}")
        if case.fixed:
            click.echo(f"[after fix]\n{case.fixed.strip()}")


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


def _layer_ids(
    _ctx: click.Context, _param: click.Parameter, value: tuple[str, ...]
) -> list[int] | None:
    """``--layer-ids 2 --layer-ids 5`` or ``--layer-ids 2,5``."""
    out: list[int] = []
    for item in value:
        for part in item.replace(",", " ").split():
            try:
                out.append(int(part))
            except ValueError:
                raise click.BadParameter(f"not a layer index: {part!r}") from None
    return out or None


@main.command()
@click.argument("client")
@click.option(
    "--host",
    "host",
    default="installed",
    show_default=True,
    metavar="SPEC",
    help="vLLM to run against: vllm==X, or 'installed' (the chosen environment's).",
)
@click.option(
    "--patches",
    type=click.Path(file_okay=False, path_type=str),
    help="Directory of .patch files (a/ b/ prefixes, relative to the client root) to apply.",
)
@click.option("--fix", is_flag=True, help="Apply driftcheck's own patches (as 'driftcheck fix').")
@click.option(
    "--env",
    "env_choice",
    metavar="current|managed|PATH",
    help="Python environment: this one, a managed one in the cache, or a given one. "
    "Default: this one when it has that vLLM, else managed.",
)
@click.option("--model", metavar="NAME_OR_PATH", help="Real model instead of the tiny local one.")
@click.option("--tensor-parallel-size", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--trust-remote-code", is_flag=True, help="Allow the model's own code.")
@click.option(
    "--layer-ids", multiple=True, callback=_layer_ids, help="Layers to capture (e.g. 2,4,6)."
)
@click.option("--plan", is_flag=True, help="Print command, environment and checks; run nothing.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=None,
    help="Seconds per run (default: 900 for the tiny model, 7200 with --model).",
)
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@click.option("--output", "-o", type=click.File("w"), default="-", help="Write the report here.")
@click.option("--keep", is_flag=True, help="Keep the temporary client copies (for debugging).")
@click.option("--quiet", "-q", is_flag=True, help="No progress messages.")
def probe(
    client: str,
    host: str,
    patches: str | None,
    fix: bool,
    env_choice: str | None,
    model: str | None,
    tensor_parallel_size: int,
    trust_remote_code: bool,
    layer_ids: list[int] | None,
    plan: bool,
    timeout: float | None,
    fmt: str,
    output: click.utils.LazyFile,
    keep: bool,
    quiet: bool,
) -> None:
    """Run CLIENT's real workload against a real vLLM, unpatched and patched.

    For speculators: VllmHiddenStatesGenerator extracts hidden states twice; the report says
    which stage failed and with which exception, side by side for the unpatched and the patched
    client. Exit code 0 when the last run passes every check, 1 when it fails.
    """
    from pathlib import Path

    from driftcheck.probe.harness import ProbeOptions, make_plan
    from driftcheck.probe.harness import probe as run_probe
    from driftcheck.probe.report import render_json, render_plan, render_plan_json, render_text

    options = ProbeOptions(
        client=client,
        host=host,
        patches=Path(patches) if patches else None,
        fix=fix,
        env=env_choice,
        model=model,
        tensor_parallel_size=tensor_parallel_size,
        trust_remote_code=trust_remote_code,
        layer_ids=layer_ids,
        timeout=timeout,
        keep=keep,
    )
    if plan:
        the_plan = make_plan(options, options.argv())
        (render_plan_json if fmt == "json" else render_plan)(the_plan, output)
        return
    progress = None if quiet else (lambda m: click.echo(m, err=True))
    report = run_probe(options, progress=progress)
    (render_json if fmt == "json" else render_text)(report, output)
    sys.exit(0 if report.ok else 1)


@main.command("timeline")
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
@click.option("--quiet", "-q", is_flag=True, help="No progress messages.")
def timeline_cmd(
    client: str,
    host: str,
    first: str,
    last: str,
    baseline: str | None,
    fmt: str,
    svg: str | None,
    quiet: bool,
) -> None:
    """Scan CLIENT against every HOST release in a range: where each drift first appears."""
    import json

    from driftcheck.report.timeline import render_timeline
    from driftcheck.timeline import timeline

    progress = None if quiet or not sys.stderr.isatty() else (lambda m: click.echo(m, err=True))
    result = timeline(client, host, first, last, baseline=baseline, progress=progress)
    if fmt == "json":
        click.echo(json.dumps(result.to_dict(), indent=2))
    else:
        render_timeline(result, sys.stdout, svg=svg)
    sys.exit(0)


@main.group("cache")
def cache_group() -> None:
    """Where driftcheck keeps fetched releases, host API snapshots and environments."""


@cache_group.command("path")
def cache_path() -> None:
    """Print the cache folder ($DRIFTCHECK_CACHE_DIR or the platform's user cache)."""
    from driftcheck.cache import cache_root

    click.echo(str(cache_root()))


@cache_group.command("list")
@click.option("--all", "show_all", is_flag=True, help="List every entry of large kinds too.")
def cache_list(show_all: bool) -> None:
    """One line per cached entry: kind, size, name; then the total.

    A kind with many entries (the per-file uses cache) is summed up in one line unless --all.
    """
    from itertools import groupby

    from driftcheck.cache import cache_entries

    entries = cache_entries()
    width = max((len(e.kind) for e in entries), default=0)
    for kind, group in groupby(entries, key=lambda e: e.kind):
        items = list(group)
        if len(items) > 10 and not show_all:
            size = _size_text(sum(e.size for e in items))
            click.echo(f"{kind:<{width}}  {size:>9}  ({len(items)} entries; --all lists them)")
            continue
        for e in items:
            click.echo(f"{e.kind:<{width}}  {_size_text(e.size):>9}  {e.name}")
    total = sum(e.size for e in entries)
    click.echo(f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}, {_size_text(total)}")


@cache_group.command("clear")
@click.argument("kinds", nargs=-1, metavar="[KIND]...")
def cache_clear(kinds: tuple[str, ...]) -> None:
    """Remove everything cached, or only the given kinds (archives, envs, …).

    Everything in it can be fetched or built again.
    """
    from driftcheck.cache import clear_cache, clear_kinds

    freed = clear_kinds(list(kinds)) if kinds else clear_cache()
    click.echo(f"freed {_size_text(freed)}")


def _size_text(n: int) -> str:
    """Bytes for people: ``512 B``, ``97.4 kB``, ``8.5 GB``."""
    if n < 1000:
        return f"{n} B"
    size, unit = n / 1000, "kB"
    for bigger in ("MB", "GB", "TB"):
        if size < 1000:
            break
        size, unit = size / 1000, bigger
    return f"{size:.1f} {unit}"
