"""Tensor parallelism, proven: a run with ``--tensor-parallel-size N>1`` is compared with a TP=1
run of the same client copy (the ``tp-match`` stage, :func:`add_tp_match`).

Every run saves the hidden states it checked (``driver_states.save_states``). A TP=1 run's are
kept in the cache under a key of everything they depend on (:func:`states_key`: the driver's
files, the client copy after its patches, the model, the environment, the layers), so a later
tensor-parallel probe of the same variant reuses them instead of running TP=1 again; otherwise
the harness runs TP=1 itself. The comparison (cosine per token, per sequence and layer) runs in
the target environment (``driver_states.py compare``, torch lives there), and the verdict is
:func:`driftcheck.probes.driver_states.judge_match`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from driftcheck.cache import cache_root
from driftcheck.envs.environment import ProbeEnv
from driftcheck.models.builtin import run_target
from driftcheck.probes.driver_env import DRIVER_FILES
from driftcheck.probes.driver_states import judge_match
from driftcheck.probes.outcome import RunOutcome
from driftcheck.probes.workloads import cosine_min

STATES_FILE = "states.pt"
KEEP = 20  # kept TP=1 runs


def _tree_digest(h: Any, root: Path, *, contents: bool) -> None:
    for path in sorted(root.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        h.update(str(path.relative_to(root)).encode() + b"\0")
        if contents:
            h.update(path.read_bytes())
        else:
            st = path.stat()
            h.update(f"{st.st_size}:{st.st_mtime_ns}".encode())


def states_key(copy_root: Path, env: ProbeEnv, spec: dict, host: Iterable[str] = ()) -> str:
    """What a run's hidden states depend on, as a digest (the tensor parallel size left out);
    ``host``: what else the run changes in the host (the CPU shims' corrections of vLLM's code,
    the model's variables), so states kept before a shim was added are not reused after."""
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for name in DRIVER_FILES:
        h.update((here / name).read_bytes())
    _tree_digest(h, copy_root, contents=True)
    model = Path(spec["model"])
    if model.is_dir():
        _tree_digest(h, model, contents=False)  # weights can be large: names, sizes, times
    keys = ("entry", "model", "layer_ids", "max_model_len", "trust_remote_code")
    facts = [str(env.python), env.host_dist, env.host_version, *(spec.get(k) for k in keys)]
    facts += list(host)
    h.update(json.dumps(facts, default=str).encode())
    return h.hexdigest()[:24]


def _states_dir() -> Path:
    return cache_root() / "probe-states"


def cached_states(key: str) -> tuple[Path, dict] | None:
    """The kept TP=1 states for ``key`` and what is known of their run, or None."""
    folder = _states_dir() / key
    try:
        meta = json.loads((folder / "run.json").read_text())
    except (OSError, ValueError):
        return None
    states = folder / STATES_FILE
    return (states, meta) if states.is_file() else None


def keep_states(key: str, outcome: RunOutcome, states: Path) -> None:
    """Keep a TP=1 run's states (when its hidden-states stage passed); the newest few stay."""
    stage = outcome.stage("hidden-states")
    if not (stage and stage.get("ok")) or not states.is_file():
        return
    base = _states_dir()
    base.mkdir(parents=True, exist_ok=True)
    part = base / f"{key}.part-{os.getpid()}"
    shutil.rmtree(part, ignore_errors=True)
    part.mkdir()
    shutil.copyfile(states, part / STATES_FILE)
    meta = {
        "label": outcome.label,
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
        **_run_facts(outcome),
        "versions": outcome.versions,
    }
    (part / "run.json").write_text(json.dumps(meta, indent=2))
    shutil.rmtree(base / key, ignore_errors=True)
    os.replace(part, base / key)
    kept = sorted((p for p in base.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
    for stale in kept[:-KEEP]:
        shutil.rmtree(stale, ignore_errors=True)


def compare_runs(env: ProbeEnv, work: Path, got: Path, ref: Path, *, timeout: float = 600) -> dict:
    """``driver_states.py compare`` in the target environment: per-pair cosines, or problems."""
    out = got.with_name("tp-match.json")
    args = [str(work / "driver_states.py"), "compare", str(got), str(ref), str(out)]
    try:
        proc = run_target(env.python, args, timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"pairs": [], "problems": [f"the comparison did not run: {exc}"]}
    try:
        return json.loads(out.read_text())
    except (OSError, ValueError):
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"pairs": [], "problems": [f"the comparison failed: {tail}"]}


def _run_facts(run: RunOutcome) -> dict:
    """What the report says of a TP=1 run: how it ended and how it compared with transformers."""
    ref = run.stage("reference") or {}
    return {
        "ok": run.ok,
        "failed_stage": run.failed_stage,
        "reference_min_cosine": ref.get("min_cosine"),
        "seconds": round(run.seconds, 1),
        "log_dir": run.log_dir,
    }


def _which_differs(run: RunOutcome, baseline: dict) -> str | None:
    """Where both runs were compared with transformers and only one matched: which one."""
    mine = (run.stage("reference") or {}).get("min_cosine")
    theirs = baseline.get("reference_min_cosine")
    least = cosine_min(_dtype(run))
    if mine is None or theirs is None or (mine >= least) == (theirs >= least):
        return None
    if mine >= least:
        return f"the TP=1 run is the one that differs from transformers (min cosine {theirs:.4f})"
    return f"this run is the one that differs from transformers (min cosine {mine:.4f})"


def _dtype(run: RunOutcome) -> str | None:
    """The dtype of the run's hidden states (its ``hidden-states`` stage)."""
    return (run.stage("hidden-states") or {}).get("dtype")


def add_tp_match(
    outcome: RunOutcome,
    tensor_parallel_size: int,
    env: ProbeEnv,
    work: Path,
    run_baseline: Callable[[], RunOutcome],
    say: Callable[[str], None],
) -> None:
    """Append the ``tp-match`` stage to a tensor-parallel run whose hidden states passed: the
    states against a TP=1 run's (kept, or run now with ``run_baseline``)."""
    stage = outcome.stage("hidden-states")
    got = Path(outcome.states_file) if outcome.states_file else None
    if not (stage and stage.get("ok")) or got is None or not got.is_file():
        return
    t = time.monotonic()
    kept = cached_states(outcome.states_key) if outcome.states_key else None
    ref: Path | None = None
    if kept is not None:
        ref, meta = kept
        baseline = {"source": "kept", **meta}
    else:
        say(f"running the {outcome.label} client with tensor parallel size 1 (for tp-match)")
        base = run_baseline()
        baseline = {"source": "run", **_run_facts(base)}
        if base.states_file and Path(base.states_file).is_file():
            ref = Path(base.states_file)
    entry: dict = {"name": "tp-match", "tensor_parallel_size": tensor_parallel_size}
    if ref is None:
        where = baseline.get("failed_stage") or "the states"
        verdict: dict[str, Any] = {
            "ok": False,
            "problems": [f"the TP=1 run has no hidden states (failed at {where})"],
        }
    else:
        verdict = judge_match(compare_runs(env, work, got, ref), cosine_min(_dtype(outcome)))
    problems = verdict.pop("problems")
    differs = _which_differs(outcome, baseline) if problems else None
    if differs:
        problems.insert(0, differs)
    entry.update(verdict, baseline=baseline, seconds=round(time.monotonic() - t, 3))
    if problems:
        entry["error"] = {
            "type": "CheckFailed",
            "message": "; ".join(problems),
            "from_worker": False,
        }
    outcome.stages.append(entry)
    if problems and outcome.ok:
        outcome.ok = False
        outcome.failed_stage = "tp-match"
        outcome.error = entry["error"]
