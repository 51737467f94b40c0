"""A matrix database read back as a table: clients x releases (in version order) with each
pair's status, counts and findings, and each client's first breaking release.

The database is the one ``driftcheck matrix run`` writes (schema 1, docs/matrix.md); it is
opened read-only, so a report never changes it, even while a run is writing.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from packaging.version import InvalidVersion, Version

from driftcheck.errors import UsageError
from driftcheck.kinds import Severity

#: The schema version this reader understands (``meta`` row ``schema``).
SCHEMA = "1"

#: A pair's status: its worst finding's severity, or its scan failed.
Status = Literal["clean", "warnings", "errors", "failed"]

#: The statuses, best first; ``missing`` (not a status) is a pair the database does not hold.
STATUSES: tuple[Status, ...] = ("clean", "warnings", "errors", "failed")


@dataclass(frozen=True)
class Row:
    """One finding of a pair, as the database stores it."""

    fingerprint: str
    rule: str
    kind: str
    severity: Severity
    file: str
    line: int
    symbol: str
    message: str
    fix: str | None = None
    fix_safety: str | None = None
    first_breaking: str | None = None


@dataclass(frozen=True)
class Pair:
    """One client scanned against one host release."""

    client_spec: str
    release: str
    status: Status
    errors: int = 0
    warnings: int = 0
    infos: int = 0
    why: str | None = None
    baseline: str | None = None
    started_at: str = ""
    seconds: float = 0.0
    tool_version: str = ""
    findings: tuple[Row, ...] = ()

    def fingerprints(self) -> frozenset[str]:
        """The identities of its findings (stable across line shifts)."""
        return frozenset(r.fingerprint for r in self.findings)


@dataclass(frozen=True)
class Client:
    """A row of the matrix: a line of the clients file and what it resolved to."""

    spec: str
    name: str
    version: str | None

    @property
    def label(self) -> str:
        """``name version`` (a folder without a version: its spec)."""
        return f"{self.name} {self.version}" if self.version else self.spec


@dataclass(frozen=True)
class Matrix:
    """One host's pairs of a database: clients (by name, then version) x releases (in version
    order, never string order)."""

    host: str
    database: str
    clients: tuple[Client, ...]
    releases: tuple[str, ...]
    pairs: dict[tuple[str, str], Pair] = field(default_factory=dict)

    def pair(self, spec: str, release: str) -> Pair | None:
        """The pair of a client spec and a release (None: not in the database)."""
        return self.pairs.get((spec, release))

    def status(self, spec: str, release: str) -> str:
        """A pair's status, ``missing`` when the database does not hold it."""
        pair = self.pair(spec, release)
        return pair.status if pair else "missing"

    def first_breaking(self, spec: str) -> str | None:
        """The first release, in version order, whose status is ``errors`` (None: none)."""
        return next((r for r in self.releases if self.status(spec, r) == "errors"), None)

    def tool_versions(self) -> list[str]:
        """The driftcheck versions that computed the pairs."""
        return sorted({p.tool_version for p in self.pairs.values()}, key=version_key)

    def run_span(self) -> tuple[str, str]:
        """The first and the last scan's start (ISO 8601 UTC)."""
        starts = sorted(p.started_at for p in self.pairs.values())
        return (starts[0], starts[-1]) if starts else ("", "")

    def status_counts(self, spec: str | None = None) -> dict[str, int]:
        """How many pairs (of one client, or of all) have each status, ``missing`` included."""
        specs = [spec] if spec is not None else [c.spec for c in self.clients]
        counts = dict.fromkeys((*STATUSES, "missing"), 0)
        for s in specs:
            for release in self.releases:
                counts[self.status(s, release)] += 1
        return counts


def version_key(text: str) -> tuple[int, Version | str]:
    """Sort key of a release: by ``packaging.version`` order; one that is no version after all."""
    try:
        return (0, Version(text))
    except InvalidVersion:
        return (1, text)


def _status(text: str) -> Status:
    if text not in STATUSES:
        raise ValueError(f"unknown status {text!r}")
    return text


