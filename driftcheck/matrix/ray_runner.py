"""The distributed back end: the same pair task (:func:`driftcheck.matrix.tasks.run_pair`) as
Ray remote tasks, on a local Ray (``auto``) or a cluster (its address).

Ray schedules; driftcheck only submits the tasks and writes each result as it arrives. The
workers read the host snapshots and clients from the driftcheck cache: on one machine that is
the parent's cache; the nodes of a cluster need the same driftcheck and either the same cache
folder (``DRIFTCHECK_CACHE_DIR`` on a shared file system, passed on to the workers) or access
to the package index, from which each node fetches and snapshots a release once
(docs/matrix.md).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator
from types import ModuleType

from driftcheck.errors import UsageError
from driftcheck.matrix.store import PairRow
from driftcheck.matrix.tasks import (
    PairOutcome,
    PairTask,
    failed_row,
    now_utc,
    run_pair,
    run_shipped,
)

#: The object store of a local Ray (``auto``): tasks pass only small rows, so 256 MiB is
#: plenty, and a 2-core machine with little memory keeps it for the scans.
LOCAL_OBJECT_STORE = 256 * 1024 * 1024


MISSING = "--ray needs Ray: pip install 'driftcheck[ray]' (or pip install ray)"


def check_ray() -> None:
    """Say at once, before any work, when Ray is not installed (without importing it: that
    takes seconds).

    Raises:
        UsageError: Ray is not installed (one line saying what to install).
    """
    import importlib.util

    try:
        found = importlib.util.find_spec("ray") is not None
    except (ImportError, ValueError):  # ValueError: sys.modules["ray"] is None
        found = False
    if not found:
        raise UsageError(MISSING)


def import_ray() -> ModuleType:
    """The ``ray`` module.

    Raises:
        UsageError: Ray is not installed (one line saying what to install).
    """
    try:
        import ray
    except ImportError:
        raise UsageError(MISSING) from None
    return ray


def run_on_ray(
    tasks: Iterable[PairTask],
    address: str,
    *,
    jobs: int | None = None,
    ship: dict[str, list[tuple[str, str]]] | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[PairOutcome]:
    """Run ``tasks`` as Ray tasks (``address``: ``auto`` for a local Ray started here, else
    the cluster's address), yielding each outcome as it finishes.

    Args:
        ship: Client spec → the releases (name, version) its tasks need beside their target:
            each release is then put in the object store once and written into the cache of
            each node that runs one of its tasks (for nodes that share no cache); None: the
            nodes read the cache named by ``DRIFTCHECK_CACHE_DIR`` (or fetch).
        env: The workers' environment variables; default: ``DRIFTCHECK_CACHE_DIR`` if set.
    """
    ray = import_ray()
    if env is None:
        env = {k: os.environ[k] for k in ("DRIFTCHECK_CACHE_DIR",) if k in os.environ}
    options: dict[str, object] = {
        "runtime_env": {"env_vars": env} if env else None,
        "logging_level": logging.ERROR,
        "log_to_driver": False,
        "ignore_reinit_error": True,
    }
    if address == "auto":
        options.update(
            num_cpus=jobs or os.cpu_count() or 1,
            object_store_memory=LOCAL_OBJECT_STORE,
            include_dashboard=False,
        )
    else:
        options["address"] = address
    started_here = not ray.is_initialized()
    try:
        ray.init(**options)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise UsageError(f"--ray {address}: cannot connect to Ray: {exc}") from None
    try:
        pending = _submit(ray, list(tasks), ship)
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                task = pending.pop(ref)
                try:
                    yield ray.get(ref)
                except ray.exceptions.RayError as exc:
                    yield PairOutcome(_lost(task, exc))
    finally:
        if started_here:
            ray.shutdown()


def _submit(ray: ModuleType, tasks: list[PairTask], ship: dict | None) -> dict:
    """Submit every task; with ``ship``, each with the object refs of the releases it needs."""
    if ship is None:
        remote = ray.remote(num_cpus=1, max_retries=0)(run_pair)
        return {remote.remote(task): task for task in tasks}
    from driftcheck.matrix.ship import bundle

    shipped = ray.remote(num_cpus=1, max_retries=0)(run_shipped)
    refs: dict[tuple[str, str], object] = {}

    def ref(name: str, version: str) -> object:
        if (name, version) not in refs:
            refs[name, version] = ray.put(bundle(name, version))
        return refs[name, version]

    return {
        shipped.remote(
            task, ref(task.host, task.release), *(ref(*r) for r in ship.get(task.client_spec, []))
        ): task
        for task in tasks
    }


def _lost(task: PairTask, exc: Exception) -> PairRow:
    """The row of a pair whose Ray task did not return (its worker died, the node left)."""
    what = type(exc).__name__
    first = next((ln for ln in str(exc).splitlines() if ln.strip()), "")
    return failed_row(
        task, f"the Ray task did not return ({what}): {first}", started=now_utc(),
        seconds=0.0, key="",
    )  # fmt: skip
