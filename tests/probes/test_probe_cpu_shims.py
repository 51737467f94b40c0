"""The shipped CPU shims on an in-process workload's driver: a correction of vLLM's own code is
made (in every process that imports the module) only where the target's source holds the line it
corrects; a distribution record, which only the server's console entry point needs, is not
written for the driver."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from driftcheck.probes.cpu_shims import load_shims, prepare

# The line vLLM 0.20.0 and 0.22.0 hold; 0.17.0 and 0.25.0 map SILU to the staticmethod.
EAGER_OP = "    'silu': lambda x: SiluAndMul(compile_native=False).forward_native(x),\n"
STATIC = "    'silu': SiluAndMul.forward_native,\n"
ACTIVATION = (
    "class SiluAndMul:\n"
    "    def __init__(self, compile_native=True):\n"
    "        raise AssertionError('Current vLLM config is not set')\n\n"
    "    @staticmethod\n"
    "    def forward_native(x):\n"
    "        return 2 * x\n"
)


def _vllm(root: Path, line: str) -> Path:
    moe = root / "vllm" / "model_executor" / "layers" / "fused_moe"
    moe.mkdir(parents=True)
    for folder in (root / "vllm", root / "vllm" / "model_executor", moe.parent, moe):
        (folder / "__init__.py").touch()
    (moe.parent / "activation.py").write_text(ACTIVATION)
    (moe / "cpu_fused_moe.py").write_text(
        "from vllm.model_executor.layers.activation import SiluAndMul\n"
        f"_CPU_MOE_ACT_FN = {{\n{line}}}\n"
    )
    (root / "vllm" / "entrypoints" / "cli").mkdir(parents=True)
    (root / "vllm" / "entrypoints" / "cli" / "main.py").write_text(
        'import importlib.metadata\nV = importlib.metadata.version("vllm")\n'
    )
    return root / "vllm"


def _driver_shims() -> list:
    return [s for s in load_shims() if s.kind == "source"]


def _act(dest: Path, root: Path) -> str:
    code = (
        "from vllm.model_executor.layers.fused_moe import cpu_fused_moe as m\n"
        "print(m._CPU_MOE_ACT_FN['silu'](21))\n"
    )
    return _run(code, dest, root)


def _run(code: str, dest: Path, root: Path) -> str:
    """``code``'s output (or its last error line) with the shims in ``dest`` and the fake host."""
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": f"{dest}:{root.parent}", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout.strip() or out.stderr.strip().splitlines()[-1]


def test_the_moe_silu_correction_is_made_where_the_target_holds_its_line(tmp_path: Path):
    root = _vllm(tmp_path / "a", EAGER_OP)
    dest = tmp_path / "shims"
    assert _act(tmp_path / "none", root) == "AssertionError: Current vLLM config is not set"
    lines = prepare(root, "0.20.0", dest, _driver_shims())
    assert [ln.split(":", 1)[0] for ln in lines] == ["cpu-moe-silu"]
    assert "vllm/model_executor/layers/fused_moe/cpu_fused_moe.py:3" in lines[0]
    assert _act(dest, root) == "42"
    assert not list(dest.glob("*.dist-info"))  # the server's record is not the driver's


def test_no_correction_where_the_target_is_right(tmp_path: Path):
    root = _vllm(tmp_path / "b", STATIC)
    dest = tmp_path / "shims"
    assert prepare(root, "0.25.0", dest, _driver_shims()) == []
    assert _act(dest, root) == "42"


# The shape of vLLM 0.16.0's config/cache.py check (written here, not copied).
SWAP_CHECK = """import logging
logger = logging.getLogger("vllm")


def verify(swap_gib, ranks, total_gib):
    usage = swap_gib * ranks
    msg = f"{usage} GiB out of the {total_gib} GiB total CPU memory is allocated for the swap space."
    if usage > 0.7 * total_gib:
        raise ValueError("Too large swap space. " + msg)
    return "ok"
"""


def _verify(dest: Path, root: Path) -> str:
    return _run("import vllm.config.cache as c; print(c.verify(4, 8, 23.5))", dest, root)


def test_the_swap_space_refusal_of_8_cpu_workers_becomes_a_warning(tmp_path: Path):
    """vLLM 0.16.0 refuses 4 GiB x 8 ranks of swap space on a 24 GiB host, space its V1 engine
    never allocates; corrected, the check warns and the config is made. A release without the
    check (0.18.0 on) is left alone."""
    root = _vllm(tmp_path / "c", STATIC)
    (root / "config").mkdir()
    (root / "config" / "__init__.py").touch()
    (root / "config" / "cache.py").write_text(SWAP_CHECK)
    assert _verify(tmp_path / "none", root).startswith("ValueError: Too large swap space. 32 GiB")
    dest = tmp_path / "shims"
    lines = prepare(root, "0.16.0", dest, _driver_shims())
    assert [ln.split(":", 1)[0] for ln in lines] == ["cpu-swap-space-check"]
    assert "vllm/config/cache.py:9" in lines[0]
    assert _verify(dest, root) == "ok"
    (root / "config" / "cache.py").write_text("def verify(*a):\n    return 'ok'\n")
    assert prepare(root, "0.18.0", tmp_path / "shims2", _driver_shims()) == []
