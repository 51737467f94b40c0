"""The same matrix through a local Ray and through the process pool: the same rows and
findings (times and memory aside), the Ray workers reading releases shipped into a cache of
their own (as the nodes of a cluster that share no folder)."""

from __future__ import annotations

import sqlite3

import pytest
from conftest import need_module
from planted import Matrix, matrix_fixture  # noqa: F401  (the fixture)

from driftcheck.matrix import run_matrix
from driftcheck.matrix.store import read_findings, read_pairs

#: Columns that differ from run to run (when and how long, the worker's memory).
MEASURED = {"started_at", "seconds", "peak_rss_mib"}


def comparable(db) -> tuple[list[dict], list[dict]]:
    """A database's pairs without the measured columns, and its findings, both sorted."""
    with sqlite3.connect(db) as conn:
        pairs = [{k: v for k, v in p.items() if k not in MEASURED} for p in read_pairs(conn)]
        findings = read_findings(conn)
    order = lambda row: sorted((k, str(v)) for k, v in row.items())  # noqa: E731
    return sorted(pairs, key=order), sorted(findings, key=order)


@pytest.mark.slow
def test_ray_and_the_pool_store_the_same_rows(matrix: Matrix, tmp_path, monkeypatch):
    need_module("ray")
    import functools
    import os

    from driftcheck.matrix import ray_runner

    pool_db, ray_db = tmp_path / "pool.sqlite", tmp_path / "ray.sqlite"
    releases = ["1.0", "2.0", "3.0"]
    by_pool = run_matrix("tinyhost", releases, matrix.clients, db=pool_db, jobs=2)
    # The Ray workers get an empty cache of their own and no index: all they read is shipped.
    node_cache = tmp_path / "node-cache"
    env = {k: v for k, v in os.environ.items() if k.startswith("PIP_")}
    env.update(DRIFTCHECK_CACHE_DIR=str(node_cache), DRIFTCHECK_NO_RANGED="1")
    run = functools.partial(ray_runner.run_on_ray, env=env)
    monkeypatch.setattr(ray_runner, "run_on_ray", run)
    by_ray = run_matrix(
        "tinyhost", releases, matrix.clients, db=ray_db, jobs=2, ray="auto", ship=True
    )
    assert by_ray.backend == "ray:auto"
    shipped = {p.name for p in (node_cache / "snapshots" / "tinyhost").glob("*.json")}
    assert len(shipped) == 3, shipped  # each target's snapshot, as the parent built it
    assert (by_ray.pairs, by_ray.computed, by_ray.failed) == (by_pool.pairs, 6, 0)
    assert by_ray.snapshots_built_by_tasks == 0
    pool_rows, ray_rows = comparable(pool_db), comparable(ray_db)
    assert pool_rows == ray_rows
    assert {p["status"] for p in pool_rows[0]} == {"clean", "errors"}
    assert pool_rows[1]  # findings to compare, not two empty lists
