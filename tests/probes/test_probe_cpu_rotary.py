"""The CPU rotary shim (`cpu-rotary-rows` in cpu_shims.toml): vLLM's compiled CPU rotary kernel
misreads a 3-D multi-head query; the shim hands it rows and gives back the caller's shapes.
A written module of the same shape first (the shim's `after` and `also`: it corrects
forward_cpu's lines only, and only where both are there), then the real kernel in vLLM 0.16.0's
managed environment."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from driftcheck.probes.cpu_shims import load_shims, prepare

# Two methods that share both corrected lines; only the second is forward_cpu (written here).
BASE = """class Rope:
    head_size = 4

    def _match_cos_sin_cache_dtype(self, query):
        return query

    def forward_native(self, positions, query, key=None):
        cos_sin_cache = self._match_cos_sin_cache_dtype(query)
        return query, key

    def forward_cpu(self, positions, query, key=None):
        cos_sin_cache = self._match_cos_sin_cache_dtype(query)
        seen.append((tuple(query.shape), None if key is None else tuple(key.shape)))
        return query, key


seen = []
"""

PROBE = """
import json
from math import prod
from vllm.model_executor.layers.rotary_embedding.base import Rope, seen

class T:  # shape, reshape and view are all a tensor needs here
    def __init__(self, shape):
        self.shape = tuple(shape)
    def reshape(self, n, rest):
        return T((n, prod(self.shape) // n))
    def view(self, shape):
        assert prod(shape) == prod(self.shape)
        return T(shape)

r = Rope()
q, k = T((5, 3, 4)), T((5, 1, 4))
nq, nk = r.forward_native(None, q, k)
cq, ck = r.forward_cpu(None, q, k)
print(json.dumps({"native": [nq.shape, nk.shape], "cpu": [cq.shape, ck.shape], "kernel_saw": seen}))
"""


def _shims() -> list:
    return [s for s in load_shims() if s.id == "cpu-rotary-rows"]


def _tree(root: Path, text: str) -> Path:
    pkg = root / "vllm"
    folder = pkg / "model_executor" / "layers" / "rotary_embedding"
    folder.mkdir(parents=True)
    for d in [pkg, *folder.relative_to(pkg).parents, folder.relative_to(pkg)]:
        (pkg / d / "__init__.py").touch()
    (folder / "base.py").write_text(text)
    return pkg


def test_the_rotary_shim_corrects_forward_cpu_only(tmp_path: Path):
    pkg = _tree(tmp_path / "h", BASE)
    dest = tmp_path / "shims"
    lines = prepare(pkg, "0.16.0", dest, _shims())
    assert len(lines) == 1 and lines[0].startswith("cpu-rotary-rows:")
    assert "rotary_embedding/base.py:12, :14" in lines[0]  # forward_cpu's lines, not native's
    edits = json.loads((dest / "driftcheck_source_shims.json").read_text())
    assert [e[0].strip() for e in edits["vllm.model_executor.layers.rotary_embedding.base"]] == [
        "cos_sin_cache = self._match_cos_sin_cache_dtype(query)",
        "return query, key",
    ]
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        env={"PYTHONPATH": f"{dest}:{pkg.parent}", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["native"] == [[5, 3, 4], [5, 1, 4]]  # untouched
    assert got["kernel_saw"] == [[[5, 12], [5, 4]]]  # rows
    assert got["cpu"] == [[5, 3, 4], [5, 1, 4]]  # the caller's shapes back


def test_near_miss_the_rotary_shim_stays_off_without_both_lines(tmp_path: Path):
    """A forward_cpu without the return line (a release shaped otherwise): neither line is
    corrected, since one without the other would hand the caller rows."""
    text = BASE.replace(
        "        return query, key\n\n\nseen", "        return (query, key)\n\n\nseen"
    )
    pkg = _tree(tmp_path / "h", text)
    assert prepare(pkg, "0.16.0", tmp_path / "shims", _shims()) == []
    assert not (tmp_path / "shims" / "driftcheck_source_shims.json").exists()


ROPE = r"""
import json, types, torch
from vllm.model_executor.layers.rotary_embedding.base import RotaryEmbedding
T, rope, H, nope = 30, 64, 8, 48
inv = 1.0 / (50000 ** (torch.arange(0, rope, 2).float() / rope))
angles = torch.outer(torch.arange(64).float(), inv)
cache = torch.cat([angles.cos(), angles.sin()], -1)

def gptj(x):  # the rotation of is_neox=False
    c, s = angles[:T].cos()[:, None, :], angles[:T].sin()[:, None, :]
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * c - x2 * s, x2 * c + x1 * s], -1).flatten(-2)

me = types.SimpleNamespace(head_size=rope, is_neox_style=False,
                           _match_cos_sin_cache_dtype=lambda q: cache)
torch.manual_seed(0)
q = torch.randn(T, H, nope + rope)          # DeepseekV2Attention's q, q_pe a view of it
latent = torch.randn(T, 1, 512 + rope)      # k_pe a view of the latent cache
q_pe, k_pe = q[..., nope:], latent[:, :, 512:]
want_q, want_k = gptj(q_pe.clone()), gptj(k_pe.clone())
got_q, got_k = RotaryEmbedding.forward_cpu(me, torch.arange(T), q_pe, k_pe)
print(json.dumps({"q": float((got_q - want_q).abs().max()), "k": float((got_k - want_k).abs().max()),
                  "shape": list(got_q.shape)}))
"""


@pytest.mark.probe
@pytest.mark.slow
@pytest.mark.network
def test_vllm_0160_cpu_rotary_is_right_for_a_3d_multi_head_query_with_the_shim(tmp_path: Path):
    """The real kernel (vLLM 0.16.0's CPU build): without the shim an 8-head q_pe comes out
    wrong; with it, right, in the caller's shape (tests/probes/test_probe_kimi.py shows the fault)."""
    from driftcheck.envs.managed import managed_env
    from driftcheck.models.builtin import vllm_dir

    python = managed_env("0.16.0").python

    dest = tmp_path / "shims"
    assert [ln.split(":", 1)[0] for ln in prepare(vllm_dir(python), "0.16.0", dest, _shims())] == [
        "cpu-rotary-rows"
    ]

    def run(path: str) -> dict:
        out = subprocess.run(
            [str(python), "-c", ROPE],
            env={"PYTHONPATH": path, "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            check=False,
        )
        return json.loads(out.stdout.strip().splitlines()[-1])

    plain, shimmed = run(""), run(str(dest))
    assert plain["q"] > 0.5  # the fault
    assert shimmed["q"] < 1e-5 and shimmed["k"] < 1e-5 and shimmed["shape"] == [30, 8, 64]
