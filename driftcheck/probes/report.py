"""Probe reports: text (side by side when both variants ran) and JSON."""

from __future__ import annotations

import json
import shlex
from typing import TextIO

from driftcheck.probes.gpu_memory import mib_text
from driftcheck.probes.outcome import ProbeReport, RunOutcome, left_at
from driftcheck.probes.probe_plan import ProbePlan
from driftcheck.probes.served import ServedWorkload


def _cell(run: RunOutcome, stage: str) -> str:
    s = run.stage(stage)
    if s is None:
        if run.failed_stage == stage:
            return f"FAILED ({run.error.get('type', '?') if run.error else '?'})"
        return "-"
    if s.get("skipped"):
        return "skipped"
    if not s.get("ok"):
        err = s.get("error") or {}
        kind = err.get("type", "?").rsplit(".", 1)[-1]
        return f"FAILED ({kind})"
    detail = ""
    if "samples" in s:  # a served workload's step
        skipped = f" ({s['skipped_samples']} skipped)" if s.get("skipped_samples") else ""
        detail = f" {s['samples']} sample(s){skipped}"
    elif stage.startswith("generate"):
        detail = f" {s.get('sequences')} seqs/{s.get('tokens')} tok"
    elif stage == "hidden-states":
        detail = f" {len(s.get('layers') or [])} layers x (tokens, {s.get('hidden_size')}) {s.get('dtype', '')}"
    elif stage == "reference":
        detail = f" min cos {s.get('min_cosine'):.5f}"
        per_layer = s.get("per_layer") or {}
        if len(per_layer) > 1:
            detail += " (" + ", ".join(f"L{k} {v:.4f}" for k, v in per_layer.items()) + ")"
    elif stage == "server-start":
        detail = f" :{s.get('port')}" if s.get("port") else ""
    elif stage == "states-file":
        detail = f" {len(s.get('files') or [])} file(s) {s.get('dtype', '')}"
    elif stage == "worker-origin":
        ranks = s.get("tp_ranks")
        detail = f" {len(s.get('workers') or [])} worker(s)"
        detail += f", TP ranks {_ranks(ranks)}" if ranks else ""
    elif stage == "capture":
        counts = sorted({g.get("replies") for g in s.get("gathers") or []})
        detail = f" states on rank {_ranks(s.get('captured_ranks'))}, {_ranks(counts)} reply"
    elif stage == "tp-match":
        detail = f" vs TP=1 min cos {s.get('min_cosine'):.5f}"
    return f"ok {s.get('seconds', 0):.1f}s{detail}"


def _ranks(ranks: list | None) -> str:
    return ", ".join(str(r) for r in ranks or []) or "none"


def parallel_lines(run: RunOutcome) -> list[str]:
    """What a run showed about its workers: who answered, who captured states, whose replies
    the client's gathers read, and (tensor parallel) how its states compare with TP=1."""
    out: list[str] = []
    origin = run.stage("worker-origin")
    if origin and origin.get("workers"):
        pids = ", ".join(str(w.get("pid")) for w in origin["workers"])
        out.append(
            f"workers: {len(origin['workers'])} answered, TP ranks "
            f"{_ranks(origin.get('tp_ranks'))} (pids {pids})"
        )
    capture = run.stage("capture")
    if capture and not capture.get("skipped"):
        all_ranks = capture.get("tp_ranks") or []
        got = capture.get("captured_ranks") or []
        rest = [r for r in all_ranks if r not in got]
        tail = f" (rank {_ranks(rest)}: no states)" if rest else ""
        out.append(
            f"capture: {capture.get('method')}() returned states on rank {_ranks(got)}{tail}"
        )
        gathers: dict[str, int] = {}
        for g in capture.get("gathers") or []:
            reply = "reply" if g.get("replies") == 1 else "replies"
            got = f"a list of {g.get('replies')} {reply}" if g.get("as_list") else "1 reply itself"
            line = (
                f"collective_rpc({g.get('method')!r}, unique_reply_rank="
                f"{g.get('unique_reply_rank')}) -> {got}, from rank {_ranks(g.get('from_ranks'))}"
            )
            gathers[line] = gathers.get(line, 0) + 1
        for line, n in gathers.items():
            out.append(f"  {line}" + (f" ({n} calls)" if n > 1 else ""))
        attrs = [
            f"rank {w.get('tp_rank')}: " + ", ".join(f"{k} {v}" for k, v in w["attrs"].items())
            for w in capture.get("worker_replies") or []
            if w.get("attrs")
        ]
        if attrs:
            out.append(f"  after the batches: {'; '.join(attrs)}")
    match = run.stage("tp-match")
    if match:
        base = match.get("baseline") or {}
        how = (
            f"kept from a run at {base.get('when')}"
            if base.get("source") == "kept"
            else f"run now, {base.get('seconds')} s"
        )
        if base.get("failed_stage"):
            how += f"; it FAILED at {base['failed_stage']}"
        if base.get("reference_min_cosine") is not None:
            how += f"; its reference min cos {base['reference_min_cosine']:.5f}"
        line = f"tp-match: TP={match.get('tensor_parallel_size')} vs TP=1 ({how})"
        if match.get("min_cosine") is not None:
            layers = ", ".join(f"{k}: {v:.5f}" for k, v in (match.get("per_layer") or {}).items())
            line += (
                f": min cosine {match['min_cosine']:.6f} over {match.get('pairs')} "
                f"sequence x layer pairs ({match.get('tokens')} tokens); per layer {layers}"
            )
        out.append(line)
    return out


