"""The matrix database (SQLite): one row per (client, host release) and its findings.

The schema is a contract shared with ``matrix report`` (docs/matrix.md). Each pair is written in
one transaction (its row and its findings together), so an interrupted run leaves only whole
pairs behind and the next run resumes from them.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from driftcheck.errors import UsageError

SCHEMA_VERSION = "1"

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

CREATE TABLE IF NOT EXISTS pairs (
  client_spec    TEXT NOT NULL,
  client         TEXT NOT NULL,
  client_version TEXT,
  client_digest  TEXT NOT NULL,
  host           TEXT NOT NULL,
  release        TEXT NOT NULL,
  baseline       TEXT,
  key            TEXT NOT NULL,
  status         TEXT NOT NULL,
  why            TEXT,
  errors         INTEGER NOT NULL DEFAULT 0,
  warnings       INTEGER NOT NULL DEFAULT 0,
  infos          INTEGER NOT NULL DEFAULT 0,
  started_at     TEXT NOT NULL,
  seconds        REAL NOT NULL,
  peak_rss_mib   REAL,
  tool_version   TEXT NOT NULL,
  PRIMARY KEY (client_spec, host, release)
);

CREATE TABLE IF NOT EXISTS findings (
  client_spec    TEXT NOT NULL,
  host           TEXT NOT NULL,
  release        TEXT NOT NULL,
  fingerprint    TEXT NOT NULL,
  rule           TEXT NOT NULL,
  kind           TEXT NOT NULL,
  severity       TEXT NOT NULL,
  file           TEXT NOT NULL,
  line           INTEGER NOT NULL,
  symbol         TEXT NOT NULL,
  message        TEXT NOT NULL,
  fix            TEXT,
  fix_safety     TEXT,
  first_breaking TEXT,
  FOREIGN KEY (client_spec, host, release) REFERENCES pairs (client_spec, host, release)
    ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS findings_pair ON findings (client_spec, host, release);
"""

#: The columns of ``pairs`` and ``findings``, in order (what a row dict holds).
PAIR_COLUMNS = (
    "client_spec", "client", "client_version", "client_digest", "host", "release", "baseline",
    "key", "status", "why", "errors", "warnings", "infos", "started_at", "seconds",
    "peak_rss_mib", "tool_version",
)  # fmt: skip
FINDING_COLUMNS = (
    "client_spec", "host", "release", "fingerprint", "rule", "kind", "severity", "file", "line",
    "symbol", "message", "fix", "fix_safety", "first_breaking",
)  # fmt: skip


@dataclass
class PairRow:
    """One pair's row and its findings' rows, as written to the database."""

    pair: dict[str, object]
    findings: list[dict[str, object]] = field(default_factory=list)


def open_db(path: Path) -> sqlite3.Connection:
    """Open (creating it if needed) the matrix database at ``path``.

    Raises:
        UsageError: The file is not a database of this schema or cannot be opened.
    """
    try:
        if path.parent and not path.parent.exists():
            raise UsageError(f"--db {path}: the folder {path.parent} does not exist")
        db = sqlite3.connect(str(path), timeout=30)
        db.execute("PRAGMA foreign_keys = ON")
        db.executescript(SCHEMA)
        found = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if found is None:
            db.execute("INSERT INTO meta (key, value) VALUES ('schema', ?)", (SCHEMA_VERSION,))
            db.commit()
        elif found[0] != SCHEMA_VERSION:
            db.close()
            raise UsageError(
                f"--db {path}: schema version {found[0]}, this driftcheck writes version "
                f"{SCHEMA_VERSION} (use another file)"
            )
    except sqlite3.DatabaseError as exc:
        raise UsageError(f"--db {path}: not a matrix database ({exc})") from None
    return db


def stored_keys(db: sqlite3.Connection, host: str) -> dict[tuple[str, str], str]:
    """(client_spec, release) → staleness key of every stored pair of ``host``."""
    rows = db.execute("SELECT client_spec, release, key FROM pairs WHERE host = ?", (host,))
    return {(spec, release): key for spec, release, key in rows}


def write_pair(db: sqlite3.Connection, row: PairRow) -> None:
    """Replace one pair (its row and findings) in one transaction."""
    pair = row.pair
    ident = (pair["client_spec"], pair["host"], pair["release"])
    with db:  # one transaction: committed whole, or rolled back
        db.execute("DELETE FROM findings WHERE client_spec = ? AND host = ? AND release = ?", ident)
        db.execute(
            f"INSERT OR REPLACE INTO pairs ({', '.join(PAIR_COLUMNS)}) "
            f"VALUES ({', '.join('?' * len(PAIR_COLUMNS))})",
            tuple(pair[c] for c in PAIR_COLUMNS),
        )
        db.executemany(
            f"INSERT INTO findings ({', '.join(FINDING_COLUMNS)}) "
            f"VALUES ({', '.join('?' * len(FINDING_COLUMNS))})",
            [tuple(f[c] for c in FINDING_COLUMNS) for f in row.findings],
        )


def read_pairs(db: sqlite3.Connection, host: str | None = None) -> list[dict[str, object]]:
    """Every stored pair (of ``host``) as a dict of its columns."""
    query = f"SELECT {', '.join(PAIR_COLUMNS)} FROM pairs"
    rows = db.execute(query + " WHERE host = ?", (host,)) if host else db.execute(query)
    return [dict(zip(PAIR_COLUMNS, r, strict=True)) for r in rows]


def read_findings(db: sqlite3.Connection, host: str | None = None) -> list[dict[str, object]]:
    """Every stored finding (of ``host``) as a dict of its columns."""
    query = f"SELECT {', '.join(FINDING_COLUMNS)} FROM findings"
    rows = db.execute(query + " WHERE host = ?", (host,)) if host else db.execute(query)
    return [dict(zip(FINDING_COLUMNS, r, strict=True)) for r in rows]
