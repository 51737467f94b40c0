"""Corrections to vLLM's own code on the CPU (``probes/host_shims.py``): applied only where the
target's source holds the line they correct, through a ``vllm.general_plugins`` entry point."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from driftcheck.probes import host_shims
from driftcheck.probes.host_shims import CPU_SHIMS, HostShim, cpu_host_shims

# The line vLLM 0.20.0 and 0.22.0 hold; 0.17.0 and 0.25.0 map SILU to the staticmethod.
EAGER_OP = "    MoEActivation.SILU: lambda x: SiluAndMul(compile_native=False).forward_native(x),\n"
STATIC = "    MoEActivation.SILU: SiluAndMul.forward_native,\n"


def _vllm(root: Path, line: str) -> Path:
    moe = root / "vllm" / "model_executor" / "layers" / "fused_moe"
    moe.mkdir(parents=True)
    (moe / "cpu_fused_moe.py").write_text(f"x = 1\n_CPU_MOE_ACT_FN = {{\n{line}}}\n")
    return root / "vllm"


def test_a_shim_applies_where_the_target_holds_its_line(tmp_path, monkeypatch):
    broken = _vllm(tmp_path / "a", EAGER_OP)
    monkeypatch.setattr(host_shims, "vllm_dir", lambda _python: broken)
    [line] = cpu_host_shims("python", tmp_path / "plugin")
    assert line.startswith("cpu-moe-silu (vllm/model_executor/layers/fused_moe/cpu_fused_moe.py:3)")
    entry = tmp_path / "plugin" / f"{host_shims.PLUGIN}-0.dist-info" / "entry_points.txt"
    assert (
        entry.read_text() == f"[vllm.general_plugins]\nhost_shims = {host_shims.PLUGIN}:register\n"
    )
    compile((tmp_path / "plugin" / f"{host_shims.PLUGIN}.py").read_text(), "plugin", "exec")


def test_no_shim_where_the_target_is_right(tmp_path, monkeypatch):
    fixed = _vllm(tmp_path / "b", STATIC)
    monkeypatch.setattr(host_shims, "vllm_dir", lambda _python: fixed)
    assert cpu_host_shims("python", tmp_path / "plugin") == []
    assert not (tmp_path / "plugin").exists()
    monkeypatch.setattr(host_shims, "vllm_dir", lambda _python: None)  # no vllm found
    assert cpu_host_shims("python", tmp_path / "plugin") == []


def test_the_plugin_runs_every_shim_it_was_written_with(tmp_path, monkeypatch):
    """The entry point's register() runs each applied shim's code (a stand-in module here)."""
    root = _vllm(tmp_path / "c", EAGER_OP)
    monkeypatch.setattr(host_shims, "vllm_dir", lambda _python: root)
    probe = HostShim(
        "mark",
        CPU_SHIMS[0].file,
        "SiluAndMul(compile_native=False)",
        "why",
        "import marker\nmarker.hit = 1\n",
    )
    cpu_host_shims("python", tmp_path / "plugin", (probe,))
    (tmp_path / "marker.py").write_text("hit = 0\n")
    code = (
        "import importlib.metadata as md, marker\n"
        "[ep] = [e for e in md.entry_points(group='vllm.general_plugins') if e.name == 'host_shims']\n"
        "ep.load()()\nprint(marker.hit)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": f"{tmp_path / 'plugin'}:{tmp_path}"},
    )
    assert out.stdout.strip() == "1"
