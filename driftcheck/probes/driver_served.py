"""The served probe's client side: runs the client's own functions against a running server.

Run as a script by the target environment's interpreter (``python driver_served.py SPEC.json``)
next to :mod:`driver` and :mod:`driver_states`, whose result file, error records and
hidden-state checks it shares; it imports nothing from driftcheck. The harness has started the
server (:mod:`driftcheck.probes.server`) and put the client copy first on ``PYTHONPATH``.

Stages, in order (the first failing one ends the run; ``reference`` does not stop it):

``import``        import every function the workload's steps call, from the client copy
``<step>``        each step (``render``, ``generate``, ...), called once per sample of the
                  dataset with the values the spec names (``$url``, ``$openai_client``,
                  ``$model``, ``$messages``, or what an earlier step returned)
``states-file``   each sample's hidden-states file: there, holding the states key (tokens,
                  layers, hidden) for the layers the launch asked for, and token ids equal to
                  the ones the client sent
``hidden-states`` one finite tensor (tokens, hidden size) per layer (driver_states)
``reference``     (tiny model) cosine >= threshold per token and layer against transformers
"""

from __future__ import annotations

import importlib
import os
import re
import string
import sys
import time
from typing import Any

from driver import _cpu, _error, _failure, _Result, _text_config, _versions


class _Values:
    """What ``$name`` means in a step's arguments, for one sample."""

    def __init__(self, spec: dict) -> None:
        self.spec = spec
        self._openai = None

    def provided(self, name: str, sample: dict) -> Any:
        if name == "url":
            return self.spec["url"]
        if name == "model":
            return self.spec["model"]
        if name == "messages":
            return sample["messages"]
        if name == "openai_client":
            if self._openai is None:
                import openai

                self._openai = openai.OpenAI(base_url=self.spec["url"] + "/v1", api_key="EMPTY")
            return self._openai
        return sample["bound"][name]

    def resolve(self, value: object, sample: dict) -> Any:
        if isinstance(value, str) and value.startswith("$") and value[1:].isidentifier():
            return self.provided(value[1:], sample)
        if isinstance(value, str) and "${" in value:
            names = re.findall(r"\$\{(\w+)\}", value)
            return string.Template(value).substitute(
                {n: str(self.provided(n, sample)) for n in names}
            )
        if isinstance(value, list):
            return [self.resolve(v, sample) for v in value]
        if isinstance(value, dict):
            return {k: self.resolve(v, sample) for k, v in value.items()}
        return value


def _bind(step: dict, result: object, bound: dict) -> None:
    names = step.get("returns") or []
    if len(names) == 1:
        bound[names[0]] = result
    elif names:
        values = list(result) if isinstance(result, (list, tuple)) else [result]
        if len(values) != len(names):
            raise TypeError(f"{step['call']} returned {len(values)} values, expected {names}")
        bound.update(zip(names, values))  # noqa: B905 (runs on Python 3.9 too)


def _states(spec: dict, samples: list[dict], layer_ids: list[int]) -> tuple[list, list[str], str]:
    """Each sample's hidden states as driver_states checks them (a list of per-layer tensors),
    what is wrong with the files, and their dtype."""
    import torch
    from safetensors.torch import load_file

    check = spec["validate"]
    key, ids_key = check.get("states-key", "hidden_states"), check.get("token-ids-key")
    results: list[Any] = []
    problems: list[str] = []
    dtype = ""
    for n, sample in enumerate(samples):
        path = str(_Values(spec).resolve(check["file"], sample))
        if not os.path.isfile(path):
            problems.append(f"sample {n}: no hidden-states file {path}")
            results.append({})
            continue
        tensors = load_file(path)
        states = tensors.get(key)
        if states is None:
            problems.append(f"sample {n}: {path} has no {key!r} (keys: {sorted(tensors)})")
            results.append({})
            continue
        dtype = str(states.dtype)
        sent = list(_Values(spec).resolve(check.get("token-ids", "$token_ids"), sample))
        if states.dim() != 3 or tuple(states.shape[:2]) != (len(sent), len(layer_ids)):
            problems.append(
                f"sample {n}: {key} has shape {tuple(states.shape)}, expected "
                f"({len(sent)} tokens, {len(layer_ids)} layers, hidden)"
            )
        if ids_key:
            got = tensors.get(ids_key)
            if got is None or [int(i) for i in got.tolist()] != [int(i) for i in sent]:
                shown = None if got is None else got.tolist()[:12]
                problems.append(
                    f"sample {n}: {ids_key} in the file ({shown}) differ from the client's "
                    f"token ids ({sent[:12]})"
                )
        per_layer = [states[:, j, :] for j in range(states.shape[1])] if states.dim() == 3 else []
        results.append({"hidden_states": per_layer, "input_ids": torch.tensor(sent)})
        sample["path"] = path
    return results, problems, dtype


