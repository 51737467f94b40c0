"""What the probe driver asks vLLM's workers, and what it makes of their answers.

Like :mod:`driftcheck.probes.driver`, this file runs under the target environment's interpreter
(the harness copies it next to the driver) and imports nothing from driftcheck; torch and vLLM
are imported inside the functions that run in a worker, so driftcheck can import the pure parts
(:func:`origin_facts`, :func:`capture_facts`) too.

The functions whose names start with ``in_worker_`` are sent to every worker through the
executor's ``collective_rpc`` (cloudpickle, by value) and receive the worker wrapper vLLM
passes them. :func:`in_worker_origin` also wraps the workload's *capture method* (the
worker-extension method whose reply carries the hidden states, speculators'
``_get_captured_states``) on each worker, so that every return of it is recorded; and
:class:`RpcLog` records, in the driver, what the client's own ``collective_rpc`` calls of that
method passed and got back. Values are recorded as summaries (shape, dtype, a digest of the
bytes), which makes a reply the driver got comparable with what each worker returned: that is
how the probe tells which workers' replies the client read.
"""

from __future__ import annotations

import os
from typing import Any

_RECORD = "_driftcheck_probe_record"


def summarize(value: Any) -> object:
    """A comparable summary of an RPC value: tensors by shape, dtype and a digest of their
    bytes; lists, tuples and dicts item by item; anything else by its type's name."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "shape") and hasattr(value, "dtype") and hasattr(value, "reshape"):
        import hashlib

        import torch

        raw = value.detach().cpu().contiguous().reshape(-1).view(torch.uint8)
        digest = hashlib.sha1(raw.numpy().tobytes()).hexdigest()[:16]
        return {"shape": list(value.shape), "dtype": str(value.dtype), "sha1": digest}
    if isinstance(value, (list, tuple)):
        return [summarize(v) for v in value]
    if isinstance(value, dict):
        return {str(k): summarize(v) for k, v in value.items()}
    return type(value).__name__


def _inner(worker: object) -> object:
    """The worker behind vLLM's ``WorkerWrapperBase`` (the extension is mixed into its class)."""
    inner = getattr(worker, "worker", None)
    return inner if inner is not None else worker


def _ranks(inner: object) -> dict:
    out: dict = {
        "rank": getattr(inner, "rank", None),
        "local_rank": getattr(inner, "local_rank", None),
    }
    try:
        from vllm.distributed import get_tp_group

        group = get_tp_group()
        out["tp_rank"] = group.rank_in_group
        out["tp_size"] = group.world_size
    except Exception as exc:  # reported: the facts that need the rank say so
        out["tp_error"] = f"{type(exc).__name__}: {exc}"
    return out


def _record(inner: object, method: str) -> list | None:
    """Wrap ``method`` on the worker instance (once) so every return is summarized; the list of
    summaries, or None when the worker has no such method."""
    current = getattr(inner, method, None)
    if current is None or not callable(current):
        return None
    existing = getattr(current, _RECORD, None)
    if existing is not None:
        return existing
    record: list = []

    def recorded(*args: object, **kwargs: object) -> object:
        value = current(*args, **kwargs)
        record.append(summarize(value))
        return value

    setattr(recorded, _RECORD, record)
    setattr(inner, method, recorded)  # an instance attribute: shadows the class's method
    return record


def in_worker_origin(worker: object, capture_method: str) -> dict:
    """In each worker: its process and ranks, where the client's worker-extension module was
    loaded from, the worker's class (the extension mixed in); starts recording the capture
    method."""
    import sys

    inner = _inner(worker)
    name = os.environ.get("DRIFTCHECK_PROBE_WORKER_MODULE", "")
    mod = sys.modules.get(name)
    return {
        "pid": os.getpid(),
        **_ranks(inner),
        "module": name,
        "file": getattr(mod, "__file__", None),
        "mro": [f"{c.__module__}.{c.__qualname__}" for c in type(inner).__mro__],
        "recording": bool(capture_method) and _record(inner, capture_method) is not None,
    }


def in_worker_capture(worker: object, capture_method: str, state_attrs: list[str]) -> dict:
    """In each worker, after the batches: what each call of the capture method returned, and
    whether the extension's state attributes are set now."""
    inner = _inner(worker)
    current = getattr(inner, capture_method, None) if capture_method else None
    record = getattr(current, _RECORD, None)
    attrs = {}
    for attr in state_attrs:
        value = getattr(inner, attr, None)
        attrs[attr] = "unset" if not hasattr(inner, attr) else ("None" if value is None else "set")
    return {
        "pid": os.getpid(),
        **_ranks(inner),
        "returns": list(record) if record is not None else None,
        "attrs": attrs,
    }