def _error_lines(run: RunOutcome) -> list[str]:
    out: list[str] = []
    err = run.error or {}
    origin = " (raised in a vLLM worker)" if err.get("from_worker") else ""
    message = f"{err.get('type', 'error')}: {err.get('message', '')}{origin}".splitlines() or [""]
    out.append(f"  {message[0]}")
    out.extend(f"    {ln}" for ln in message[1:])
    if err.get("client_frame"):
        out.append(f"  client frame: {err['client_frame']}")
    if run.worker_traceback and err.get("from_worker"):
        lines = [ln for ln in run.worker_traceback.splitlines() if ln.strip()]
        frames = [ln.strip() for ln in lines if ln.strip().startswith("File ")]
        out.append(f"  worker traceback {lines[0].split(' Traceback', 1)[0]}:")
        if frames:
            out.append(f"    ... {frames[-1][:220]}")
        out.append(f"    {lines[-1].strip()[:300]}")
    return out


def render_text(report: ProbeReport, out: TextIO) -> None:
    w = out.write
    ver = f" ({report.client_version})" if report.client_version else ""
    w(f"driftcheck probe: {report.client}{ver} against {report.host}\n")
    w(f"  workload  {report.workload.description}\n")
    model = "built-in " if report.tiny_model else ""
    w(f"  model     {model}{report.model}\n")
    w(f"  env       {report.env.describe()}\n")
    for note in report.env.notes:
        w(f"            note: {note}\n")
    shims = _all_shims(report)
    w(f"  shims     {'none' if not shims else ''}\n")
    for s in shims:
        w(f"    - {s}\n")
    w("\n")
    runs = report.runs
    width = 40
    header = "stage".ljust(15) + "".join(r.label.ljust(width) for r in runs)
    w(header.rstrip() + "\n")
    for stage, _ in report.workload.checks:
        if stage == "reference" and not report.tiny_model:
            continue
        if stage == "tp-match" and not any(r.stage(stage) for r in runs):
            continue
        w((stage.ljust(15) + "".join(_cell(r, stage).ljust(width) for r in runs)).rstrip() + "\n")
    w("\n")
    for run in runs:
        verdict = "PASSED" if run.ok else f"FAILED at {run.failed_stage}"
        gpu = f", {mib_text(run.peak_gpu_memory_mib)}" if run.peak_gpu_memory_mib else ""
        w(f"{run.label}: {verdict}  ({run.seconds:.1f} s, peak {run.peak_rss / 1e9:.1f} GB{gpu})\n")
        if run.cpu_isa:
            flags = " ".join(run.cpu_isa.get("flags") or []) or "none"
            w(f"  cpu: {run.cpu_isa.get('isa')} ({run.cpu_isa.get('machine')}; flags {flags})\n")
        if run.patches:
            w(f"  patches applied ({len(run.patches)}):\n")
            for p in run.patches:
                w(f"    {p.name}: {', '.join(p.files)}\n")
        if not run.ok:
            for line in _error_lines(run):
                w(line + "\n")
            if run.label == "patched" and (hit := left_at(run, report.left)):
                w(f"  {left_line(hit)}\n")
        for line in parallel_lines(run):
            w(f"  {line}\n")
        if run.reaped:
            who = ", ".join(
                f"{pid} ({name})" for pid, name in zip(run.reaped, run.reaped_names, strict=False)
            )
            w(f"  reaped {len(run.reaped)} leftover process(es): {who or run.reaped}\n")
        w(f"  logs: {run.log_dir}\n")
    for line in fix_lines(report):
        w(line + "\n")


