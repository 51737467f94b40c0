"""``driftcheck fix``: patches for a client's drift, written or applied."""

from __future__ import annotations

import sys

import click


@click.command()
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