class RpcLog:
    """Records the client's ``executor.collective_rpc`` calls of the given methods (in the
    driver, by wrapping the executor instance's method): the arguments that choose the replies
    and a summary of what came back. Everything passes through unchanged."""

    def __init__(self, executor: Any, methods: list[str]) -> None:
        self.calls: list[dict] = []
        self._methods = set(methods)
        original = executor.collective_rpc

        def collective_rpc(method: object, *args: object, **kwargs: object) -> object:
            result = original(method, *args, **kwargs)
            if isinstance(method, str) and method in self._methods:
                self.calls.append(
                    {
                        "method": method,
                        "unique_reply_rank": kwargs.get("unique_reply_rank"),
                        "reply": summarize(result),
                    }
                )
            return result

        executor.collective_rpc = collective_rpc


# -- the facts (pure: also used by driftcheck's tests) -----------------------------------------


def _rank_of(reply: dict) -> int | None:
    """A worker's TP rank (its global rank where the TP group could not be asked)."""
    rank = reply.get("tp_rank")
    return reply.get("rank") if rank is None else rank


def origin_facts(replies: list[dict], client_root: str, tp_size: int) -> list[str]:
    """What is wrong with the workers' origin replies (empty: nothing): one reply per worker,
    TP ranks 0..N-1 once each, the extension loaded from the client copy."""
    problems: list[str] = []
    if len(replies) != tp_size:
        problems.append(f"{len(replies)} worker(s) answered, tensor parallel size is {tp_size}")
    ranks = sorted(r for r in map(_rank_of, replies) if r is not None)
    if len(replies) == tp_size == len(ranks) and ranks != list(range(tp_size)):
        problems.append(f"TP ranks {ranks}, expected {list(range(tp_size))}")
    bad = [
        r.get("file") for r in replies if not (r.get("file") or "").startswith(client_root + os.sep)
    ]
    if bad:
        problems.append(f"worker extension not loaded from the client copy: {bad}")
    return problems


def _holds_states(summary: object) -> bool:
    return summary is not None and summary != [] and summary != {}


def capture_facts(workers: list[dict], calls: list[dict], tp_size: int) -> dict:
    """Which TP ranks captured states (returned something from the capture method), and for
    each of the client's gather calls which ranks' replies it got back: the reply itself when
    it equals one rank's return (one reply, ``as_list`` false), or a list whose items are ranks'
    returns."""
    by_rank = sorted(
        ({**w, "tp_rank": _rank_of(w)} for w in workers if _rank_of(w) is not None),
        key=lambda w: w["tp_rank"],
    )
    captured = sorted(
        {w["tp_rank"] for w in by_rank for r in (w.get("returns") or []) if _holds_states(r)}
    )
    gathers = []
    for n, call in enumerate(calls):
        own = {}
        for w in by_rank:
            rets = w.get("returns") or []
            if n < len(rets):
                own[w["tp_rank"]] = rets[n]
        reply = call.get("reply")
        whole = [rank for rank, ret in own.items() if ret == reply and _holds_states(ret)]
        if whole:
            from_ranks, count = whole[:1], 1
        elif isinstance(reply, list) and reply:
            from_ranks = [
                next((rk for rk, ret in own.items() if ret == item), None) for item in reply
            ]
            count = len(reply)
        else:
            from_ranks, count = [], 0
        gathers.append(
            {
                "method": call.get("method"),
                "unique_reply_rank": call.get("unique_reply_rank"),
                "replies": count,
                "as_list": not whole,  # a list of replies, not the one reply itself
                "from_ranks": from_ranks,
                "with_states": any(r in captured for r in from_ranks if r is not None),
            }
        )
    problems: list[str] = []
    if len(workers) != tp_size:
        problems.append(f"{len(workers)} worker(s) answered, tensor parallel size is {tp_size}")
    if not captured:
        problems.append("no worker returned captured states")
    if not calls:
        problems.append("the client never called the capture method through collective_rpc")
    for g in gathers:
        if not g["with_states"]:
            problems.append(
                f"collective_rpc({g['method']!r}) read replies from ranks {g['from_ranks']}, "
                f"but states were captured on ranks {captured}"
            )
    return {
        "workers": len(workers),
        "tp_ranks": [w["tp_rank"] for w in by_rank],
        "captured_ranks": captured,
        "gathers": gathers,
        "problems": problems,
    }