def run(spec: dict) -> int:

    res = _Result(spec)
    res.data["label"] = spec.get("label")
    res.data["versions"] = _versions()
    res.data["cpu_isa"] = _cpu()
    res.save()

    # import
    t = time.monotonic()
    functions = {}
    root = os.path.realpath(spec["client_root"]) + os.sep
    for step in spec["steps"]:
        module_name, _, name = step["call"].partition(":")
        try:
            module = importlib.import_module(module_name)
            functions[step["call"]] = getattr(module, name)
        except Exception as exc:
            res.stage("import", False, time.monotonic() - t, error=_error(exc))
            return 1
        origin = os.path.realpath(getattr(module, "__file__", "") or "")
        if not origin.startswith(root):
            message = f"{module_name} was imported from {origin}, not from the copy {root}"
            res.stage("import", False, time.monotonic() - t, error=_failure("ProbeError", message))
            return 1
    res.stage("import", True, time.monotonic() - t, functions=sorted(functions))

    text_cfg = _text_config(spec["model"], spec["trust_remote_code"])
    hidden = int(text_cfg.hidden_size)
    layer_ids = list(spec["layer_ids"])
    res.data["layer_ids"], res.data["hidden_size"] = layer_ids, hidden

    # the client's steps
    values = _Values(spec)
    samples = [{"messages": d["messages"], "bound": {}} for d in spec["dataset"]]
    for step in spec["steps"]:
        t = time.monotonic()
        fn = functions[step["call"]]
        skipped = 0
        for n, sample in enumerate(samples):
            try:
                if step.get("if_exists") and not os.path.exists(
                    str(values.resolve(step["if_exists"], sample))
                ):
                    skipped += 1
                    continue
                args = values.resolve(step.get("args", []), sample)
                kwargs = values.resolve(step.get("kwargs", {}), sample)
                _bind(step, fn(*args, **kwargs), sample["bound"])
            except BaseException as exc:
                err = _error(exc)
                err["sample"] = n
                res.stage(step["stage"], False, time.monotonic() - t, call=step["call"], error=err)
                return 1
        res.stage(
            step["stage"],
            True,
            time.monotonic() - t,
            call=step["call"],
            samples=len(samples) - skipped,
            skipped_samples=skipped,
        )

    return check_samples(spec, samples, layer_ids, hidden, res)


def check_samples(spec: dict, samples: list, layer_ids: list, hidden: int, res: _Result) -> int:
    """The stages after the client's steps: each sample's file (``states-file``), the states'
    layers, shape and dtype (``hidden-states``), and the transformers reference, held to the
    threshold of the states' dtype (``reference``); 0 when all pass, else 1."""
    import driver_states as states  # the harness copies it next to this file

    # states-file
    t = time.monotonic()
    results, problems, dtype = _states(spec, samples, layer_ids)
    extra = {"error": _failure("CheckFailed", "; ".join(problems[:8]))} if problems else {}
    files = [s.get("path") for s in samples]
    res.stage("states-file", not problems, time.monotonic() - t, files=files, dtype=dtype, **extra)
    if problems:
        return 1

    # hidden-states
    t = time.monotonic()
    batch = [list(r["input_ids"].tolist()) for r in results]
    problems = states.check_results(batch, results, layer_ids, hidden)
    if problems:
        err = _failure("CheckFailed", "; ".join(problems[:8]))
        res.stage("hidden-states", False, time.monotonic() - t, error=err)
        return 1
    res.stage(
        "hidden-states",
        True,
        time.monotonic() - t,
        layers=layer_ids,
        hidden_size=hidden,
        dtype=dtype,
        tokens=[len(b) for b in batch],
    )

    # reference
    code = 0
    if spec.get("reference"):
        t = time.monotonic()
        try:
            ref = states.reference(spec, batch, results, layer_ids)
            ok, ref["cosine_min"], message = states.judge_reference(
                ref["min_cosine"], dtype, spec["cosine_min"]
            )
            extra = {} if ok else {"error": _failure("CheckFailed", message)}
            res.stage("reference", ok, time.monotonic() - t, **ref, **extra)
            code = 0 if ok else 1
        except Exception as exc:
            res.stage("reference", False, time.monotonic() - t, error=_error(exc))
            code = 1
    return code


if __name__ == "__main__":
    import driver

    sys.stdout.flush()
    rc = driver.main(sys.argv, run)
    sys.stdout.flush()
    os._exit(rc)
