"""``run_matrix``: every client against every host release, into the matrix database.

The parent plans (:mod:`driftcheck.matrix.plan`: releases resolved, clients fetched, each
release's snapshot built once), keeps the pairs whose stored key still matches, and hands the
others to a back end (the process pool, or Ray); each finished pair is committed at once, so an
interrupted run resumes where it stopped.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from driftcheck.matrix.clients import read_clients
from driftcheck.matrix.plan import make_plan, resolve_releases
from driftcheck.matrix.store import open_db, stored_keys, write_pair
from driftcheck.matrix.tasks import PairOutcome, PairTask, failed_row, now_utc
from driftcheck.rules.ruleset import RuleSet, load_rules


@dataclass
class MatrixSummary:
    """What one ``run_matrix`` did."""

    host: str
    releases: list[str]
    clients: int
    db: str
    pairs: int = 0
    computed: int = 0
    reused: int = 0
    failed: int = 0
    seconds: float = 0.0
    backend: str = "pool"
    #: Counts of the computed pairs by status (clean, warnings, errors, failed).
    statuses: dict[str, int] = field(default_factory=dict)
    #: Releases whose snapshot the parent built in this run (the others were cached).
    snapshots_built: list[str] = field(default_factory=list)
    #: Tasks that found their release's snapshot missing and built it (0 when planned right).
    snapshots_built_by_tasks: int = 0
    #: Tasks that opened their release in their process (the others found it loaded there).
    host_loads: int = 0

    def to_dict(self) -> dict[str, object]:
        """JSON form (``--format json``)."""
        rate = self.computed / self.seconds * 60 if self.seconds > 0 else 0.0
        return {
            "pairs": self.pairs,
            "computed": self.computed,
            "reused": self.reused,
            "failed": self.failed,
            "host": self.host,
            "releases": self.releases,
            "clients": self.clients,
            "db": self.db,
            "backend": self.backend,
            "statuses": dict(sorted(self.statuses.items())),
            "seconds": round(self.seconds, 2),
            "pairs_per_minute": round(rate, 1),
            "snapshots_built": self.snapshots_built,
            "snapshots_built_by_tasks": self.snapshots_built_by_tasks,
            "host_loads": self.host_loads,
        }


#: Called after each computed pair: (pairs done, pairs to compute, failed so far).
OnPair = Callable[[int, int, int], None]


def run_matrix(
    host: str,
    releases: Iterable[str],
    clients: Path,
    *,
    db: Path = Path("matrix.sqlite"),
    jobs: int | None = None,
    ray: str | None = None,
    ship: bool | None = None,
    rules: RuleSet | None = None,
    say: Callable[[str], None] | None = None,
    on_pair: OnPair | None = None,
) -> MatrixSummary:
    """Scan every client of the ``clients`` file against every host release; store each pair.

    Args:
        host: The host's distribution name.
        releases: Versions, ``latest`` or ``FIRST..LAST`` ranges.
        clients: The clients file (one per line: ``name==version``, ``name``, a folder).
        db: The SQLite database (created if needed; pairs already there and not stale are kept).
        jobs: Worker processes (default: the number of cores); with ``ray="auto"``, its CPUs.
        ray: None for the local process pool; ``"auto"`` for a local Ray; else a Ray address.
        ship: With Ray, send each release the tasks read (archive and host snapshot) through
            Ray's object store into the nodes' own caches; default: for a cluster address, not
            for ``auto`` (a local Ray reads this machine's cache).
        rules: The rules; default: the built-in rules.
        say: Callback receiving short progress messages (planning).
        on_pair: Callback after each computed pair (the progress bar).

    Raises:
        UsageError: A bad clients file, release, database, or Ray missing for ``ray``.
    """
    t0 = time.perf_counter()
    jobs = jobs or os.cpu_count() or 1
    if ray is not None:
        from driftcheck.matrix.ray_runner import check_ray

        check_ray()  # a missing Ray is said before any work
    lines = read_clients(clients)
    rules = load_rules() if rules is None else rules
    wanted = resolve_releases(host, releases)
    conn = open_db(db)
    try:
        plan = make_plan(host, wanted, lines, rules, say=say)
        summary = MatrixSummary(
            host, wanted, len(lines), str(db), backend="pool" if ray is None else f"ray:{ray}"
        )
        summary.snapshots_built = plan.snapshots_built
        summary.pairs = len(plan.tasks)
        stored = stored_keys(conn, host)
        todo: list[PairTask] = []
        unprepared: list[tuple[PairTask, str]] = []
        for task in plan.tasks:
            ident = (task.client_spec, task.release)
            why = plan.unprepared.get(ident)
            if why is not None:
                unprepared.append((task, why))
            elif stored.get(ident) == task.key:
                summary.reused += 1
            else:
                todo.append(task)
        if on_pair is not None:
            on_pair(0, len(todo) + len(unprepared), 0)
        for task, why in unprepared:
            row = failed_row(task, why, started=now_utc(), seconds=0.0, key="")
            write_pair(conn, row)
            _count(summary, row.pair, on_pair)
        # Release by release: a worker keeps the release it has loaded for the next task.
        todo.sort(key=lambda t: (_order(wanted, t.release), t.client_spec))
        shipping = None
        if ray is not None and (ship if ship is not None else ray != "auto"):
            shipping = {c.line.spec: c.needs(host) for c in plan.clients}
        for outcome in _backend(todo, jobs, ray, shipping):
            write_pair(conn, outcome.row)
            summary.snapshots_built_by_tasks += outcome.built_snapshot
            summary.host_loads += outcome.loaded_host
            _count(summary, outcome.row.pair, on_pair)
    finally:
        conn.close()
    summary.seconds = time.perf_counter() - t0
    return summary


def _order(releases: list[str], release: str) -> int:
    return releases.index(release)


def _backend(
    tasks: list[PairTask], jobs: int, ray: str | None, ship: dict[str, list[tuple[str, str]]] | None
) -> Iterator[PairOutcome]:
    if not tasks:
        return iter(())
    if ray is not None:
        from driftcheck.matrix.ray_runner import run_on_ray

        return run_on_ray(tasks, ray, jobs=jobs if ray == "auto" else None, ship=ship)
    from driftcheck.matrix.pool import run_in_pool

    return run_in_pool(tasks, jobs)


def _count(summary: MatrixSummary, pair: dict[str, object], on_pair: OnPair | None) -> None:
    status = str(pair["status"])
    summary.computed += 1
    summary.failed += status == "failed"
    summary.statuses[status] = summary.statuses.get(status, 0) + 1
    if on_pair is not None:
        on_pair(summary.computed, summary.pairs - summary.reused, summary.failed)
