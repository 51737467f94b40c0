"""A memory estimate per GPU for ``probe --plan``, from the model's ``config.json`` alone.

Parameters are counted from the config's shape (Hugging Face key names): embeddings and the LM
head, attention per layer (multi-head, grouped-query, or DeepSeek's multi-head latent attention
when ``kv_lora_rank`` is set), the MLP per layer (dense, or mixture of experts: routed and shared
experts and the router, with ``first_k_dense_replace`` dense layers first), and a vision tower
when ``vision_config`` gives its width and depth. Weights take the config's dtype; a
``quantization_config`` (compressed-tensors ``config_groups`` with ``num_bits``, its ``ignore``
patterns matched against the layer names; or ``fp8``) sets the bytes of the linear weights it
covers. Quantization scales and norms are left out (a few per cent at most).

Per GPU: tensor parallelism shards every linear layer and the vocabulary; the KV cache is
sharded over KV heads, except multi-head latent attention's compressed cache, which every rank
holds whole (``kv_lora_rank + qk_rope_head_dim`` values per token and layer).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1}
GIB = 1024**3


@dataclass
class MemoryEstimate:
    """Bytes per GPU, with what they were computed from."""

    tensor_parallel_size: int
    params: int = 0
    weight_bytes: int = 0
    kv_bytes_per_token: int = 0
    max_model_len: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def weights_per_gpu(self) -> float:
        return self.weight_bytes / self.tensor_parallel_size

    @property
    def kv_per_sequence(self) -> int:
        return self.kv_bytes_per_token * self.max_model_len

    def lines(self) -> list[str]:
        tp = self.tensor_parallel_size
        out = [
            f"parameters: {_count(self.params)}, weights {_size(self.weight_bytes)} in all",
            f"weights per GPU (TP={tp}): {_size(self.weights_per_gpu)}",
            f"KV cache per GPU: {_size(self.kv_bytes_per_token)} per token; "
            f"{_size(self.kv_per_sequence)} for one sequence of {self.max_model_len} tokens",
            f"per GPU for weights and one such sequence: "
            f"{_size(self.weights_per_gpu + self.kv_per_sequence)} (activations and CUDA graphs "
            "come on top)",
        ]
        return out + [f"note: {n}" for n in self.notes]

    def to_dict(self) -> dict:
        return {
            "tensor_parallel_size": self.tensor_parallel_size,
            "parameters": self.params,
            "weight_bytes": self.weight_bytes,
            "weight_bytes_per_gpu": int(self.weights_per_gpu),
            "kv_bytes_per_token_per_gpu": self.kv_bytes_per_token,
            "max_model_len": self.max_model_len,
            "kv_bytes_per_sequence_per_gpu": self.kv_per_sequence,
            "notes": list(self.notes),
        }


def _count(n: float) -> str:
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{int(n)}"


def _size(n: float) -> str:
    for unit, size in (("GiB", GIB), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} bytes"


class _Quant:
    """Bytes per weight of a linear layer, by its name."""

    def __init__(self, config: dict, dtype_bytes: int, notes: list[str]) -> None:
        q = config.get("quantization_config") or {}
        self.default = dtype_bytes
        self.bytes: float | None = None
        self.ignore: list[str] = []
        if q.get("quant_method") == "fp8":
            self.bytes = 1
        for group in (q.get("config_groups") or {}).values():
            bits = ((group or {}).get("weights") or {}).get("num_bits")
            if isinstance(bits, int):
                self.bytes = bits / 8
        if self.bytes is not None:
            self.ignore = [str(p) for p in q.get("ignore") or []]
            notes.append(
                f"quantization_config: linear weights at {self.bytes * 8:g} bits, "
                f"except {len(self.ignore)} ignored pattern(s); scales not counted"
            )
        else:
            notes.append(f"no quantization_config: every weight at {dtype_bytes} bytes")

    def of(self, name: str) -> float:
        if self.bytes is None:
            return self.default
        for pat in self.ignore:
            hit = re.fullmatch(pat[3:], name) if pat.startswith("re:") else name == pat
            if hit:
                return self.default
        return self.bytes


def estimate(config: dict, tp: int, max_model_len: int | None = None) -> MemoryEstimate:
    """The estimate for ``config`` (a parsed ``config.json``) at tensor parallel ``tp``."""
    nested = config.get("text_config")
    text = nested if isinstance(nested, dict) else config
    out = MemoryEstimate(tensor_parallel_size=max(1, tp))
    dtype = str(text.get("torch_dtype") or config.get("torch_dtype") or "bfloat16")
    size = DTYPE_BYTES.get(dtype, 2)
    if dtype not in DTYPE_BYTES:
        out.notes.append(f"dtype {dtype!r} not known: counted as 2 bytes")
    quant = _Quant({**text, **config} if "quantization_config" in config else text, size, out.notes)
    h = int(text.get("hidden_size") or 0)
    n_layers = int(text.get("num_hidden_layers") or 0)
    vocab = int(text.get("vocab_size") or 0)
    heads = int(text.get("num_attention_heads") or 1)
    kv_heads = int(text.get("num_key_value_heads") or heads)
    head_dim = int(text.get("head_dim") or (h // heads if heads else 0))
    total = 0.0
    params = 0

    def add(name: str, count: int, linear: bool = True) -> None:
        nonlocal total, params
        params += count
        total += count * (quant.of(name) if linear else size)

    add("model.embed_tokens", vocab * h, linear=False)
    if not text.get("tie_word_embeddings", config.get("tie_word_embeddings", False)):
        add("lm_head", vocab * h)
    kv_rank = int(text.get("kv_lora_rank") or 0)
    q_rank = int(text.get("q_lora_rank") or 0)
    nope, rope = int(text.get("qk_nope_head_dim") or 0), int(text.get("qk_rope_head_dim") or 0)
    v_dim = int(text.get("v_head_dim") or head_dim)
    experts = int(text.get("n_routed_experts") or text.get("num_local_experts") or 0)
    shared = int(text.get("n_shared_experts") or 0)
    moe_i = int(text.get("moe_intermediate_size") or 0)
    dense_i = int(text.get("intermediate_size") or 4 * h)
    first_dense = int(text.get("first_k_dense_replace") or 0)
    for i in range(n_layers):
        p = f"model.layers.{i}"
        if kv_rank:
            qk = nope + rope
            if q_rank:
                add(f"{p}.self_attn.q_a_proj", h * q_rank)
                add(f"{p}.self_attn.q_b_proj", q_rank * heads * qk)
            else:
                add(f"{p}.self_attn.q_proj", h * heads * qk)
            add(f"{p}.self_attn.kv_a_proj_with_mqa", h * (kv_rank + rope))
            add(f"{p}.self_attn.kv_b_proj", kv_rank * heads * (nope + v_dim))
            add(f"{p}.self_attn.o_proj", heads * v_dim * h)
        else:
            add(f"{p}.self_attn.q_proj", h * heads * head_dim)
            add(f"{p}.self_attn.k_proj", h * kv_heads * head_dim)
            add(f"{p}.self_attn.v_proj", h * kv_heads * head_dim)
            add(f"{p}.self_attn.o_proj", heads * head_dim * h)
        if experts and moe_i and i >= first_dense:
            add(f"{p}.mlp.gate", h * experts, linear=False)
            for name in ("gate_proj", "up_proj", "down_proj"):
                # One routed expert's name stands for all: they share their name pattern.
                add(f"{p}.mlp.experts.0.{name}", experts * h * moe_i)
                if shared:
                    add(f"{p}.mlp.shared_experts.{name}", shared * h * moe_i)
        else:
            for name in ("gate_proj", "up_proj", "down_proj"):
                add(f"{p}.mlp.{name}", h * dense_i)
    vision = config.get("vision_config") if isinstance(config.get("vision_config"), dict) else None
    if vision and vision.get("hidden_size") and vision.get("num_hidden_layers"):
        vh = int(vision["hidden_size"])
        vi = int(vision.get("intermediate_size") or 4 * vh)
        count = int(vision["num_hidden_layers"]) * (4 * vh * vh + 2 * vh * vi)
        add("vision_tower", count, linear=False)
        out.notes.append(f"vision tower: {count / 1e9:.2f} B parameters from its width and depth")
    out.params = params
    out.weight_bytes = int(total)
    if kv_rank:
        out.kv_bytes_per_token = n_layers * (kv_rank + rope) * size
        out.notes.append("multi-head latent attention: every TP rank holds the whole KV cache")
    else:
        out.kv_bytes_per_token = n_layers * 2 * max(1, kv_heads // out.tensor_parallel_size)
        out.kv_bytes_per_token *= head_dim * size
    out.max_model_len = int(max_model_len or text.get("max_position_embeddings") or 2048)
    return out
