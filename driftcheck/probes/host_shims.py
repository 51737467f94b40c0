"""Corrections to vLLM's own code that its CPU build needs before the probe's workloads can run
there, as data (:data:`CPU_SHIMS`).

Each shim names the file and the text of the line it corrects, and is applied only where the
target's source holds that line (:func:`cpu_host_shims`). It runs in every vLLM process, the
workers included, through a ``vllm.general_plugins`` entry point (a tiny dist-info on the
driver's ``PYTHONPATH``; vLLM's ``load_general_plugins`` loads it in each process). Every shim
applied is listed in the report with the line it corrects. The client is never touched: a
shim corrects a fault that vLLM's own engine has too, shown without any client code.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from driftcheck.probes.builtin_models import find_line, vllm_dir

PLUGIN = "driftcheck_vllm_host_shims"


@dataclass(frozen=True)
class HostShim:
    """One correction to the host's code."""

    name: str
    #: The file in the ``vllm`` package that holds the line corrected.
    file: str
    #: Text on that line: the shim applies only where the target's file has it.
    text: str
    why: str
    #: Python run in every vLLM process (imports inside it).
    code: str


CPU_SHIMS: tuple[HostShim, ...] = (
    HostShim(
        name="cpu-moe-silu",
        file="model_executor/layers/fused_moe/cpu_fused_moe.py",
        text="lambda x: SiluAndMul(compile_native=False).forward_native(x)",
        why=(
            "the CPU MoE's SiLU builds a CustomOp at forward time, which asserts a current "
            "vLLM config that no forward runs with ('Current vLLM config is not set': vLLM's "
            "own LLM() fails so on tiny-kimi-k2.5 in its warm-up, eager and compiled alike); "
            "SiluAndMul.forward_native is a staticmethod, which vLLM 0.17.0 and 0.25.0 map "
            "the activation to directly, as this shim does"
        ),
        code=(
            "from vllm.model_executor.layers.activation import SiluAndMul\n"
            "from vllm.model_executor.layers.fused_moe import cpu_fused_moe\n"
            "cpu_fused_moe._CPU_MOE_ACT_FN[cpu_fused_moe.MoEActivation.SILU] = "
            "SiluAndMul.forward_native\n"
        ),
    ),
)


def cpu_host_shims(
    python: Path | str, dest: Path, shims: tuple[HostShim, ...] = CPU_SHIMS
) -> list[str]:
    """Write the plugin for the shims whose line the target's vLLM (``python``'s) holds into
    ``dest`` (put it on the driver's path); return one report line per shim applied (none:
    nothing written)."""
    root = vllm_dir(python)
    found = [(s, find_line(root, s.file, s.text)) for s in shims]
    used = [(s, line) for s, line in found if line is not None]
    if not used:
        return []
    dest.mkdir(parents=True, exist_ok=True)
    body = "".join(
        f"\n\ndef _{s.name.replace('-', '_')}():\n"
        + "".join(f"    {line}\n" for line in s.code.splitlines())
        for s, _ in used
    )
    calls = "".join(f"    _{s.name.replace('-', '_')}()\n" for s, _ in used)
    (dest / f"{PLUGIN}.py").write_text(
        f'"""driftcheck probe shims: corrections to vLLM\'s code (see the report)."""\n{body}'
        f"\n\ndef register():\n{calls}"
    )
    info = dest / f"{PLUGIN}-0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: driftcheck-vllm-host-shims\nVersion: 0\n"
    )
    (info / "entry_points.txt").write_text(
        f"[vllm.general_plugins]\nhost_shims = {PLUGIN}:register\n"
    )
    return [f"{s.name} (vllm/{s.file}:{line}): {s.why}" for s, line in used]
