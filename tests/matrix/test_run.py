"""``run_matrix`` through the process pool on a planted matrix (no network): rows, findings,
reuse, staleness, failures that stop nothing, resume after an interruption, and each release's
snapshot built once by the parent."""

from __future__ import annotations

import sqlite3

import pytest
from planted import Matrix, matrix_fixture  # noqa: F401  (the fixture)

from driftcheck.matrix import run_matrix
from driftcheck.matrix.store import read_findings, read_pairs


def _rows(db) -> dict[tuple[str, str], dict]:
    with sqlite3.connect(db) as conn:
        return {(p["client_spec"], p["release"]): p for p in read_pairs(conn)}


def test_every_pair_is_a_row_with_its_findings(matrix: Matrix, tmp_path):
    db = tmp_path / "m.sqlite"
    summary = run_matrix("tinyhost", ["1.0", "latest"], matrix.clients, db=db, jobs=2)
    assert summary.releases == ["1.0", "3.0"]
    assert (summary.pairs, summary.computed, summary.reused, summary.failed) == (4, 4, 0, 0)
    rows = _rows(db)
    assert set(rows) == {
        (c, r) for c in ("myclient==0.1", "./folderclient") for r in ("1.0", "3.0")
    }
    assert rows["myclient==0.1", "1.0"]["status"] == "clean"
    bad = rows["myclient==0.1", "3.0"]
    assert (bad["status"], bad["client"], bad["client_version"], bad["baseline"]) == (
        "errors",
        "myclient",
        "0.1",
        "1.0",
    )
    assert bad["errors"] >= 2 and bad["why"] is None and bad["tool_version"]
    assert rows["./folderclient", "3.0"]["client"] == "folderclient"
    assert rows["./folderclient", "3.0"]["client_version"] == "0.2"
    with sqlite3.connect(db) as conn:
        findings = read_findings(conn)
    symbols = {(f["client_spec"], f["release"], f["symbol"].rpartition(".")[2]) for f in findings}
    assert ("myclient==0.1", "3.0", "helper") in symbols
    assert ("myclient==0.1", "3.0", "make") in symbols
    assert not any(f["release"] == "1.0" for f in findings)
    counted = sum(p["errors"] + p["warnings"] + p["infos"] for p in rows.values())
    assert counted == len(findings)


def test_a_rerun_reuses_every_fresh_pair_and_recomputes_the_stale_ones(matrix: Matrix, tmp_path):
    db = tmp_path / "m.sqlite"
    run_matrix("tinyhost", ["1.0", "2.0"], matrix.clients, db=db, jobs=2)
    before = _rows(db)
    again = run_matrix("tinyhost", ["1.0", "2.0"], matrix.clients, db=db, jobs=2)
    assert (again.pairs, again.computed, again.reused) == (4, 0, 4)
    assert _rows(db) == before
    # The folder client changes: only its pairs are computed again, with the new findings.
    (matrix.folder / "folderclient" / "go.py").write_text(
        "from tinyhost.core import make\n\n\ndef go():\n    return make(1, b=3)\n"
    )
    changed = run_matrix("tinyhost", ["1.0", "2.0", "3.0"], matrix.clients, db=db, jobs=2)
    # its three pairs (two stale, one new) and myclient against the new release
    assert (changed.pairs, changed.computed, changed.reused) == (6, 4, 2)
    after = _rows(db)
    assert (
        after["./folderclient", "2.0"]["client_digest"]
        != before["./folderclient", "2.0"]["client_digest"]
    )
    assert before["./folderclient", "2.0"]["status"] == "clean"
    assert after["./folderclient", "2.0"]["status"] == "errors"
    assert after["myclient==0.1", "1.0"] == before["myclient==0.1", "1.0"]


def test_a_release_that_cannot_be_fetched_fails_its_pairs_only(matrix: Matrix, tmp_path):
    db = tmp_path / "m.sqlite"
    summary = run_matrix("tinyhost", ["1.0", "9.0"], matrix.clients, db=db, jobs=2)
    assert (summary.pairs, summary.computed, summary.failed) == (4, 4, 2)
    rows = _rows(db)
    for client in ("myclient==0.1", "./folderclient"):
        assert rows[client, "1.0"]["status"] == "clean"
        failed = rows[client, "9.0"]
        assert failed["status"] == "failed" and "tinyhost" in failed["why"]
        assert "\n" not in failed["why"]
    # A fetch failure is retried by the next run (it may have been the network).
    assert run_matrix("tinyhost", ["1.0", "9.0"], matrix.clients, db=db, jobs=2).computed == 2


def test_a_scan_that_raises_is_a_failed_pair_and_the_others_go_on(
    matrix: Matrix, tmp_path, monkeypatch
):
    import driftcheck.pipeline

    real = driftcheck.pipeline.scan

    def scan(client, *args, **kwargs):
        if "folderclient" in str(client) and kwargs.get("against", "").endswith("2.0"):
            raise KeyError("boom")
        return real(client, *args, **kwargs)

    monkeypatch.setattr(driftcheck.pipeline, "scan", scan)  # the pool's workers are forked
    db = tmp_path / "m.sqlite"
    summary = run_matrix("tinyhost", ["1.0", "2.0"], matrix.clients, db=db, jobs=2)
    assert (summary.computed, summary.failed) == (4, 1)
    failed = _rows(db)["./folderclient", "2.0"]
    assert failed["status"] == "failed"
    assert failed["why"] == "internal error: KeyError: 'boom'"
    assert _rows(db)["myclient==0.1", "2.0"]["status"] == "errors"


