"""The ``driftcheck`` command ends a scan without the interpreter's teardown
(:func:`driftcheck.cli.run`): what the user sees must be the same as with a normal exit (the
whole report, on stdout or in ``--output``, the status of the findings, one line for an error),
and the exit functions still run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "fixtures" / "clients" / "miniclient"
HOST = ROOT / "fixtures" / "hosts" / "minihost"
HOST_ARGS = ["--against", str(HOST / "2.0"), "--baseline", str(HOST / "1.0"), "--host", "minihost"]

#: The console script's entry, with an exit function that says it ran.
ENTRY = (
    "import atexit, sys\n"
    "atexit.register(lambda: sys.stderr.write('exit functions ran\\n'))\n"
    "from driftcheck.cli import {name}\n"
    "{name}()\n"
)


def _driftcheck(
    *args: str, entry: str = "run", cache: Path | None = None
) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if cache is not None:
        env["DRIFTCHECK_CACHE_DIR"] = str(cache)
    return subprocess.run(
        [sys.executable, "-c", ENTRY.format(name=entry), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


def test_a_scan_reports_and_exits_as_the_plain_exit_does(tmp_path: Path):
    args = ["scan", str(CLIENT), *HOST_ARGS, "--format", "json", "-q"]
    quick = _driftcheck(*args, cache=tmp_path / "c1")
    plain = _driftcheck(*args, entry="main", cache=tmp_path / "c2")
    assert quick.returncode == plain.returncode == 1  # the fixture has errors
    report, expected = json.loads(quick.stdout), json.loads(plain.stdout)
    assert report["findings"] and report["findings"] == expected["findings"]
    assert "exit functions ran" in quick.stderr


def test_a_report_written_to_a_file_is_whole(tmp_path: Path):
    out = tmp_path / "report.json"
    got = _driftcheck(
        "scan", str(CLIENT), *HOST_ARGS, "--format", "json", "-q", "--output", str(out),
        cache=tmp_path / "c",
    )  # fmt: skip
    assert got.returncode == 1
    assert json.loads(out.read_text())["findings"]


def test_a_clean_scan_exits_0_and_an_error_is_one_line(tmp_path: Path):
    (tmp_path / "clean" / "clean").mkdir(parents=True)
    (tmp_path / "clean" / "clean" / "__init__.py").write_text("import minihost\n")
    clean = _driftcheck("scan", str(tmp_path / "clean"), *HOST_ARGS, "-q", cache=tmp_path / "c")
    assert clean.returncode == 0, clean.stderr
    bad = _driftcheck("scan", str(tmp_path / "missing"), *HOST_ARGS, cache=tmp_path / "c")
    assert bad.returncode == 2
    lines = [ln for ln in bad.stderr.splitlines() if ln.strip()]
    assert lines[0].startswith("driftcheck: error:") and "Traceback" not in bad.stderr
    assert lines[-1] == "exit functions ran"