def _connect(path: Path) -> sqlite3.Connection:
    """The database opened read-only; one that is missing or no matrix database is refused."""
    if not path.is_file():
        raise UsageError(f"no matrix database at {path}")
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        db.row_factory = sqlite3.Row
        found = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        db.execute("SELECT 1 FROM pairs LIMIT 1").fetchall()
        db.execute("SELECT 1 FROM findings LIMIT 1").fetchall()
    except sqlite3.DatabaseError as exc:
        raise UsageError(f"{path} is not a driftcheck matrix database ({exc})") from None
    if found is None or found["value"] != SCHEMA:
        schema = "none" if found is None else found["value"]
        db.close()
        raise UsageError(f"{path} has matrix schema {schema}; this driftcheck reads {SCHEMA}")
    return db


def database_hosts(path: str | Path) -> list[str]:
    """The hosts a database holds pairs of."""
    db = _connect(Path(path))
    try:
        return [r["host"] for r in db.execute("SELECT DISTINCT host FROM pairs ORDER BY host")]
    finally:
        db.close()


def load_matrix(path: str | Path, host: str | None = None) -> Matrix:
    """Read one host's pairs and findings from a matrix database (``host`` may be omitted when
    the database holds one host only).

    Raises:
        UsageError: No such database, not a matrix database, no pairs, or an unknown or
            ambiguous host.
    """
    path = Path(path)
    db = _connect(path)
    try:
        hosts = [r["host"] for r in db.execute("SELECT DISTINCT host FROM pairs ORDER BY host")]
        if not hosts:
            raise UsageError(f"{path} holds no pairs yet")
        if host is None:
            if len(hosts) > 1:
                raise UsageError(f"{path} holds several hosts ({', '.join(hosts)}): pass --host")
            host = hosts[0]
        elif host not in hosts:
            raise UsageError(f"{path} holds no pairs of host {host!r} (it has {', '.join(hosts)})")
        rows: dict[tuple[str, str], list[Row]] = {}
        for r in db.execute(
            "SELECT client_spec, release, fingerprint, rule, kind, severity, file, line, symbol, "
            "message, fix, fix_safety, first_breaking FROM findings WHERE host = ? "
            "ORDER BY file, line, rule",
            (host,),
        ):
            rows.setdefault((r["client_spec"], r["release"]), []).append(
                Row(
                    fingerprint=r["fingerprint"],
                    rule=r["rule"],
                    kind=r["kind"],
                    severity=Severity(r["severity"]),
                    file=r["file"],
                    line=int(r["line"]),
                    symbol=r["symbol"],
                    message=r["message"],
                    fix=r["fix"],
                    fix_safety=r["fix_safety"],
                    first_breaking=r["first_breaking"],
                )
            )
        pairs: dict[tuple[str, str], Pair] = {}
        resolved: dict[str, tuple[tuple[int, Version | str], Client]] = {}
        for r in db.execute("SELECT * FROM pairs WHERE host = ?", (host,)):
            key = (r["client_spec"], r["release"])
            pairs[key] = Pair(
                client_spec=r["client_spec"],
                release=r["release"],
                status=_status(r["status"]),
                errors=int(r["errors"]),
                warnings=int(r["warnings"]),
                infos=int(r["infos"]),
                why=r["why"],
                baseline=r["baseline"],
                started_at=r["started_at"],
                seconds=float(r["seconds"]),
                tool_version=r["tool_version"],
                findings=tuple(rows.get(key, ())),
            )
            # A spec that resolved differently over time is named as it was for its newest release.
            client = Client(r["client_spec"], r["client"], r["client_version"])
            rank = version_key(r["release"])
            if r["client_spec"] not in resolved or resolved[r["client_spec"]][0] < rank:
                resolved[r["client_spec"]] = (rank, client)
    except (sqlite3.DatabaseError, ValueError) as exc:  # ValueError: a status or severity
        raise UsageError(f"{path} cannot be read as a matrix database ({exc})") from None
    finally:
        db.close()
    clients = sorted(
        (c for _, c in resolved.values()),
        key=lambda c: (c.name.lower(), version_key(c.version or ""), c.spec),
    )
    releases = sorted({release for _, release in pairs}, key=version_key)
    return Matrix(host, str(path), tuple(clients), tuple(releases), pairs)
