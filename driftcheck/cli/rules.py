"""``driftcheck rules``: list and show the checks and rules driftcheck ships."""

from __future__ import annotations

import click

_RULES_OPTION = click.option(
    "--rules",
    "rule_dirs",
    multiple=True,
    type=click.Path(exists=True, file_okay=False),
    metavar="DIR",
    help="Also a folder of your own rules (repeat).",
)


@click.group()
def rules() -> None:
    """List and show the built-in checks and the rules (host knowledge kept as data)."""


@rules.command("list")
@click.option("--host", "host", metavar="NAME", help="Only rules for this host.")
@_RULES_OPTION
def rules_list(host: str | None, rule_dirs: tuple[str, ...]) -> None:
    """One line per check and per rule: id, what it is, host, versions, kind, severity, fix.

    Every id listed here is one that --disable accepts, as are the kinds.
    """
    from rich.console import Console
    from rich.table import Table

    from driftcheck.registry import CHECK_IDS
    from driftcheck.rules import load_rules

    table = Table("id", "source", "host", "versions", "kind", "severity", "fix", box=None)
    for check in CHECK_IDS.values():
        fixes = "/".join(check.fixes) or "-"
        table.add_row(check.id, "check", "any", "-", check.kind, check.severity, fixes)
    for rule in load_rules(*rule_dirs):
        if host and rule.host != host:
            continue
        fix = rule.fix.safety if rule.fix else "-"
        source = "binding rule" if rule.kind == "binding" else "rule"
        table.add_row(rule.id, source, rule.host, str(rule.versions), rule.kind, rule.severity, fix)
    Console(width=140).print(table)


@rules.command("show")
@click.argument("rule_id")
@_RULES_OPTION
def rules_show(rule_id: str, rule_dirs: tuple[str, ...]) -> None:
    """Everything about one check or rule (a rule's cases included)."""
    from driftcheck.errors import UsageError
    from driftcheck.registry import CHECK_IDS
    from driftcheck.rules import load_rules

    check = CHECK_IDS.get(rule_id)
    if check is not None:
        click.echo(f"{check.id}  (built-in check: {check.kind}, {check.severity}, any host)")
        fixes = ", ".join(check.fixes) or "none"
        codemods = f" (codemods: {', '.join(check.codemods)})" if check.codemods else ""
        click.echo(f"witness: {check.witness}; fixes: {fixes}{codemods}")
        click.echo(f"\n{check.doc}")
        return
    rule = load_rules(*rule_dirs).get(rule_id)
    if rule is None:
        raise UsageError(f"no check or rule {rule_id!r}; `driftcheck rules list` shows them")
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