def fix_lines(report: ProbeReport) -> list[str]:
    """Each applied fix with its safety; an unsafe one with what the workload says of it."""
    fixes = report.fix_verdicts()
    if not fixes:
        return []
    unsafe = sum(1 for f in fixes if f.get("safety") == "unsafe")
    out = [f"fixes applied ({len(fixes)}, {unsafe} unsafe):"]
    for fx in fixes:
        line = f"  {fx.get('file')}:{fx.get('line')}: {fx.get('rule')} ({fx.get('safety')})"
        if fx.get("safety") == "unsafe" and fx.get("workload") == "confirmed":
            line += f": confirmed by the workload on {report.env.host_version}"
        elif fx.get("safety") == "unsafe" and fx.get("workload") == "failed":
            line += f": not confirmed, the patched run failed at {fx.get('failure')}"
        elif fx.get("safety") == "unsafe" and fx.get("workload") == "untested":
            line += f": untested, the patched run failed before it at {fx.get('failure')}"
        out.append(line)
        out.append(f"      {fx.get('description')}")
    if report.left:
        out.append(f"left for a person ({len(report.left)}):")
        out.extend(
            f"  {item.get('file')}:{item.get('line')}: {item.get('rule')}: {item.get('why')}"[:300]
            for item in report.left
        )
    return out


def left_line(item: dict) -> str:
    """A failure the scan saw coming: the finding there that no applied fix addresses."""
    return (
        f"the scan reports this use, left for a person: {item.get('rule')} at "
        f"{item.get('file')}:{item.get('line')} ({item.get('why')})"
    )[:400]


def _all_shims(report: ProbeReport) -> list[str]:
    seen: list[str] = []
    for s in [*report.shims, *(s for r in report.runs for s in r.shims)]:
        if s not in seen:
            seen.append(s)
    return seen


def render_json(report: ProbeReport, out: TextIO) -> None:
    json.dump(report.to_dict(), out, indent=2, default=str)
    out.write("\n")


def render_plan(plan: ProbePlan, out: TextIO) -> None:
    w = out.write
    ver = f" ({plan.client_version})" if plan.client_version else ""
    w(f"driftcheck probe --plan: {plan.client}{ver} against {plan.host} (nothing is run)\n\n")
    w("command\n")
    w(f"  {shlex.join(plan.argv)}\n")
    servers = {label: (server, client) for label, server, client in plan.servers}
    for label, patches in plan.variants:
        if label in servers:
            w(f"  {label} server: {shlex.join(servers[label][0])}\n")
            w(f"  {label} client: {shlex.join(servers[label][1])}\n")
        else:
            w(f"  {label}: {shlex.join(plan.driver_command)}\n")
        for p in patches:
            w(f"    patch {p}\n")
    w(f"  workload: {plan.workload.description}\n")
    if isinstance(plan.workload, ServedWorkload):
        w("    the client's steps, once per sample:\n")
        for step in plan.workload.steps:
            args = [json.dumps(a) for a in step.args]
            args += [f"{k}={json.dumps(v)}" for k, v in step.kwargs.items()]
            when = f" (where {step.if_exists} exists)" if step.if_exists else ""
            w(f"      {step.stage}: {step.call}({', '.join(args)}){when}\n")
        w(f"    {len(plan.workload.dataset)} samples\n\n")
    else:
        w(f"    {plan.workload.entry} (worker extension: {plan.workload.worker_module})\n\n")
    w("environment\n")
    for line in plan.env_lines:
        w(f"  {line}\n")
    w("  variables:\n")
    for k, v in plan.run_env.items():
        w(f"    {k}={v}\n")
    w("  shims:\n" if plan.shims else "  shims: none\n")
    for s in plan.shims:
        w(f"    - {s}\n")
    w("\nmodel\n")
    for line in plan.model_lines:
        w(f"  {line}\n")
    if plan.memory.get("lines"):
        w("\nmemory estimate per GPU (from config.json)\n")
        for line in plan.memory["lines"]:
            w(f"  {line}\n")
    w("\nchecks\n")
    for stage, text in plan.checks:
        w(f"  {stage.ljust(14)} {text}\n")
    w("\nstatic model check (host API, nothing imported)\n")
    if not plan.model_checks:
        served = isinstance(plan.workload, ServedWorkload)
        w("  not done (a served workload's model is the server's)\n" if served else "  not done\n")
    for label, mc in plan.model_checks:
        w(f"  {label} client:\n")
        if mc.get("config_file"):
            w(f"    config: {mc['config_file']}\n")
        for line in mc["lines"]:
            w(f"    [{line['kind']}] {line['text']}\n")
        pred = mc.get("predicted_failure")
        w(f"    => {'the client will hit: ' + pred if pred else 'no problem found statically'}\n")
    for n in plan.notes:
        w(f"\nnote: {n}\n")


def render_plan_json(plan: ProbePlan, out: TextIO) -> None:
    json.dump(plan.to_dict(), out, indent=2, default=str)
    out.write("\n")
