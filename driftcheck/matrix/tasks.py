"""One pair's task: a client scanned against one host release, in a worker.

The same function runs in the process pool and as a Ray task. It reads the host's snapshot
that the parent built before dispatching (:mod:`driftcheck.matrix.plan`), never builds one
itself in a normal run (``built_snapshot`` says when it had to), and keeps at most a few
releases loaded in its process, so a worker's memory does not grow with the matrix.
"""

from __future__ import annotations

import hashlib
import resource
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata

from driftcheck.errors import DriftcheckError
from driftcheck.findings import Finding
from driftcheck.host.load import release_host
from driftcheck.matrix.store import PairRow
from driftcheck.sources.specs import PackageSpec

#: Host releases a worker keeps loaded (a target and its baseline, and the next target).
KEEP_LOADED = 3


@dataclass(frozen=True)
class PairTask:
    """What a worker needs to scan one pair (plain data: pickled to processes and Ray)."""

    client_spec: str
    client: str
    client_version: str | None
    #: What ``scan`` reads: ``name==version`` or the folder's absolute path.
    scan_target: str
    client_digest: str
    host: str
    release: str
    key: str


@dataclass
class PairOutcome:
    """A finished pair: its database row, and what the worker measured."""

    row: PairRow
    #: The worker had to build the target's snapshot itself (it should find it built).
    built_snapshot: bool = False
    #: The worker loaded the target release (it was not loaded in its process yet).
    loaded_host: bool = False
    extra: dict[str, object] = field(default_factory=dict)


def pair_key(client_digest: str, host: str, release: str, rules_digest: str, code: str) -> str:
    """The staleness key of a pair: a stored pair with another key is computed again."""
    text = "\0".join((client_digest, host, release, rules_digest, code))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def tool_version() -> str:
    """driftcheck's version (the database's ``tool_version``)."""
    try:
        return metadata.version("driftcheck")
    except metadata.PackageNotFoundError:
        return "0"


def now_utc() -> str:
    """The current time, ISO 8601 in UTC."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def peak_rss_mib() -> float | None:
    """This process's peak resident memory so far, in MiB (None where it cannot be read)."""
    try:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    except (OSError, ValueError):
        return None
    return round(peak / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)


def failed_row(task: PairTask, why: str, *, started: str, seconds: float, key: str) -> PairRow:
    """The row of a pair that did not scan (``key``: ``""`` to retry it on the next run)."""
    return PairRow(
        {
            **_ident(task),
            "key": key,
            "baseline": None,
            "status": "failed",
            "why": " ".join(why.split())[:500] or "unknown error",
            "errors": 0,
            "warnings": 0,
            "infos": 0,
            "started_at": started,
            "seconds": round(seconds, 3),
            "peak_rss_mib": peak_rss_mib(),
            "tool_version": tool_version(),
        }
    )


def _ident(task: PairTask) -> dict[str, object]:
    return {
        "client_spec": task.client_spec,
        "client": task.client,
        "client_version": task.client_version,
        "client_digest": task.client_digest,
        "host": task.host,
        "release": task.release,
    }


#: Release specs loaded in this process, most recent first.
_LOADED: list[str] = []


def _keep(*specs: str) -> None:
    """Mark ``specs`` as just used; forget the releases used least recently."""
    for spec in reversed(specs):
        if spec in _LOADED:
            _LOADED.remove(spec)
        _LOADED.insert(0, spec)
    while len(_LOADED) > KEEP_LOADED:
        name, _, version = _LOADED.pop().partition("==")
        release_host(PackageSpec(kind="release", name=name, version=version))


def run_shipped(task: PairTask, *bundles: dict[str, bytes]) -> PairOutcome:
    """:func:`run_pair` on a node that may not have the releases: the bundles the parent
    shipped (:mod:`driftcheck.matrix.ship`) are written into its cache first."""
    from driftcheck.matrix.ship import unpack

    try:
        unpack(*bundles)
    except OSError as exc:
        why = f"cannot write the shipped releases into this node's cache: {exc}"
        return PairOutcome(failed_row(task, why, started=now_utc(), seconds=0.0, key=""))
    return run_pair(task)


def run_pair(task: PairTask) -> PairOutcome:
    """Scan one pair; any failure becomes a ``failed`` row with a one-line why."""
    from driftcheck.host.snapshot import snapshot_path
    from driftcheck.pipeline import scan
    from driftcheck.sources.fetch import cached_sha256

    started, t0 = now_utc(), time.perf_counter()
    target = f"{task.host}=={task.release}"
    loaded = target not in _LOADED
    sha = cached_sha256(task.host, task.release)
    built = loaded and (sha is None or not snapshot_path(task.host, task.release, sha).exists())
    why: str | None = None
    try:
        result = scan(task.scan_target, against=target, host=task.host)
    except DriftcheckError as exc:
        # The key is kept: the same inputs fail the same way (a new release or code retries).
        why = str(exc)
    except Exception as exc:  # a bug in driftcheck on this pair: recorded, the others go on
        why = f"internal error: {type(exc).__name__}: {exc}"
    seconds = time.perf_counter() - t0
    if why is not None:
        _keep(target)
        row = failed_row(task, why, started=started, seconds=seconds, key=task.key)
        return PairOutcome(row, built, loaded)
    _keep(target, *([f"{task.host}=={result.baseline}"] if result.baseline else []))
    counts = {s: sum(1 for f in result.findings if f.severity == s) for s in _SEVERITIES}
    status = "errors" if counts["error"] else "warnings" if counts["warning"] else "clean"
    pair = {
        **_ident(task),
        "baseline": result.baseline,
        "key": task.key,
        "status": status,
        "why": None,
        "errors": counts["error"],
        "warnings": counts["warning"],
        "infos": counts["info"],
        "started_at": started,
        "seconds": round(seconds, 3),
        "peak_rss_mib": peak_rss_mib(),
        "tool_version": tool_version(),
    }
    rows = [_finding_row(task, f) for f in result.findings]
    return PairOutcome(PairRow(pair, rows), built, loaded)


_SEVERITIES = ("error", "warning", "info")


def _finding_row(task: PairTask, f: Finding) -> dict[str, object]:
    return {
        "client_spec": task.client_spec,
        "host": task.host,
        "release": task.release,
        "fingerprint": f.fingerprint,
        "rule": f.rule,
        "kind": str(f.kind),
        "severity": str(f.severity),
        "file": f.file,
        "line": f.line,
        "symbol": f.symbol,
        "message": f.message,
        "fix": f.fix.description if f.fix else None,
        "fix_safety": str(f.fix.safety) if f.fix else None,
        "first_breaking": f.first_breaking,
    }
