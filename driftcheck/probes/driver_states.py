"""The hidden states a probe run produced: checked (:func:`check_results`, and against a
transformers forward pass of the same weights, :func:`reference`), kept
(:func:`save_states`) and compared between two runs (:func:`compare_states`, judged by
:func:`judge_match`).

This file runs under the target environment's interpreter (the harness copies it next to the
driver, which imports it; ``python driver_states.py compare GOT REF OUT`` compares two saved runs)
and imports nothing from driftcheck. torch is imported inside the functions that need it, so
driftcheck imports the pure parts (:func:`judge_match`) as well.

A saved run is one ``torch.save`` file: ``{"layer_ids": [...], "input_ids": [[ids per sequence]
per batch], "states": [[[tensor per layer] per sequence] per batch]}``.
"""

from __future__ import annotations

import json
import sys


def check_results(
    batch: list[list[int]], results: object, layer_ids: list[int], hidden: int
) -> list[str]:
    """What is wrong with one ``generate()`` result (empty: nothing): one item per sequence, one
    finite tensor of shape (tokens, hidden size) per requested layer, the request's input ids."""
    import torch

    problems: list[str] = []
    if not isinstance(results, list) or len(results) != len(batch):
        n = len(results) if isinstance(results, list) else type(results).__name__
        return [f"expected {len(batch)} results (one per sequence), got {n}"]
    for i, (ids, item) in enumerate(zip(batch, results)):  # noqa: B905 (runs on Python 3.9 too)
        states = item.get("hidden_states") if isinstance(item, dict) else None
        if not isinstance(states, (list, tuple)):
            problems.append(f"sequence {i}: no list of hidden states ({type(states).__name__})")
            continue
        if len(states) != len(layer_ids):
            problems.append(
                f"sequence {i}: {len(states)} hidden-state tensors for {len(layer_ids)} "
                f"requested layers {layer_ids}"
            )
        got_ids = item.get("input_ids")
        if got_ids is not None and list(torch.as_tensor(got_ids).tolist()) != list(ids):
            problems.append(f"sequence {i}: input_ids do not match the request")
        for j, t in enumerate(states):
            if not isinstance(t, torch.Tensor):
                problems.append(f"sequence {i} layer #{j}: not a tensor ({type(t).__name__})")
                continue
            if tuple(t.shape) != (len(ids), hidden):
                problems.append(
                    f"sequence {i} layer #{j}: shape {tuple(t.shape)}, expected "
                    f"({len(ids)}, {hidden})"
                )
            if not torch.isfinite(t.float()).all():
                problems.append(f"sequence {i} layer #{j}: non-finite values")
    return problems


def reference(spec: dict, batch: list[list[int]], results: list, layer_ids: list[int]) -> dict:
    """Cosine similarity per token against a transformers forward pass of the same weights."""
    import torch
    import torch.nn.functional as F
    from transformers import AutoModelForCausalLM

    # A built-in model may name a plain transformers model of its text weights to compare with.
    model = AutoModelForCausalLM.from_pretrained(
        spec.get("reference_model") or spec["model"],
        torch_dtype=torch.float32,
        trust_remote_code=spec["trust_remote_code"],
    )
    model.eval()
    layers = model.model.layers
    n_layers = len(layers)
    captured: dict[int, torch.Tensor] = {}

    def hook(idx: int):  # noqa: ANN202
        def fn(_mod, _inp, out):  # noqa: ANN001, ANN202
            captured[idx] = (out[0] if isinstance(out, tuple) else out).detach()

        return fn

    # Layer id k names the output of decoder layer k (``output``, the in-process workload's
    # capture) or the residual stream after k decoder layers (``after``: 0 is the embeddings,
    # vLLM's extract_hidden_states): as a count of layers run, ``after[k]``.
    shift = 0 if spec.get("layer_index") == "after" else 1
    after = {layer: layer + shift for layer in layer_ids}
    hooked = sorted({a - 1 for a in after.values() if a >= 1})
    handles = [layers[i].register_forward_hook(hook(i)) for i in hooked]
    worst = 1.0
    per_layer: dict[str, float] = {}
    try:
        for ids, item in zip(batch, results):  # noqa: B905 (runs on Python 3.9 too)
            captured.clear()
            with torch.no_grad():
                out = model(torch.tensor([ids]), output_hidden_states=True)
            for j, layer in enumerate(layer_ids):
                # output_hidden_states[n] is the stream after n decoder layers, except after the
                # last one, where transformers reports it after the final norm: use the hook.
                ran = after[layer]
                ref = out.hidden_states[ran][0] if ran < n_layers else captured[ran - 1][0]
                got = item["hidden_states"][j].float()
                cos = F.cosine_similarity(got, ref.float(), dim=-1)
                low = float(cos.min())
                per_layer[str(layer)] = min(per_layer.get(str(layer), 1.0), low)
                worst = min(worst, low)
    finally:
        for h in handles:
            h.remove()
    return {
        "min_cosine": round(worst, 6),
        "per_layer": {k: round(v, 6) for k, v in per_layer.items()},
    }


