"""Accepted drift: findings a team has looked at and decided to live with, each with a reason.

``driftcheck scan … --write-baseline .driftcheck-accepted.toml`` records the current findings;
later scans report only findings not recorded there and warn about recorded entries that no
longer occur (stale). Entries are matched by :attr:`Finding.fingerprint` (rule, file, host symbol
and the code of the line), so an edit elsewhere in the file that shifts line numbers keeps them
matched, while a change to the line itself makes the finding new again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from driftcheck.config import read_toml
from driftcheck.errors import UsageError
from driftcheck.findings import Finding

#: The file a directory client's scan reads by default, in its project folder.
DEFAULT_NAME = ".driftcheck-accepted.toml"
FORMAT_VERSION = 1
_FIELDS = ("fingerprint", "rule", "file", "symbol", "message", "reason")


@dataclass(frozen=True)
class Accepted:
    """One accepted finding, as recorded."""

    fingerprint: str
    rule: str = ""
    file: str = ""
    symbol: str = ""
    message: str = ""
    reason: str = ""

    def to_dict(self) -> dict[str, str]:
        """JSON-ready form."""
        return {name: getattr(self, name) for name in _FIELDS}


@dataclass
class Triage:
    """A scan's findings split by an accepted-drift file."""

    path: Path | None
    reported: list[Finding]
    accepted: list[tuple[Finding, Accepted]] = field(default_factory=list)
    stale: list[Accepted] = field(default_factory=list)


def load_accepted(path: Path) -> list[Accepted]:
    """Read an accepted-drift file.

    Raises:
        UsageError: The file cannot be read, is not TOML, or an entry lacks its fingerprint.
    """
    data = read_toml(path)
    unknown = set(data) - {"version", "accepted"}
    if unknown:
        raise UsageError(f"{path}: unknown key {sorted(unknown)[0]!r}")
    entries = data.get("accepted", [])
    if not isinstance(entries, list):
        raise UsageError(f"{path}: 'accepted' must be an array of tables ([[accepted]])")
    out = []
    for i, entry in enumerate(entries, start=1):
        if not isinstance(entry, dict) or not isinstance(entry.get("fingerprint"), str):
            raise UsageError(f"{path}: accepted entry {i} needs a fingerprint")
        bad = set(entry) - set(_FIELDS)
        if bad:
            raise UsageError(f"{path}: accepted entry {i}: unknown key {sorted(bad)[0]!r}")
        out.append(Accepted(**{k: str(v) for k, v in entry.items()}))
    return out


def triage(
    findings: list[Finding],
    entries: list[Accepted],
    path: Path | None = None,
    *,
    disabled: set[str] | frozenset[str] = frozenset(),
    kinds: dict[str, str] | None = None,
) -> Triage:
    """Split findings into reported and accepted, and find the stale entries.

    An entry of a disabled id, or of an id whose kind is disabled (``kinds``: id -> kind), is
    not stale: the scan could not see its finding.
    """
    by_print = {e.fingerprint: e for e in entries}
    result = Triage(path=path, reported=[])
    seen: set[str] = set()
    for f in findings:
        entry = by_print.get(f.fingerprint)
        if entry is None:
            result.reported.append(f)
        else:
            result.accepted.append((f, entry))
            seen.add(f.fingerprint)
    kinds = kinds or {}
    result.stale = [
        e
        for e in entries
        if e.fingerprint not in seen
        and e.rule not in disabled
        and kinds.get(e.rule) not in disabled
    ]
    return result


def entries_for(findings: list[Finding], previous: Sequence[Accepted] = ()) -> list[Accepted]:
    """One entry per distinct fingerprint; reasons already written for it are kept."""
    reasons = {e.fingerprint: e.reason for e in previous}
    out: dict[str, Accepted] = {}
    for f in findings:
        out.setdefault(
            f.fingerprint,
            Accepted(
                fingerprint=f.fingerprint,
                rule=f.rule,
                file=f.file,
                symbol=f.symbol,
                message=f.message,
                reason=reasons.get(f.fingerprint, ""),
            ),
        )
    return list(out.values())


def render_accepted(entries: list[Accepted], *, header: str = "") -> str:
    """The file's text: a comment that says how to use it, then one ``[[accepted]]`` per entry."""
    lines = [
        "# Drift accepted by this project: driftcheck does not report these findings.",
        "# Give each one a reason; delete an entry once its drift is fixed (driftcheck warns",
        "# about entries that no longer occur).",
    ]
    if header:
        lines.append(f"# {header}")
    lines += ["", f"version = {FORMAT_VERSION}"]
    for e in entries:
        lines += ["", "[[accepted]]"]
        lines += [f"{name} = {toml_string(getattr(e, name))}" for name in _FIELDS]
    return "\n".join(lines) + "\n"


def write_accepted(path: Path, findings: list[Finding], *, header: str = "") -> list[Accepted]:
    """Record ``findings`` in ``path`` (keeping the reasons of entries it already has)."""
    previous: list[Accepted] = []
    if path.is_file():
        try:
            previous = load_accepted(path)
        except UsageError:
            previous = []  # unreadable old file: rewrite it from scratch
    entries = entries_for(findings, previous)
    path.write_text(render_accepted(entries, header=header), encoding="utf-8")
    return entries


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f"}
_ESCAPES["\r"] = "\\r"


def toml_string(text: str) -> str:
    """A TOML basic string (control characters escaped, everything else kept as is)."""
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        elif 0xD800 <= ord(ch) <= 0xDFFF:
            out.append("\\ufffd")  # a lone surrogate (undecodable byte) has no TOML form
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'
