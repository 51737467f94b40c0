"""Call protocols mined from host facts (filled in by the semantic-drift work)."""

from __future__ import annotations

from driftcheck.checks.context import CheckContext
from driftcheck.findings import Finding


def protocol_findings(ctx: CheckContext) -> list[Finding]:
    """Findings for host methods that gained a mandatory follow-up call."""
    return []
