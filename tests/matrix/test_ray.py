"""The same matrix through a local Ray and through the process pool: the same rows and
findings (times and memory aside)."""

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
def test_ray_and_the_pool_store_the_same_rows(matrix: Matrix, tmp_path):
    need_module("ray")
    pool_db, ray_db = tmp_path / "pool.sqlite", tmp_path / "ray.sqlite"
    releases = ["1.0", "2.0", "3.0"]
    by_pool = run_matrix("tinyhost", releases, matrix.clients, db=pool_db, jobs=2)
    by_ray = run_matrix("tinyhost", releases, matrix.clients, db=ray_db, jobs=2, ray="auto")
    assert by_ray.backend == "ray:auto"
    assert (by_ray.pairs, by_ray.computed, by_ray.failed) == (by_pool.pairs, 6, 0)
    assert by_ray.snapshots_built_by_tasks == 0
    pool_rows, ray_rows = comparable(pool_db), comparable(ray_db)
    assert pool_rows == ray_rows
    assert {p["status"] for p in pool_rows[0]} == {"clean", "errors"}
    assert pool_rows[1]  # findings to compare, not two empty lists