def test_a_worker_that_dies_fails_its_pair_without_hanging_the_run(
    matrix: Matrix, tmp_path, monkeypatch
):
    import os
    import signal

    import driftcheck.pipeline

    real = driftcheck.pipeline.scan

    def scan(client, *args, **kwargs):
        if "folderclient" in str(client) and kwargs.get("against", "").endswith("1.0"):
            os.kill(os.getpid(), signal.SIGKILL)
        return real(client, *args, **kwargs)

    monkeypatch.setattr(driftcheck.pipeline, "scan", scan)
    db = tmp_path / "m.sqlite"
    summary = run_matrix("tinyhost", ["1.0", "2.0", "3.0"], matrix.clients, db=db, jobs=2)
    assert (summary.pairs, summary.computed, summary.failed) == (6, 6, 1)
    rows = _rows(db)
    assert "worker process died" in rows["./folderclient", "1.0"]["why"]
    assert all(p["status"] != "failed" for k, p in rows.items() if k != ("./folderclient", "1.0"))


def test_an_interrupted_run_keeps_whole_pairs_and_resumes(matrix: Matrix, tmp_path):
    db = tmp_path / "m.sqlite"

    def stop(done: int, total: int, failed: int) -> None:
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_matrix("tinyhost", ["1.0", "2.0", "3.0"], matrix.clients, db=db, jobs=2, on_pair=stop)
    kept = _rows(db)
    assert len(kept) == 2
    with sqlite3.connect(db) as conn:
        findings = read_findings(conn)
    # Each stored pair has exactly its counted findings; no finding of a pair not stored.
    for (spec, release), row in kept.items():
        own = [f for f in findings if (f["client_spec"], f["release"]) == (spec, release)]
        assert len(own) == row["errors"] + row["warnings"] + row["infos"]
    assert {(f["client_spec"], f["release"]) for f in findings} <= set(kept)
    resumed = run_matrix("tinyhost", ["1.0", "2.0", "3.0"], matrix.clients, db=db, jobs=2)
    assert (resumed.pairs, resumed.computed, resumed.reused) == (6, 4, 2)


def test_the_parent_builds_each_snapshot_once_and_no_task_builds_one(matrix: Matrix, tmp_path):
    db = tmp_path / "m.sqlite"
    summary = run_matrix("tinyhost", ["2.0", "3.0"], matrix.clients, db=db, jobs=2)
    # The targets' snapshots were built by the parent (the baseline 1.0's too, not counted).
    assert summary.snapshots_built == ["2.0", "3.0"]
    assert summary.snapshots_built_by_tasks == 0
    # Two workers, each opening a release at most once: never once per task of four.
    assert summary.host_loads <= 4
    again = run_matrix("tinyhost", ["2.0", "3.0", "1.0"], matrix.clients, db=db, jobs=1)
    assert again.snapshots_built == []  # the baseline's snapshot was built in the first run
    assert again.computed == 2 and again.host_loads == 1


def test_the_measure_sees_a_task_that_builds_its_snapshot(matrix: Matrix):
    # Without the parent's plan, a task has to build the snapshot: the counter says so.
    from driftcheck.matrix.pool import run_in_pool
    from driftcheck.matrix.tasks import PairTask

    task = PairTask(
        "folderclient", "folderclient", "0.2", str(matrix.folder), "d", "tinyhost", "2.0", "k"
    )
    (outcome,) = run_in_pool([task], 1)
    assert outcome.row.pair["status"] == "clean"
    assert outcome.built_snapshot and outcome.loaded_host


def _reports_peak(task):
    """A runner that reports its worker's pid and, as its peak, the MiB the task's key says."""
    import os

    from driftcheck.matrix.store import PairRow
    from driftcheck.matrix.tasks import PairOutcome

    return PairOutcome(PairRow({"pid": os.getpid(), "peak_rss_mib": float(task.key)}))


def _peak_tasks(peaks: list[str]):
    from driftcheck.matrix.tasks import PairTask

    return [PairTask(f"c{i}", f"c{i}", "1", "x", "d", "h", "1.0", p) for i, p in enumerate(peaks)]


def test_a_worker_under_the_limit_keeps_taking_pairs():
    from driftcheck.matrix.pool import run_in_pool

    outcomes = list(run_in_pool(_peak_tasks(["50"] * 4), 1, runner=_reports_peak, recycle_mib=100))
    assert len({o.row.pair["pid"] for o in outcomes}) == 1


def test_a_worker_past_the_limit_is_replaced_after_its_pair():
    from driftcheck.matrix.pool import run_in_pool

    outcomes = list(
        run_in_pool(
            _peak_tasks(["50", "200", "50", "50"]), 1, runner=_reports_peak, recycle_mib=100
        )
    )
    pids = [o.row.pair["pid"] for o in outcomes]
    assert len(outcomes) == 4
    assert pids[0] == pids[1] and pids[1] != pids[2] and pids[2] == pids[3]
