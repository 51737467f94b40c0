"""Real releases from the package index (cached between runs): speculators against vLLM."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli

from driftcheck.findings import severity_rank

pytestmark = [pytest.mark.network, pytest.mark.slow]

FINDING_KEYS = {"rule", "kind", "severity", "file", "line", "column", "symbol", "message"}
FINDING_KEYS |= {"evidence", "fix"}
SEVERITIES = {"error", "warning", "info"}


def _scan_json(*args: str) -> tuple[int, dict]:
    result = run_cli("scan", *args, "--format", "json", "--quiet")
    assert result.exception is None, repr(result.exception)
    assert result.exit_code in (0, 1), result.stderr
    return result.exit_code, json.loads(result.stdout)


@pytest.fixture(scope="module")
def speculators_030_on_vllm_016() -> tuple[int, dict]:
    return _scan_json("speculators==0.3.0", "--against", "vllm==0.16.0")


def _check_contract(data: dict) -> None:
    assert {"client", "host", "findings"} <= set(data)
    assert set(data["client"]) >= {"name", "version"}
    assert set(data["host"]) >= {"name", "baseline", "target"}
    for f in data["findings"]:
        assert FINDING_KEYS <= set(f), sorted(FINDING_KEYS - set(f))
        assert f["severity"] in SEVERITIES
        assert isinstance(f["line"], int) and f["line"] > 0
        assert isinstance(f["column"], int) and f["column"] >= 0
        assert isinstance(f["file"], str) and not f["file"].startswith("/")
        assert isinstance(f["symbol"], str) and f["symbol"]
        assert isinstance(f["message"], str) and f["message"]
        assert isinstance(f["evidence"], list)
        for ev in f["evidence"]:
            assert set(ev) >= {"version", "file", "line"}
            assert isinstance(ev["version"], str) and isinstance(ev["file"], str)
            assert ev["line"] is None or isinstance(ev["line"], int)
        fix = f["fix"]
        assert fix is None or (
            set(fix) >= {"safety", "description"} and isinstance(fix["description"], str)
        )


def test_speculators_030_on_vllm_016_contract(speculators_030_on_vllm_016):
    code, data = speculators_030_on_vllm_016
    assert code == 1
    _check_contract(data)
    assert data["client"] == {"name": "speculators", "version": "0.3.0"}
    assert data["host"]["name"] == "vllm"
    assert data["host"]["baseline"] == "0.11.0"  # speculators' own pin (datagen extra)
    assert data["host"]["target"] == "0.16.0"
    assert data["findings"]
    for f in data["findings"]:
        assert f["file"].startswith("speculators/data_generation/"), f["file"]


@pytest.mark.parametrize(
    ("name", "line"),
    [("get_kv_cache_config_from_groups", 139), ("Scheduler", 148), ("SchedulerConfig", 194)],
)
def test_speculators_030_on_vllm_016_call_signatures(speculators_030_on_vllm_016, name, line):
    _, data = speculators_030_on_vllm_016
    matches = [
        f
        for f in data["findings"]
        if f["kind"] == "call-signature" and f["symbol"].rsplit(".", 1)[-1] == name
    ]
    assert [f["line"] for f in matches] == [line], [(f["symbol"], f["line"]) for f in matches]
    found = matches[0]
    assert found["file"] == "speculators/data_generation/vllm_hidden_states_generator.py"
    assert found["severity"] == "error"
    assert found["symbol"].startswith("vllm.")
    evidence = {ev["version"]: ev for ev in found["evidence"]}
    assert set(evidence) >= {"0.11.0", "0.16.0"}
    for ev in evidence.values():
        assert ev["file"].startswith("vllm/") and ev["file"].endswith(".py")
        assert isinstance(ev["line"], int) and ev["line"] > 0


def test_speculators_030_on_its_own_baseline_is_clean():
    code, data = _scan_json("speculators==0.3.0", "--against", "vllm==0.11.0")
    _check_contract(data)
    assert data["host"]["baseline"] == "0.11.0"
    assert data["findings"] == []
    assert code == 0


def test_speculators_040_on_vllm_016_has_no_warnings():
    """speculators 0.4.0 was updated for newer vLLM: nothing at warning level or above."""
    result = run_cli(
        "scan",
        "speculators==0.4.0",
        "--against",
        "vllm==0.16.0",
        "--format",
        "json",
        "--fail-on",
        "warning",
        "--quiet",
    )
    assert result.exception is None, repr(result.exception)
    data = json.loads(result.stdout)
    _check_contract(data)
    loud = [
        (f["severity"], f["kind"], f["file"], f["line"], f["symbol"], f["message"])
        for f in data["findings"]
        if severity_rank(f["severity"]) >= severity_rank("warning")
    ]
    assert loud == []
    assert result.exit_code == 0, result.stderr
