"""``matrix report`` on databases written here row by row, per the schema of docs/matrix.md:
the table read back (version order, first breaking release), the text, JSON and Markdown
reports, ``--compare``, and the one-line errors of the command."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from driftcheck.cli import _Group
from driftcheck.cli.matrix_report import report
from driftcheck.errors import UsageError
from driftcheck.matrix.compare import compare_matrices
from driftcheck.matrix.report import render_json, render_markdown, render_text, report_data
from driftcheck.matrix.results import load_matrix

#: The schema of docs/matrix.md (version 1), as ``matrix run`` creates it.
SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pairs (
  client_spec TEXT NOT NULL, client TEXT NOT NULL, client_version TEXT,
  client_digest TEXT NOT NULL, host TEXT NOT NULL, release TEXT NOT NULL, baseline TEXT,
  key TEXT NOT NULL, status TEXT NOT NULL, why TEXT,
  errors INTEGER NOT NULL DEFAULT 0, warnings INTEGER NOT NULL DEFAULT 0,
  infos INTEGER NOT NULL DEFAULT 0, started_at TEXT NOT NULL, seconds REAL NOT NULL,
  peak_rss_mib REAL, tool_version TEXT NOT NULL,
  PRIMARY KEY (client_spec, host, release)
);
CREATE TABLE IF NOT EXISTS findings (
  client_spec TEXT NOT NULL, host TEXT NOT NULL, release TEXT NOT NULL,
  fingerprint TEXT NOT NULL, rule TEXT NOT NULL, kind TEXT NOT NULL, severity TEXT NOT NULL,
  file TEXT NOT NULL, line INTEGER NOT NULL, symbol TEXT NOT NULL, message TEXT NOT NULL,
  fix TEXT, fix_safety TEXT, first_breaking TEXT,
  FOREIGN KEY (client_spec, host, release) REFERENCES pairs (client_spec, host, release)
    ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS findings_pair ON findings (client_spec, host, release);
"""


def finding(
    file: str = "pkg/a.py",
    line: int = 1,
    *,
    rule: str = "call-signature",
    kind: str = "call-signature",
    severity: str = "error",
    symbol: str = "vllm.LLM.generate",
    message: str = "generate() no longer takes 'prompt_token_ids'",
    fix: str | None = None,
    fix_safety: str | None = None,
) -> dict:
    """A findings row; its fingerprint, as driftcheck's, ignores the line."""
    fingerprint = hashlib.sha256(f"{rule}\0{file}\0{symbol}\0{message}".encode()).hexdigest()[:16]
    return {
        "fingerprint": fingerprint,
        "rule": rule,
        "kind": kind,
        "severity": severity,
        "file": file,
        "line": line,
        "symbol": symbol,
        "message": message,
        "fix": fix,
        "fix_safety": fix_safety,
        "first_breaking": None,
    }


class MatrixDB:
    """A matrix database written row by row, as ``matrix run`` writes one."""

    def __init__(self, path: Path, schema: str = "1") -> None:
        self.path = path
        self.db = sqlite3.connect(path)
        self.db.executescript(SCHEMA_SQL)
        self.db.execute("INSERT INTO meta VALUES ('schema', ?)", (schema,))

    def pair(
        self,
        spec: str,
        release: str,
        findings: list[dict] = (),  # type: ignore[assignment]
        *,
        status: str | None = None,
        why: str | None = None,
        host: str = "vllm",
        started_at: str = "2026-12-06T01:00:00Z",
        tool_version: str = "0.1.0",
    ) -> MatrixDB:
        counts = {
            s: sum(f["severity"] == s for f in findings) for s in ("error", "warning", "info")
        }
        if status is None:
            status = "errors" if counts["error"] else "warnings" if counts["warning"] else "clean"
        name, _, version = spec.partition("==")
        self.db.execute(
            "INSERT INTO pairs (client_spec, client, client_version, client_digest, host, release, "
            "baseline, key, status, why, errors, warnings, infos, started_at, seconds, "
            "peak_rss_mib, tool_version) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                spec,
                name,
                version or None,
                "digest-" + name,
                host,
                release,
                "0.11.0",
                f"key-{spec}-{release}",
                status,
                why,
                counts["error"],
                counts["warning"],
                counts["info"],
                started_at,
                1.25,
                90.0,
                tool_version,
            ),
        )
        for f in findings:
            self.db.execute(
                "INSERT INTO findings (client_spec, host, release, fingerprint, rule, kind, "
                "severity, file, line, symbol, message, fix, fix_safety, first_breaking) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (spec, host, release, *f.values()),
            )
        return self

    def close(self) -> Path:
        self.db.commit()
        self.db.close()
        return self.path


