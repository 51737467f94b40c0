"""A small real matrix (2 vLLM clients x 2 vLLM releases) through the process pool and a local
Ray: each pair stores what ``scan`` reports for it, both back ends store the same rows, and the
report's page of that database works in a real browser."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from conftest import need_module
from test_page import _open, assert_heatmap_matches, browser  # noqa: F401 (a fixture)
from test_ray import comparable

from driftcheck.matrix import run_matrix
from driftcheck.matrix.page import render_html
from driftcheck.matrix.results import load_matrix
from driftcheck.matrix.store import read_findings, read_pairs
from driftcheck.pipeline import scan

pytestmark = [pytest.mark.network, pytest.mark.slow]

CLIENTS = ("speculators==0.3.0", "trl==0.19.0")
RELEASES = ["0.11.0", "0.16.0"]


@pytest.fixture(scope="module")
def real_matrix(tmp_path_factory) -> tuple[Path, Path]:
    """The clients file and the database the process pool wrote for it."""
    folder = tmp_path_factory.mktemp("real-matrix")
    listed = folder / "clients.txt"
    listed.write_text("# two vLLM clients\n" + "\n".join(CLIENTS) + "\n")
    pool_db = folder / "pool.sqlite"
    by_pool = run_matrix("vllm", RELEASES, listed, db=pool_db, jobs=2)
    assert (by_pool.pairs, by_pool.computed, by_pool.failed) == (4, 4, 0)
    assert by_pool.snapshots_built_by_tasks == 0
    return listed, pool_db


def test_a_real_matrix_through_the_pool_and_ray(real_matrix, tmp_path):
    need_module("ray")
    listed, pool_db = real_matrix
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
    ray_db = tmp_path / "ray.sqlite"
    by_ray = run_matrix("vllm", RELEASES, listed, db=ray_db, jobs=2, ray="auto")
    assert (by_ray.computed, by_ray.failed) == (4, 0)
    assert comparable(pool_db) == comparable(ray_db)


@pytest.mark.browser
def test_the_page_of_a_real_matrix_in_a_browser(real_matrix, browser, tmp_path):  # noqa: F811
    """The heatmap shows every pair the run stored; a click on a breaking cell lists its
    findings where they are (file:line) with their messages."""
    matrix = load_matrix(real_matrix[1])
    page, errors = _open(browser, tmp_path, render_html(matrix))
    assert_heatmap_matches(page, matrix)
    spec, release = next(
        (c.spec, r)
        for c in matrix.clients
        for r in matrix.releases
        if matrix.status(c.spec, r) == "errors"
    )
    client = next(c for c in matrix.clients if c.spec == spec)
    page.click(f'#heat button[aria-label^="{client.label} against vllm {release}"]')
    details = page.inner_text("#details")
    pair = matrix.pair(spec, release)
    assert pair is not None and pair.findings
    for row in pair.findings:
        assert f"{row.file}:{row.line}" in details
        assert row.message.splitlines()[0] in details
    assert errors == []
