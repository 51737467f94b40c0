"""Findings: what driftcheck reports, as frozen data."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any, cast

from driftcheck.kinds import FixSafety, Kind, Severity


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

    safety: FixSafety
    description: str
    codemod: str | None = None
    params: tuple[tuple[str, str], ...] = ()


def _lists(value: object) -> object:
    """Tuples as lists, all the way down (what JSON reads back)."""
    if isinstance(value, dict):
        return {k: _lists(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_lists(v) for v in value]
    return value


@dataclass(frozen=True)
class Shape:
    """A call's arguments on one host release, as a witness binds them."""

    positional: int
    keywords: tuple[str, ...] = ()
    #: ``*args`` of unknown length, or ``**d`` whose keys are not all known.
    star: bool = False
    open_keywords: bool = False


@dataclass(frozen=True)
class Site:
    """The use a finding is about, as data a witness program can perform (no client code).

    Attributes:
        use: The use's kind (import, attribute, call, subclass, override, string-ref).
        symbol: The host's dotted name as the client reaches it.
        receiver: The host class of a typed receiver (``member`` is read off an instance).
        member: The member read off ``receiver``.
        target: The call's arguments on the target (None: not a call).
        baseline: The call's arguments on the baseline, where ``**d`` keys differ per side.
        params: An override's parameters: (name, kind, has_default), ``self`` first.
    """

    use: str
    symbol: str
    receiver: str | None = None
    member: str | None = None
    target: Shape | None = None
    baseline: Shape | None = None
    params: tuple[tuple[str, str, bool], ...] = ()
    #: What a rule says its witness is (``check``, ``field``, ...), when it says.
    declared: tuple[tuple[str, str], ...] = ()
    #: Attributes read after the name the client imported (``np.compat.os_fspath``: 2).
    reads: int = 0

    def to_dict(self) -> dict:
        """JSON form (read back by :meth:`from_dict`)."""
        data = cast(dict, _lists(asdict(self)))  # a dict's lists stay a dict
        return {k: v for k, v in data.items() if v not in (None, [], 0)}

    @classmethod
    def from_dict(cls, data: dict) -> Site:
        """The site of a saved report's finding."""

        def shape(raw: dict | None) -> Shape | None:
            if not raw:
                return None
            return Shape(
                positional=int(raw.get("positional", 0)),
                keywords=tuple(raw.get("keywords", ())),
                star=bool(raw.get("star", False)),
                open_keywords=bool(raw.get("open_keywords", False)),
            )

        return cls(
            use=str(data["use"]),
            symbol=str(data["symbol"]),
            receiver=data.get("receiver"),
            member=data.get("member"),
            target=shape(data.get("target")),
            baseline=shape(data.get("baseline")),
            params=tuple(tuple(p) for p in data.get("params", ())),
            declared=tuple((str(k), str(v)) for k, v in data.get("declared", ())),
            reads=int(data.get("reads", 0)),
        )


@dataclass(frozen=True)
class Verification:
    """What a witness program showed on the real host releases.

    Attributes:
        status: ``confirmed`` (the use fails on the target as reported), ``refuted`` (it
            works there) or ``unverifiable`` (no witness can show it without the workload,
            or its environment could not tell).
        reason: One line: what the witness did and saw, or why it could not.
        target: The witness's output on the target.
        baseline: Its output on the baseline ("" without one).
    """

    status: str
    reason: str
    target: str = ""
    baseline: str = ""

    def to_dict(self) -> dict:
        """JSON form."""
        return {k: v for k, v in asdict(self).items() if v}


@dataclass(frozen=True)
class Finding:
    """One drift at one client location."""

    rule: str
    kind: Kind
    severity: Severity
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
    #: The use as data, for witnesses (None: a finding about several uses, or from a report
    #: written before sites existed).
    site: Site | None = field(default=None, compare=False)
    #: Set by ``--verify``.
    verification: Verification | None = field(default=None, compare=False)

    @property
    def refuted(self) -> bool:
        """A witness showed the use works on the target: not counted in the exit code."""
        return self.verification is not None and self.verification.status == "refuted"

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
        data: dict[str, Any] = {
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
        if self.site is not None:
            data["site"] = self.site.to_dict()
        if self.verification is not None:
            data["verified"] = self.verification.status
            data["witness"] = self.verification.to_dict()
        for ev in data["evidence"]:
            if not ev["note"]:
                del ev["note"]
        return data


def finding_from_dict(data: dict) -> Finding:
    """A finding read back from a JSON report (:meth:`Finding.to_dict`).

    Raises:
        KeyError, TypeError, ValueError: The entry is not a finding.
    """
    fix = data.get("fix")
    return Finding(
        rule=str(data["rule"]),
        kind=Kind(data["kind"]),
        severity=Severity(data["severity"]),
        file=str(data["file"]),
        line=int(data["line"]),
        column=int(data["column"]),
        symbol=str(data["symbol"]),
        message=str(data["message"]),
        evidence=tuple(
            Evidence(str(e["version"]), str(e["file"]), int(e["line"]), str(e.get("note", "")))
            for e in data.get("evidence", [])
        ),
        fix=Fix(FixSafety(fix["safety"]), str(fix["description"])) if fix else None,
        first_breaking=data.get("first_breaking"),
        references=tuple(data.get("references", [])),
        end_line=int(data.get("end_line", 0)),
        end_column=int(data.get("end_column", 0)),
        site=Site.from_dict(data["site"]) if data.get("site") else None,
    )


def severity_rank(severity: str) -> int:
    """Order of severities (info < warning < error)."""
    order = list(Severity)
    return order.index(Severity(severity)) if severity in order else 0
