"""The local back end: the pair tasks in a ``concurrent.futures`` process pool.

At most ``jobs`` tasks are in flight, so when a worker dies (killed, out of memory) the pool's
break touches only those: each is then run again alone in a fresh pool, and the one that kills
its own worker again is recorded as failed. The run never hangs on a dead worker
(``ProcessPoolExecutor`` notices it) and never stops for one pair.

Workers are recycled: a process keeps what it has loaded (host releases, per-process memos),
and a large client leaves its peak behind, so once a finished pair reports a worker past
:data:`RECYCLE_MIB`, no new pair is handed to that pool; the pairs in flight finish and a fresh
pool of forked workers takes the rest (each reloads the releases it needs from their cached
snapshots, never rebuilding one). ``max_tasks_per_child`` would do it per worker, but it refuses
the fork start method and needs Python 3.11.
"""

from __future__ import annotations

import multiprocessing
import signal
from collections.abc import Callable, Generator, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from driftcheck.matrix.tasks import PairOutcome, PairTask, failed_row, now_utc, run_pair

Runner = Callable[[PairTask], PairOutcome]

#: A worker whose peak resident memory passed this (MiB) ends its pool once its pair is done.
RECYCLE_MIB = 1024.0


def _context() -> multiprocessing.context.BaseContext:
    """Fork where the platform has it (workers start at once, with the parent's imports),
    else the platform's default."""
    if "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()


def _ignore_interrupts() -> None:
    """A worker leaves Ctrl-C to the parent, which stops it (no traceback from each worker)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_in_pool(
    tasks: Iterable[PairTask],
    jobs: int,
    *,
    runner: Runner = run_pair,
    recycle_mib: float = RECYCLE_MIB,
) -> Iterator[PairOutcome]:
    """Run ``tasks`` in ``jobs`` worker processes, yielding each outcome as it finishes; a new
    pool takes over once a worker reports a peak past ``recycle_mib``."""
    queue = list(tasks)
    queue.reverse()  # pop() from the end keeps the given order
    suspects: list[PairTask] = []
    while queue:
        broken = yield from _drain(queue, jobs, runner, recycle_mib)
        suspects.extend(broken)
        # Each task that was in flight when a worker died, alone: only the killer fails.
        while suspects:
            task = suspects.pop(0)
            again = yield from _drain([task], 1, runner, recycle_mib)
            for dead in again:
                yield PairOutcome(
                    failed_row(
                        dead,
                        "the worker process died while scanning it (killed or out of memory)",
                        started=now_utc(),
                        seconds=0.0,
                        key="",
                    )  # fmt: skip
                )


def _drain(
    queue: list[PairTask], jobs: int, runner: Runner, recycle_mib: float
) -> Generator[PairOutcome, None, list[PairTask]]:
    """Run tasks from ``queue`` until it is empty, the pool breaks, or a worker has grown past
    ``recycle_mib`` (then the tasks in flight finish first); returns the tasks that were in
    flight when it broke (the queue keeps the ones not started)."""
    in_flight: dict[Future[PairOutcome], PairTask] = {}
    broken: list[PairTask] = []
    grown = dead = False
    pool = ProcessPoolExecutor(
        max_workers=max(1, jobs), mp_context=_context(), initializer=_ignore_interrupts
    )
    try:
        while queue or in_flight:
            while queue and len(in_flight) < jobs and not broken and not grown and not dead:
                task = queue.pop()
                try:
                    in_flight[pool.submit(runner, task)] = task
                except BrokenProcessPool:
                    # A worker died since the last wait, before its future said so: this task
                    # never started (it waits for the next pool); the dead one's future, in
                    # flight, says so at the next wait.
                    queue.append(task)
                    dead = True
            if not in_flight:
                break
            done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
            for future in done:
                task = in_flight.pop(future)
                try:
                    outcome = future.result()
                except BrokenProcessPool:
                    broken.append(task)
                    continue
                peak = outcome.row.pair.get("peak_rss_mib")
                grown = grown or (isinstance(peak, int | float) and peak > recycle_mib)
                yield outcome
            if broken:
                # Everything still in flight broke with the pool.
                for future in list(in_flight):
                    broken.append(in_flight.pop(future))
                    future.cancel()
                break
    finally:
        if in_flight and not broken:
            # Interrupted (the caller stopped reading, Ctrl-C): stop the scans in progress
            # rather than wait for them; their pairs are simply not written.
            for process in list(getattr(pool, "_processes", {}).values()):
                process.terminate()
        pool.shutdown(wait=not in_flight, cancel_futures=True)
    return broken
