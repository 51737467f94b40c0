"""``driftcheck rules``: list and show the checks and rules driftcheck ships."""

from __future__ import annotations

import click


@click.group()
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