def judge_reference(worst: float, dtype: str, limits: dict) -> tuple[bool, float, str]:
    """(ok, threshold, message): the lowest cosine against transformers held to the threshold
    of the states' dtype (``limits``: ``workloads.COSINE_MIN``, which says why)."""
    least = limits.get(dtype, limits["default"])
    message = f"min cosine {worst:.4f} < {least} ({dtype}) against transformers"
    return worst >= least, least, message


def save_states(path: str, batches: list, outputs: list, layer_ids: list[int]) -> None:
    """Keep a run's hidden states (checked ones) for a later comparison."""
    import torch

    states = [[list(item["hidden_states"]) for item in out] for out in outputs]
    torch.save({"layer_ids": list(layer_ids), "input_ids": batches, "states": states}, path)


def compare_states(got_path: str, ref_path: str) -> dict:
    """Per batch, sequence and layer: the lowest cosine similarity over the tokens between two
    saved runs of the same batches; ``problems`` where they cannot be compared."""
    import torch
    import torch.nn.functional as F

    got = torch.load(got_path, weights_only=False)
    ref = torch.load(ref_path, weights_only=False)
    problems: list[str] = []
    pairs: list[dict] = []
    if got["layer_ids"] != ref["layer_ids"]:
        problems.append(f"layers {got['layer_ids']} vs {ref['layer_ids']}")
    if got["input_ids"] != ref["input_ids"]:
        problems.append("the runs were given different batches")
    if problems:
        return {"pairs": pairs, "problems": problems}
    layers = got["layer_ids"]
    for b, (g_batch, r_batch) in enumerate(zip(got["states"], ref["states"]), start=1):  # noqa: B905
        for s, (g_seq, r_seq) in enumerate(zip(g_batch, r_batch)):  # noqa: B905
            for layer, g, r in zip(layers, g_seq, r_seq):  # noqa: B905
                where = f"batch {b} sequence {s} layer {layer}"
                if tuple(g.shape) != tuple(r.shape):
                    problems.append(f"{where}: shape {tuple(g.shape)} vs {tuple(r.shape)}")
                    continue
                cos = F.cosine_similarity(g.float(), r.float(), dim=-1)
                pairs.append(
                    {
                        "batch": b,
                        "sequence": s,
                        "layer": layer,
                        "tokens": int(g.shape[0]),
                        "min_cosine": round(float(cos.min()), 6),
                    }
                )
    return {"pairs": pairs, "problems": problems}


def judge_match(compared: dict, threshold: float) -> dict:
    """The verdict on a comparison: every (sequence, layer) pair at or above ``threshold`` on
    every token, nothing that could not be compared. Returns ``ok``, ``min_cosine``, the lowest
    per layer, how many (sequence, layer) pairs and how many tokens (of all sequences) were
    compared, and the problems."""
    pairs = compared.get("pairs") or []
    problems = list(compared.get("problems") or [])
    per_layer: dict[str, float] = {}
    for p in pairs:
        key = str(p["layer"])
        per_layer[key] = min(per_layer.get(key, 1.0), p["min_cosine"])
    worst = min((p["min_cosine"] for p in pairs), default=None)
    low = [p for p in pairs if p["min_cosine"] < threshold]
    for p in low[:4]:
        problems.append(
            f"batch {p['batch']} sequence {p['sequence']} layer {p['layer']}: "
            f"min cosine {p['min_cosine']:.4f} < {threshold}"
        )
    if not pairs and not problems:
        problems.append("nothing to compare")
    return {
        "ok": not problems,
        "min_cosine": worst,
        "per_layer": per_layer,
        "pairs": len(pairs),
        "tokens": sum({(p["batch"], p["sequence"]): p["tokens"] for p in pairs}.values()),
        "problems": problems,
    }


def main(argv: list[str]) -> int:
    if len(argv) != 5 or argv[1] != "compare":
        print("usage: driver_states.py compare GOT REF OUT", file=sys.stderr)
        return 2
    result = compare_states(argv[2], argv[3])
    with open(argv[4], "w") as f:
        json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
