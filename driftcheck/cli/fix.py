"""``driftcheck fix``: patches for a client's drift, written or applied."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, cast

import click

from driftcheck.cli.options import run_settings, scan_options

if TYPE_CHECKING:
    from driftcheck.findings import Finding, Fix
    from driftcheck.fixes.run import FixResult


@click.command()
@click.argument("client")
@scan_options
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
@click.option(
    "--verify",
    is_flag=True,
    help="Run the witnesses first: no fix for a refuted finding, none whose rewritten use "
    "fails on the target.",
)
@click.option(
    "--confirmed-by",
    "confirmed_by",
    multiple=True,
    type=click.Path(dir_okay=False, exists=True),
    metavar="REPORT.json",
    help="A probe JSON report (probe --fix --unsafe-fixes): the unsafe fixes its workload run "
    "confirmed on this exact --against release apply as safe.",
)
def fix(
    client: str,
    against: str | None,
    host: str | None,
    baseline: str | None,
    disable: list[str],
    exclude: tuple[str, ...],
    include: tuple[str, ...],
    config_path: str | None,
    rule_dirs: tuple[str, ...],
    mined_only: bool,
    model: str | None,
    out: str,
    apply_: bool,
    unsafe_fixes: bool,
    verify: bool,
    confirmed_by: tuple[str, ...],
) -> None:
    """Write patches for CLIENT's drift (or apply them with --apply).

    Settings come from [tool.driftcheck] as for scan. Exits 0 when nothing is left to do; 1
    when patches are pending, a file could not be rewritten, or error findings remain that no
    safe fix addresses (they are listed).
    """
    from driftcheck.fixes.run import fix as run_fix
    from driftcheck.report.locations import where

    settings = run_settings(click.get_current_context().params)
    settings.pop("config")
    done = run_fix(
        client,
        out=None if apply_ else out,
        apply=apply_,
        unsafe=unsafe_fixes,
        verify=verify,
        confirmed_by=confirmed_by,
        **settings,
    )
    for f in done.confirmed:
        click.echo(
            f"{where(done.scan, f.file, f.line)}: {f.rule}: unsafe fix treated as safe: {cast('Fix', f.fix).description}"
        )
    for c in done.unmatched:
        click.echo(
            f"{c.file}:{c.line}: {c.rule}: confirmed in {c.source}, but this scan has no such "
            "fix there (nothing applied for it)"
        )
    fix_plan = done.plan
    for line in _listing(done, out, apply_):
        click.echo(line)
    for file, reason in done.scan.skipped:
        click.echo(f"{file}: skipped, left untouched: {reason}")
    for rel in done.rewritten:
        click.echo(f"rewrote {rel}")
    for rel, why in done.refused:
        click.echo(f"refused {rel}: {why}", err=True)
    for path in done.removed:
        click.echo(f"removed {path} (an earlier run's)")
    for path in done.written:
        click.echo(f"wrote {path}")
    left = sorted(done.remaining, key=lambda f: (f.file, f.line))
    if left:
        click.echo(f"{len(left)} error finding(s) left without a fix applied; they need a person:")
        for f in left:
            click.echo(f"  {where(done.scan, f.file, f.line)}: {f.rule}: {f.symbol}")
    elif not fix_plan.pending:
        click.echo("No fixes needed.")
    sys.exit(done.exit_code)


def _listing(done: FixResult, out: str, apply_: bool) -> list[str]:
    """Every fix and finding of the plan in file order (by file, then line), each file's count
    first: applied (``--apply``) or written to the patch folder."""
    from driftcheck.report.locations import where

    rows: list[tuple[str, int, str]] = []
    refused = {rel for rel, _ in done.refused}
    heads = {}
    for ff in done.plan.files:
        applied = ff.applied if ff.changed else []
        if not apply_:
            verb = f"written to {out}"
        else:
            verb = "refused" if ff.file in refused else "applied"
        heads[ff.file] = f"{ff.file}: {len(applied)} fix(es) {verb}, {len(ff.declined)} declined"
        for f in applied:
            said = f"{f.rule} -> {_fix_text(f)} ({f.fix.safety if f.fix else 'manual'})"
            rows.append((f.file, f.line, said))
        rows += [(f.file, f.line, f"{f.rule}: not fixed: {why}") for f, why in ff.declined]
    for f in done.plan.skipped_unsafe:
        said = f"{f.rule}: unsafe fix skipped (use --unsafe-fixes): {_fix_text(f)}"
        rows.append((f.file, f.line, said))
    for f in done.plan.manual:
        rows.append((f.file, f.line, f"{f.rule}: manual: {_fix_text(f)}"))
    lines = []
    for file in sorted({r[0] for r in rows} | set(heads)):
        if file in heads:
            lines.append(heads[file])
        for _, line, text in sorted((r for r in rows if r[0] == file), key=lambda r: r[1]):
            lines.append(f"{where(done.scan, file, line)}: {text}")
    return lines


def _fix_text(f: Finding) -> str:
    """What a finding's fix does (its message where it has none)."""
    return f.fix.description if f.fix else f.message
