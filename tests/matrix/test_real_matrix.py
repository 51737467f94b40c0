"""A small real matrix (2 vLLM clients x 2 vLLM releases) through the process pool and a local
Ray: each pair stores what ``scan`` reports for it, and both back ends store the same rows."""

from __future__ import annotations

import sqlite3

import pytest
from conftest import need_module
from test_ray import comparable

from driftcheck.matrix import run_matrix
from driftcheck.matrix.store import read_findings, read_pairs
from driftcheck.pipeline import scan

CLIENTS = ("speculators==0.3.0", "trl==0.19.0")
RELEASES = ["0.11.0", "0.16.0"]


@pytest.mark.network
@pytest.mark.slow
def test_a_real_matrix_through_the_pool_and_ray(tmp_path):
    need_module("ray")
    listed = tmp_path / "clients.txt"
    listed.write_text("# two vLLM clients\n" + "\n".join(CLIENTS) + "\n")
    pool_db, ray_db = tmp_path / "pool.sqlite", tmp_path / "ray.sqlite"
    by_pool = run_matrix("vllm", RELEASES, listed, db=pool_db, jobs=2)
    assert (by_pool.pairs, by_pool.computed, by_pool.failed) == (4, 4, 0)
    assert by_pool.snapshots_built_by_tasks == 0
    with sqlite3.connect(pool_db) as conn:
        pairs = {(p["client_spec"], p["release"]): p for p in read_pairs(conn)}
        findings = read_findings(conn)
    for client in CLIENTS:
        for release in RELEASES:
            expected = scan(client, against=f"vllm=={release}")
            row = pairs[client, release]
            assert row["baseline"] == expected.baseline
            stored = sorted(
                f["fingerprint"]
                for f in findings
                if (f["client_spec"], f["release"]) == (client, release)
            )
            assert stored == sorted(f.fingerprint for f in expected.findings), (client, release)
            assert row["errors"] == sum(f.severity == "error" for f in expected.findings)
    assert any(p["status"] == "errors" for p in pairs.values())
    again = run_matrix("vllm", RELEASES, listed, db=pool_db, jobs=2)
    assert (again.computed, again.reused) == (0, 4)
    by_ray = run_matrix("vllm", RELEASES, listed, db=ray_db, jobs=2, ray="auto")
    assert (by_ray.computed, by_ray.failed) == (4, 0)
    assert comparable(pool_db) == comparable(ray_db)