WARN = finding("pkg/b.py", 7, rule="deprecated", kind="deprecated", severity="warning",
               symbol="vllm.LLM.encode", message="encode() is deprecated: use embed()",
               fix="call embed()", fix_safety="unsafe")  # fmt: skip
ERR = finding("pkg/a.py", 12, fix="pass prompts=", fix_safety="safe")
INFO = finding("pkg/c.py", 3, rule="behaviour-change", kind="behaviour-change", severity="info")


def sample(path: Path) -> Path:
    """Three clients x four releases: every status, a pair not run, releases that sort wrong as
    strings (0.9.0 < 0.10.0)."""
    db = MatrixDB(path)
    db.pair("trl==0.19.0", "0.9.0", [INFO])
    db.pair("trl==0.19.0", "0.10.0", [WARN])
    db.pair("trl==0.19.0", "0.11.0", [ERR, WARN])
    db.pair("trl==0.19.0", "0.12.0rc1", [ERR, WARN], started_at="2026-12-06T02:30:00Z")
    db.pair("speculators==0.3.0", "0.9.0", [])
    db.pair("speculators==0.3.0", "0.10.0", status="failed", why="fetch: no such release")
    db.pair("speculators==0.3.0", "0.12.0rc1", [ERR])
    db.pair("axolotl", "0.10.0", [WARN])
    db.pair("axolotl", "0.9.0", [WARN])
    db.pair("axolotl", "0.11.0", [WARN])
    db.pair("axolotl", "0.12.0rc1", [WARN])
    return db.close()


# -- the table read back ---------------------------------------------------------------------------


def test_releases_follow_version_order_and_clients_are_named(tmp_path):
    matrix = load_matrix(sample(tmp_path / "m.sqlite"))
    assert matrix.host == "vllm"
    assert matrix.releases == ("0.9.0", "0.10.0", "0.11.0", "0.12.0rc1")
    assert [c.label for c in matrix.clients] == ["axolotl", "speculators 0.3.0", "trl 0.19.0"]
    assert matrix.status("speculators==0.3.0", "0.11.0") == "missing"
    assert matrix.pair("trl==0.19.0", "0.11.0").findings[0].file == "pkg/a.py"


def test_first_breaking_is_the_first_release_with_errors(tmp_path):
    matrix = load_matrix(sample(tmp_path / "m.sqlite"))
    assert matrix.first_breaking("trl==0.19.0") == "0.11.0"
    # a failed pair is no breakage, a pair not run neither
    assert matrix.first_breaking("speculators==0.3.0") == "0.12.0rc1"
    assert matrix.first_breaking("axolotl") is None


def test_status_counts_cover_every_cell(tmp_path):
    matrix = load_matrix(sample(tmp_path / "m.sqlite"))
    counts = matrix.status_counts()
    assert sum(counts.values()) == 3 * 4
    assert counts == {"clean": 2, "warnings": 5, "errors": 3, "failed": 1, "missing": 1}


def test_a_report_never_writes_the_database(tmp_path):
    path = sample(tmp_path / "m.sqlite")
    before = path.read_bytes()
    render_text(load_matrix(path))
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.sqlite"]


# -- formats ---------------------------------------------------------------------------------------


def test_text_report(tmp_path):
    text = render_text(load_matrix(sample(tmp_path / "m.sqlite")))
    lines = text.splitlines()
    assert lines[0].startswith("vllm: 3 client(s) x 4 release(s) (0.9.0 … 0.12.0rc1)")
    assert "driftcheck 0.1.0, run 2026-12-06 01:00 … 02:30 UTC" in lines[0]
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:6]}
    assert rows["client"] == ["0.9.0", "0.10.0", "0.11.0", "0.12.0rc1", "first", "breaking"]
    assert rows["trl"] == ["0.19.0", "ok", "W1", "E1", "E1", "0.11.0"]
    assert rows["speculators"] == ["0.3.0", "ok", "FAIL", ".", "E1", "0.12.0rc1"]
    assert rows["axolotl"] == ["W1", "W1", "W1", "W1", "none"]
    assert "speculators==0.3.0 against 0.10.0: fetch: no such release" in text


