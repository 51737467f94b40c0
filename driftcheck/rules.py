"""Rules: host knowledge as data (``rules/<host>/<id>.toml``)."""

from __future__ import annotations

from driftcheck.checks.context import CheckContext
from driftcheck.findings import Finding


def binding_mixins(host: str) -> dict[str, str]:
    """Keyword → host class that the host mixes a client class named by that keyword into."""
    return {}


def apply_rules(findings: list[Finding], ctx: CheckContext) -> list[Finding]:
    """Add rule findings and merge them with mined ones."""
    return findings
