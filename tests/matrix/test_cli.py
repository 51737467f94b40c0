"""``driftcheck matrix run`` on the planted matrix: its JSON contract, its text line, and
its one-line errors."""

from __future__ import annotations

import json
import sys

from conftest import assert_one_error_line, run_cli
from planted import Matrix, matrix_fixture  # noqa: F401  (the fixture)


def _run(matrix: Matrix, db, *extra: str):
    return run_cli(
        "matrix", "run", "--host", "tinyhost", "--releases", "1.0,latest,3.0",
        "--clients", str(matrix.clients), "--db", str(db), "-j", "2", *extra,
    )  # fmt: skip


def test_json_says_pairs_computed_reused_failed(matrix: Matrix, tmp_path):
    db = tmp_path / "m.sqlite"
    first = _run(matrix, db, "--format", "json")
    assert first.exit_code == 0, first.stderr
    data = json.loads(first.stdout)
    assert {k: data[k] for k in ("pairs", "computed", "reused", "failed")} == {
        "pairs": 4, "computed": 4, "reused": 0, "failed": 0,
    }  # fmt: skip
    assert data["releases"] == ["1.0", "3.0"]  # latest is 3.0: each release once
    assert data["statuses"] == {"clean": 2, "errors": 2}
    assert data["snapshots_built_by_tasks"] == 0
    again = json.loads(_run(matrix, db, "--format", "json").stdout)
    assert (again["computed"], again["reused"]) == (0, 4)
    text = _run(matrix, db)
    assert text.exit_code == 0
    assert text.stdout.startswith("4 pairs (2 clients x 2 releases of tinyhost): 0 computed, 4")


def test_a_release_that_is_no_version_is_one_error_line(matrix: Matrix, tmp_path):
    result = run_cli(
        "matrix", "run", "--host", "tinyhost", "--releases", "1.0,newest",
        "--clients", str(matrix.clients), "--db", str(tmp_path / "m.sqlite"),
    )  # fmt: skip
    assert_one_error_line(result, "--releases: 'newest' is not a version")
    assert not (tmp_path / "m.sqlite").exists()


def test_ray_missing_says_what_to_install(matrix: Matrix, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # an import of it fails
    result = _run(matrix, tmp_path / "m.sqlite", "--ray", "auto")
    assert_one_error_line(result, "pip install 'driftcheck[ray]'")
    assert not (tmp_path / "m.sqlite").exists()


def test_a_database_of_another_kind_is_refused(matrix: Matrix, tmp_path):
    db = tmp_path / "m.sqlite"
    db.write_text("not a database at all, just text")
    assert_one_error_line(_run(matrix, db), "not a matrix database")
