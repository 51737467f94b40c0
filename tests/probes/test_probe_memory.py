"""The plan's memory estimate per GPU, from a config.json's shape alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from driftcheck.probes.memory import GIB, estimate

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
KIMI = json.loads((FIXTURES / "models" / "kimi-k2.5" / "config.json").read_text())

LLAMA = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 32,
    "intermediate_size": 128,
    "vocab_size": 100,
    "torch_dtype": "float32",
    "max_position_embeddings": 16,
}


def test_dense_gqa_count_is_exact():
    est = estimate(LLAMA, tp=1)
    attn = 64 * 64 + 2 * 64 * 32 + 64 * 64
    mlp = 3 * 64 * 128
    assert est.params == 2 * 100 * 64 + 2 * (attn + mlp)
    assert est.weight_bytes == est.params * 4
    # K and V, one KV head of 32, two layers, float32
    assert est.kv_bytes_per_token == 2 * 2 * 1 * 32 * 4
    assert est.max_model_len == 16


def test_tied_embeddings_and_tp_sharding():
    tied = estimate({**LLAMA, "tie_word_embeddings": True}, tp=2)
    assert tied.params == estimate(LLAMA, tp=2).params - 100 * 64
    assert tied.weights_per_gpu == tied.weight_bytes / 2
    # two KV heads over TP=2: one per rank; one KV head over TP=2 stays one
    assert estimate({**LLAMA, "num_key_value_heads": 2}, tp=2).kv_bytes_per_token == (
        estimate(LLAMA, tp=1).kv_bytes_per_token
    )


def test_kimi_shape_counts_about_a_trillion_parameters():
    est = estimate(KIMI, tp=8)
    # Kimi-K2's published size is about 1.04 T parameters in all (32 B activated).
    assert 1.0e12 < est.params < 1.1e12
    # MLA: the compressed cache (kv_lora_rank + rope dims) on every rank, not split by TP
    assert est.kv_bytes_per_token == 61 * (512 + 64) * 2
    assert est.kv_bytes_per_token == estimate(KIMI, tp=1).kv_bytes_per_token
    assert any("latent" in n for n in est.notes)
    assert any("no quantization_config" in n for n in est.notes)


def test_quantization_ignore_patterns_keep_their_layers_at_the_dtype():
    quant = {
        "quant_method": "compressed-tensors",
        "config_groups": {"g": {"targets": ["Linear"], "weights": {"num_bits": 4}}},
        "ignore": [
            "lm_head",
            "re:.*self_attn.*",
            "re:.*shared_experts.*",
            r"re:.*mlp\.(gate|up|down)_proj",
        ],
    }
    text = dict(KIMI["text_config"])
    plain = estimate({**KIMI, "text_config": text}, tp=8)
    packed = estimate({**KIMI, "text_config": {**text, "quantization_config": quant}}, tp=8)
    experts = 384 * 3 * 7168 * 2048 * 61  # every layer is MoE in this shape
    assert plain.weight_bytes - packed.weight_bytes == pytest.approx(experts * 1.5, rel=1e-9)
    assert packed.weights_per_gpu / GIB < 141  # fits an H200 once the experts are 4-bit
    assert plain.weights_per_gpu / GIB > 141
    everything = {**quant, "ignore": []}
    all4 = estimate({**KIMI, "text_config": {**text, "quantization_config": everything}}, tp=8)
    assert all4.weight_bytes < packed.weight_bytes


def test_lines_name_the_numbers():
    text = "\n".join(estimate(KIMI, tp=8, max_model_len=2048).lines())
    assert "weights per GPU (TP=8)" in text and "one sequence of 2048 tokens" in text


@pytest.mark.network
@pytest.mark.slow
def test_plan_for_the_hub_model_id_reads_its_cached_config(tmp_path: Path, monkeypatch):
    """``--model moonshotai/Kimi-K2.5 --tensor-parallel-size 8 --plan``: the config is read from
    the Hugging Face cache (here a cache holding only our config.json fixture), nothing is
    downloaded, and the plan prints the command, the memory per GPU and the static check."""
    from conftest import run_cli

    snap = tmp_path / "hub" / "models--moonshotai--Kimi-K2.5" / "snapshots" / "0"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(KIMI))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    argv = ["probe", "speculators==0.3.0", "--host", "vllm==0.16.0", "--model"]
    argv += ["moonshotai/Kimi-K2.5", "--tensor-parallel-size", "8", "--plan"]
    result = run_cli(*argv)
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "--model moonshotai/Kimi-K2.5 --tensor-parallel-size 8" in out
    assert f"config: {snap / 'config.json'}" in out
    memory = out.split("memory estimate per GPU", 1)[1].split("checks", 1)[0]
    assert "weights per GPU (TP=8)" in memory and "KiB per token" in memory
    assert "does not implement SupportsEagle3" in out
    assert sorted(p.name for p in snap.iterdir()) == ["config.json"]  # nothing fetched
    as_json = run_cli(*argv, "--format", "json")
    assert as_json.exit_code == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert data["memory"]["tensor_parallel_size"] == 8
    assert data["memory"]["kv_bytes_per_token_per_gpu"] == 61 * (512 + 64) * 2
