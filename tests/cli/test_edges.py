"""Sharp edges new users found: bare names that are also folders, ``fix`` and what it leaves,
``fix`` reading the project's settings as ``scan`` does, ids for ``--disable``, and the
benchmarks on an empty cache."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import assert_one_error_line, run_cli

from driftcheck.errors import UsageError
from driftcheck.pipeline import scan
from driftcheck.registry import KINDS
from driftcheck.sources.specs import parse_spec

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
CLIENT = FIXTURES / "clients" / "miniclient"
HOST = FIXTURES / "hosts" / "minihost"
HOST_ARGS = ["--against", str(HOST / "2.0"), "--baseline", str(HOST / "1.0"), "--host", "minihost"]


# -- a bare name is never a folder --------------------------------------------------------------


def test_bare_name_that_is_also_a_folder_must_be_explicit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    (tmp_path / "speculators").mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match=r"\./speculators.*speculators@installed"):
        parse_spec("speculators")
    assert parse_spec("./speculators").kind == "directory"
    assert parse_spec("speculators@installed").kind == "installed"
    assert parse_spec("speculators==0.3.0").kind == "release"


def test_bare_name_without_such_folder_is_the_installed_distribution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)
    spec = parse_spec("speculators")
    assert (spec.kind, spec.name) == ("installed", "speculators")


def test_cli_names_the_ambiguity_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    shutil.copytree(CLIENT, tmp_path / "miniclient")
    monkeypatch.chdir(tmp_path)
    result = run_cli("scan", "miniclient", *HOST_ARGS)
    assert_one_error_line(result, "./miniclient")
    assert run_cli("scan", "./miniclient", *HOST_ARGS).exit_code == 1  # drifts found


# -- fix: what is left, and the project's settings ---------------------------------------------


def _copy(tmp_path: Path, settings: str | None = None) -> Path:
    copy = tmp_path / "client"
    shutil.copytree(CLIENT, copy)
    if settings is not None:
        (copy / "pyproject.toml").write_text(settings)
    return copy


def test_fix_says_what_is_left_and_exits_1(tmp_path: Path):
    client = _copy(tmp_path)
    result = run_cli("fix", str(client), *HOST_ARGS, "--apply")
    after = scan(str(client), str(HOST / "2.0"), baseline=str(HOST / "1.0"), host="minihost")
    left = [f for f in after.findings if f.severity == "error"]
    assert left, "the fixture keeps drifts no safe fix addresses"
    assert result.exit_code == 1
    assert f"{len(left)} error finding(s) left without a fix applied" in result.stdout
    again = run_cli("fix", str(client), *HOST_ARGS, "--apply")
    assert again.exit_code == 1 and "rewrote" not in again.stdout  # nothing more to do


SETTINGS = f"""
[tool.driftcheck]
host = "minihost"
against = "{HOST / "2.0"}"
baseline = "{HOST / "1.0"}"
disable = ["deprecated"]
"""


def test_fix_reads_the_project_settings_as_scan_does(tmp_path: Path):
    client = _copy(tmp_path, SETTINGS)
    scanned = run_cli("scan", str(client), "--format", "json")
    assert scanned.exit_code == 1, scanned.stderr
    ids = {f["rule"] for f in json.loads(scanned.stdout)["findings"]}
    assert ids and "deprecated" not in ids
    fixed = run_cli("fix", str(client), "--out", str(tmp_path / "patches"))
    assert fixed.exit_code == 1, fixed.stderr
    assert "error:" not in fixed.stderr
    assert (tmp_path / "patches" / "all.patch").is_file()


def test_fix_rejects_a_bad_setting_as_scan_does(tmp_path: Path):
    client = _copy(tmp_path, SETTINGS.replace('"deprecated"', '"deprecatd"'))
    for command in ("scan", "fix"):
        result = run_cli(command, str(client))
        line = assert_one_error_line(result, "deprecatd", "did you mean 'deprecated'")
        assert "valid ids:" in line


# -- ids -----------------------------------------------------------------------------------------


def test_unknown_disable_id_lists_the_valid_ones():
    result = run_cli("scan", str(CLIENT), *HOST_ARGS, "--disable", "no-such-id")
    line = assert_one_error_line(result, "--disable", "no-such-id", "valid ids:")
    for kind in KINDS:
        assert kind in line
    assert "execute-model-sample-tokens" in line  # rule ids too


def test_disabling_a_kind_drops_every_finding_of_that_kind():
    base = scan(str(CLIENT), str(HOST / "2.0"), baseline=str(HOST / "1.0"), host="minihost")
    kinds = {f.kind for f in base.findings}
    assert "call-signature" in kinds
    less = scan(
        str(CLIENT),
        str(HOST / "2.0"),
        baseline=str(HOST / "1.0"),
        host="minihost",
        disable={"call-signature"},
    )
    assert {f.kind for f in less.findings} == kinds - {"call-signature"}
    assert len(less.findings) == len([f for f in base.findings if f.kind != "call-signature"])


def test_rules_list_shows_checks_and_rules():
    result = run_cli("rules", "list")
    assert result.exit_code == 0
    for needle in ("missing-symbol", "implementation-swap", "execute-model-sample-tokens"):
        assert needle in result.stdout
    shown = run_cli("rules", "show", "call-signature")
    assert shown.exit_code == 0 and "built-in check" in shown.stdout


# -- benchmarks on an empty cache ---------------------------------------------------------------


@pytest.mark.network
@pytest.mark.slow
@pytest.mark.parametrize(
    "script, args",
    [
        ("scan.py", ["--repeat", "1", "--large", ""]),
        ("timeline.py", ["--from", "0.15.0", "--to", "0.15.1"]),
    ],
)
def test_bench_runs_on_an_empty_cache(tmp_path: Path, script: str, args: list[str]):
    env = {**os.environ, "DRIFTCHECK_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "griffe full static load" in proc.stdout
    assert "ratio" in proc.stdout


# -- --baseline none ----------------------------------------------------------------------------


def test_baseline_none_scans_without_the_pin(tmp_path: Path):
    """miniclient pins minihost==1.0; ``none`` scans it against the target alone (no index
    lookup of the pin)."""
    client = _copy(tmp_path)
    none = run_cli(
        "scan",
        str(client),
        "--against",
        str(HOST / "2.0"),
        "--host",
        "minihost",
        "--baseline",
        "none",
        "--format",
        "json",
    )
    assert none.exit_code == 1, none.stderr
    data = json.loads(none.stdout)
    assert data["host"]["baseline"] is None and data["findings"]
    result = scan(str(client), str(HOST / "2.0"), baseline="none", host="minihost")
    assert result.baseline is None
    assert [f.to_dict() for f in result.findings] == data["findings"]


def test_empty_baseline_is_an_error():
    result = run_cli("scan", str(CLIENT), *HOST_ARGS[:2], "--host", "minihost", "--baseline", "")
    assert_one_error_line(result, "--baseline is empty", "'none'")


def test_a_file_the_analysis_trips_on_is_skipped_not_fatal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from driftcheck.client.uses import UseCollector

    monkeypatch.setenv("DRIFTCHECK_CACHE_DIR", str(tmp_path / "cache"))
    run = UseCollector.run

    def trips(self):  # noqa: ANN001, ANN202
        if self.module.file.endswith("returns.py"):
            raise AttributeError("boom")
        return run(self)

    monkeypatch.setattr(UseCollector, "run", trips)
    result = scan(str(CLIENT), str(HOST / "2.0"), baseline=str(HOST / "1.0"), host="minihost")
    assert ("miniclient/returns.py", "driftcheck could not analyse it (AttributeError: boom)") in [
        tuple(s) for s in result.skipped
    ]
    assert result.findings and all(f.file != "miniclient/returns.py" for f in result.findings)


def test_a_wheel_that_keeps_its_code_under_data_purelib_is_read(tmp_path: Path):
    import zipfile

    wheel = tmp_path / "purelibclient-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(
            "purelibclient-0.1.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: purelibclient\nVersion: 0.1\n",
        )
        zf.writestr("purelibclient-0.1.data/purelib/purelibclient/__init__.py", "")
        zf.writestr(
            "purelibclient-0.1.data/purelib/purelibclient/mod.py",
            "from minihost.core import connect\n\n\ndef f():\n    return connect('h', retries=1)\n",
        )
    result = scan(str(wheel), str(HOST / "2.0"), baseline=str(HOST / "1.0"), host="minihost")
    assert [(f.file, f.kind) for f in result.findings] == [
        ("purelibclient/mod.py", "call-signature")
    ]


def test_an_internal_error_is_one_line_and_exit_code_3(monkeypatch: pytest.MonkeyPatch):
    import driftcheck.pipeline

    def broken(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(driftcheck.pipeline, "scan", broken)
    result = run_cli("scan", str(CLIENT), *HOST_ARGS)
    assert result.exit_code == 3
    [line] = result.stderr_lines
    assert line.startswith("driftcheck: error: internal error: ZeroDivisionError: a bug")
