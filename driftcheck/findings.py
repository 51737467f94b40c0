"""Findings: what driftcheck reports, as frozen data."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field

from driftcheck.registry import SEVERITIES


@dataclass(frozen=True)
class Evidence:
    """Where the host shows the change, in one version."""

    version: str
    file: str
    line: int
    note: str = ""


@dataclass(frozen=True)
class Fix:
    """A fix a codemod can apply (``safe``/``unsafe``) or a ``manual`` guideline."""

    safety: str
    description: str
    codemod: str | None = None
    params: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Finding:
    """One drift at one client location."""

    rule: str
    kind: str
    severity: str
    file: str
    line: int
    column: int
    symbol: str
    message: str
    evidence: tuple[Evidence, ...] = ()
    fix: Fix | None = None
    first_breaking: str | None = None
    references: tuple[str, ...] = ()
    end_line: int = 0
    #: 1-based column just past the offending token on ``end_line`` (0: not known).
    end_column: int = 0
    #: Where the use starts that a fix rewrites, when the finding points at one of its
    #: arguments instead (``None``: at ``line``, ``column``).
    anchor: tuple[int, int] | None = field(default=None, compare=False)
    context: str = field(default="", compare=False)

    @property
    def fix_at(self) -> tuple[int, int]:
        """(line, 1-based column) of the use a fix rewrites."""
        return self.anchor or (self.line, self.column)

    @property
    def fingerprint(self) -> str:
        """Stable identity across unrelated line shifts: rule, file, symbol and the line's code."""
        key = "\x00".join((self.rule, self.file, self.symbol, self.context.strip()))
        return hashlib.sha256(key.encode()).hexdigest()[:16]

    def to_dict(self) -> dict:
        """JSON-ready form (the documented contract plus extra fields)."""
        data = {
            "rule": self.rule,
            "kind": self.kind,
            "severity": self.severity,
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "end_line": max(self.end_line, self.line),
            "end_column": self.end_column,
            "symbol": self.symbol,
            "message": self.message,
            "evidence": [asdict(e) for e in self.evidence],
            "fix": None
            if self.fix is None
            else {"safety": self.fix.safety, "description": self.fix.description},
            "first_breaking": self.first_breaking,
            "references": list(self.references),
            "fingerprint": self.fingerprint,
        }
        for ev in data["evidence"]:
            if not ev["note"]:
                del ev["note"]
        return data


def severity_rank(severity: str) -> int:
    """Order of severities (info < warning < error)."""
    return SEVERITIES.index(severity) if severity in SEVERITIES else 0