def test_json_report(tmp_path):
    matrix = load_matrix(sample(tmp_path / "m.sqlite"))
    data = json.loads(render_json(matrix))
    assert data == report_data(matrix)
    assert data["releases"] == ["0.9.0", "0.10.0", "0.11.0", "0.12.0rc1"]
    assert data["compare"] is None
    trl = next(c for c in data["clients"] if c["name"] == "trl")
    assert trl["first_breaking"] == "0.11.0" and trl["version"] == "0.19.0"
    assert trl["findings"] == {"errors": 2, "warnings": 3, "infos": 1}
    assert trl["statuses"] == {"clean": 1, "warnings": 1, "errors": 2, "failed": 0, "missing": 0}
    assert trl["releases"]["0.11.0"] == {
        "status": "errors",
        "errors": 1,
        "warnings": 1,
        "infos": 0,
        "why": None,
    }
    spec = next(c for c in data["clients"] if c["name"] == "speculators")
    assert spec["releases"]["0.11.0"] is None
    assert spec["releases"]["0.10.0"]["why"] == "fetch: no such release"


def test_markdown_report_is_a_short_table(tmp_path):
    db = MatrixDB(tmp_path / "m.sqlite")
    db.pair("a|b==1.0", "1.0", [ERR])  # a pipe in a name must not split the row
    db.pair("a|b==1.0", "2.0", [])
    text = render_markdown(load_matrix(db.close()))
    rows = [line for line in text.splitlines() if line.startswith("|")]
    assert rows[0] == "| client | 1.0 | 2.0 | first breaking |"
    assert rows[1] == "| --- | --- | --- | --- |"
    assert rows[2] == "| a\\|b 1.0 | ❌ 1 | ✅ | **1.0** |"
    assert len(text.splitlines()) < 10


# -- compare ---------------------------------------------------------------------------------------


def _old_and_new(tmp_path: Path) -> tuple[Path, Path]:
    old = MatrixDB(tmp_path / "old.sqlite")
    old.pair("trl==0.19.0", "0.10.0", [WARN])
    old.pair("trl==0.19.0", "0.11.0", [ERR])
    old.pair("peft==0.5.0", "0.10.0", [])
    old.pair("peft==0.5.0", "0.11.0", [])
    new = MatrixDB(tmp_path / "new.sqlite")
    new.pair("trl==0.19.0", "0.9.0", [ERR])  # older than old's newest: nothing to compare with
    new.pair("trl==0.19.0", "0.10.0", [WARN])
    moved = {**ERR, "line": ERR["line"] + 40}  # same fingerprint on another line: not new
    new.pair("trl==0.19.0", "0.11.0", [moved, INFO])  # a new info breaks nothing
    new.pair("trl==0.19.0", "0.12.0", [moved])  # errors, but old's newest had them too
    new.pair("peft==0.5.0", "0.10.0", [WARN])  # worse: clean -> warnings
    new.pair("peft==0.5.0", "0.11.0", [])
    new.pair("peft==0.5.0", "0.12.0", [ERR])  # the new release breaks peft
    return old.close(), new.close()


def test_compare_finds_what_the_new_database_breaks(tmp_path):
    old, new = _old_and_new(tmp_path)
    comparison = compare_matrices(load_matrix(new), load_matrix(old))
    found = {(c.spec, c.release): c for c in comparison.changes}
    assert set(found) == {("peft==0.5.0", "0.10.0"), ("peft==0.5.0", "0.12.0")}
    worse = found["peft==0.5.0", "0.10.0"]
    assert (worse.was, worse.now, worse.worse, worse.new_release) == (
        "clean",
        "warnings",
        True,
        False,
    )
    assert [r.file for r in worse.new] == ["pkg/b.py"]
    breaks = found["peft==0.5.0", "0.12.0"]
    assert (breaks.against, breaks.was, breaks.breaks) == ("0.11.0", "clean", True)
    assert [c.spec for c in comparison.worse()] == ["peft==0.5.0"]
    assert [c.release for c in comparison.breaks()] == ["0.12.0"]
    assert comparison.new_findings() == 2


def test_a_new_error_in_a_pair_already_broken_is_listed(tmp_path):
    old = MatrixDB(tmp_path / "old.sqlite").pair("trl==0.19.0", "0.11.0", [ERR]).close()
    other = finding("pkg/d.py", 9, symbol="vllm.SamplingParams", message="gone")
    new = MatrixDB(tmp_path / "new.sqlite").pair("trl==0.19.0", "0.11.0", [ERR, other]).close()
    matrix = load_matrix(new)
    comparison = compare_matrices(matrix, load_matrix(old))
    (change,) = comparison.changes
    assert (change.worse, [r.file for r in change.new]) == (False, ["pkg/d.py"])
    assert "trl 0.19.0 against 0.11.0: still errors, 1 new finding(s)" in render_text(
        matrix, comparison
    )


def test_compare_with_itself_is_empty(tmp_path):
    path = sample(tmp_path / "m.sqlite")
    assert compare_matrices(load_matrix(path), load_matrix(path)).changes == ()


def test_compare_in_every_format(tmp_path):
    old, new = _old_and_new(tmp_path)
    matrix = load_matrix(new)
    comparison = compare_matrices(matrix, load_matrix(old))
    text = render_text(matrix, comparison)
    assert "1 pair(s) worse, 1 new release(s) breaking a client, 2 new finding(s)" in text
    assert "peft 0.5.0 against 0.12.0: clean → errors (old newest 0.11.0)" in text
    assert "+ pkg/a.py:12 error call-signature:" in text
    peft = next(line for line in text.splitlines() if line.startswith("peft"))
    assert peft.split() == ["peft", "0.5.0", ".", "W1*", "ok", "E1*", "0.12.0"]
    data = json.loads(render_json(matrix, comparison))["compare"]
    assert (data["worse"], data["breaks"], data["new_findings"]) == (1, 1, 2)
    assert data["old"] == str(old)
    assert {(c["release"], c["breaks"]) for c in data["changes"]} == {
        ("0.10.0", False),
        ("0.12.0", True),
    }
    markdown = render_markdown(matrix, comparison)
    assert "| peft 0.5.0 | – | ⚠️ 1 🔺 | ✅ | ❌ 1 🔺 | **0.12.0** |" in markdown
    assert "- peft 0.5.0 against 0.12.0: clean → errors (old newest 0.11.0)" in markdown


# -- the command -----------------------------------------------------------------------------------


def invoke(*args: str):
    """``driftcheck matrix report ARGS`` as the CLI runs it: under driftcheck's own group, which
    turns errors into one line and exit code 2."""
    root = _Group("driftcheck", commands={"matrix": click.Group("matrix", commands=[report])})
    return CliRunner().invoke(root, ["matrix", "report", *args])


def _one_error_line(result, needle: str) -> None:
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("driftcheck: error: "), lines
    assert needle in lines[0], lines[0]


def test_command_prints_each_format_and_writes_the_page(tmp_path):
    path = sample(tmp_path / "m.sqlite")
    matrix = load_matrix(path)
    assert invoke("--db", str(path)).stdout == render_text(matrix)
    assert invoke("--db", str(path), "--format", "markdown").stdout == render_markdown(matrix)
    page = tmp_path / "out" / "matrix.html"
    page.parent.mkdir()
    done = invoke("--db", str(path), "--format", "json", "--html", str(page))
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["host"] == "vllm"
    assert page.read_text().startswith("<!doctype html>")


def test_command_compares(tmp_path):
    old, new = _old_and_new(tmp_path)
    done = invoke("--db", str(new), "--compare", str(old), "--format", "json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["compare"]["breaks"] == 1


def test_several_hosts_need_host(tmp_path):
    db = MatrixDB(tmp_path / "m.sqlite")
    db.pair("trl==0.19.0", "0.11.0", [ERR])
    db.pair("trl==0.19.0", "2.9.0", [], host="torch")
    path = db.close()
    _one_error_line(invoke("--db", str(path)), "holds several hosts (torch, vllm): pass --host")
    done = invoke("--db", str(path), "--host", "torch", "--format", "json")
    assert json.loads(done.stdout)["releases"] == ["2.9.0"]
    _one_error_line(invoke("--db", str(path), "--host", "jax"), "holds no pairs of host 'jax'")


def test_bad_databases_are_one_line(tmp_path):
    _one_error_line(invoke("--db", str(tmp_path / "none.sqlite")), "no matrix database at")
    junk = tmp_path / "junk.sqlite"
    junk.write_text("not a database at all, just text " * 100)
    _one_error_line(invoke("--db", str(junk)), "is not a driftcheck matrix database")
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    _one_error_line(invoke("--db", str(other)), "is not a driftcheck matrix database")
    future = MatrixDB(tmp_path / "future.sqlite", schema="2").close()
    _one_error_line(invoke("--db", str(future)), "has matrix schema 2; this driftcheck reads 1")
    empty = MatrixDB(tmp_path / "empty.sqlite").close()
    _one_error_line(invoke("--db", str(empty)), "holds no pairs yet")
    odd = MatrixDB(tmp_path / "odd.sqlite").pair("x==1", "1.0", status="exploded").close()
    _one_error_line(invoke("--db", str(odd)), "unknown status 'exploded'")
    good = sample(tmp_path / "m.sqlite")
    _one_error_line(invoke("--db", str(good), "--compare", str(junk)), "junk.sqlite")
    with pytest.raises(UsageError):
        load_matrix(junk)
