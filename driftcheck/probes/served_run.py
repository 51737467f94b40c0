"""One variant of a served workload's run: the server, then the client's own code against it.

:func:`run_served_variant` starts ``vllm serve`` of the target environment with the workload's
arguments (:meth:`ServedWorkload.server_args`: the layers for this model, a storage folder of
the run's own) on a free loopback port (:class:`~driftcheck.probes.server.Server`), with the
CPU shims its source shows a need for (:mod:`~driftcheck.probes.cpu_shims`) and the flags the
fixes add (a patched run), waits for its health route, runs the served driver
(:mod:`driftcheck.probes.driver_served`) with the client copy first on ``PYTHONPATH``, and
stops the server's whole process group on every way out. The server's start is the run's
first stage (``server-start``), with its time; a server that dies or never becomes healthy
fails there with its log's tail.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from driftcheck.envs.environment import ProbeEnv, clean_env
from driftcheck.models.builtin import ResolvedModel, vllm_dir
from driftcheck.probes import runner
from driftcheck.probes.cpu_shims import prepare
from driftcheck.probes.driver_env import run_environment, shown_env
from driftcheck.probes.gpu_memory import GpuMemorySampler
from driftcheck.probes.options import ProbeOptions
from driftcheck.probes.outcome import RunOutcome, interpret
from driftcheck.probes.served import ServedWorkload
from driftcheck.probes.server import Server, ServerError, free_port
from driftcheck.probes.workloads import COSINE_MIN

Progress = Callable[[str], None]
SERVER_LOG = "server.log"
# A minimal chat template for a model that has none (the built-in tiny models): the render
# route and chat requests need one.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def text_config(model: str) -> dict:
    """The model's text config (``text_config`` of a multimodal one), from its ``config.json``."""
    try:
        cfg = json.loads((Path(model) / "config.json").read_text())
    except (OSError, ValueError):
        return {}
    inner = cfg.get("text_config")
    return inner if isinstance(inner, dict) else cfg


def has_chat_template(model: str) -> bool:
    """Whether the model folder carries a chat template (a hub name: assumed to)."""
    folder = Path(model)
    if not folder.is_dir():
        return True
    if any(folder.glob("chat_template.*")):
        return True
    try:
        return bool(json.loads((folder / "tokenizer_config.json").read_text()).get("chat_template"))
    except (OSError, ValueError):
        return False


def launch_extras(
    model: str,
    launch_flags: list[str],
    trust: bool,
    work: Path,
    *,
    write: bool = True,
    template: bool | None = None,
) -> tuple[list[str], list[str]]:
    """The probe's additions to the server's command line (the fixes' flags,
    ``--trust-remote-code``, a chat template where the model has none, written into ``work``
    unless ``write`` is off; ``template``: whether it has one, None: look) and a shim line for
    each the report lists."""
    extra: list[str] = list(launch_flags)
    shims: list[str] = []
    if launch_flags:
        shims.append(
            f"the fixes' launch flags on the server's command line: {' '.join(launch_flags)}"
        )
    if trust:
        extra.append("--trust-remote-code")
    if not (has_chat_template(model) if template is None else template):
        path = work / "chat_template.jinja"
        if write:
            path.write_text(CHAT_TEMPLATE)
        extra += ["--chat-template", str(path)]
        shims.append(
            f"--chat-template {path.name}: the model has no chat template, and the "
            "workload's chats are rendered by the server"
        )
    return extra, shims


def server_command(
    env: ProbeEnv,
    workload: ServedWorkload,
    model: str,
    layer_ids: list[int],
    storage: Path,
    port: int,
    options: ProbeOptions,
    extra: list[str],
) -> list[str]:
    """The workload's server command in the environment, its arguments, then the probe's."""
    head = workload.command_head(env.python)
    own = ["--host", "127.0.0.1", "--port", str(port)]
    if options.tensor_parallel_size != 1:
        own += ["--tensor-parallel-size", str(options.tensor_parallel_size)]
    if options.max_model_len:
        own += ["--max-model-len", str(options.max_model_len)]
    last = list(options.server_args or [])  # the user's own, last: they win
    return head + workload.server_args(model, layer_ids, str(storage), own + extra + last)


def server_environment(
    env: ProbeEnv,
    resolved: ResolvedModel,
    shim_dir: Path,
    extra_path: list[Path],
    bind_env: dict[str, str],
) -> dict[str, str]:
    """The server's environment: the shims first on its path, the CPU's KV cache size, the
    built-in model's offline mode and needs, and the OpenMP binding of N>1 CPU workers
    (``bind_env``, from :func:`~driftcheck.probes.driver_env.cpu_thread_binding`: vLLM's own
    binding refuses more workers than NUMA nodes, in the server's engine as in process)."""
    server_env = clean_env()
    server_env["PYTHONPATH"] = os.pathsep.join(str(p) for p in [shim_dir, *extra_path])
    for key in ("VLLM_NO_USAGE_STATS", "DO_NOT_TRACK", "TOKENIZERS_PARALLELISM"):
        server_env[key] = "1" if key != "TOKENIZERS_PARALLELISM" else "false"
    server_env["PYTHONUNBUFFERED"] = "1"
    if env.cpu_build:
        server_env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    if resolved.builtin is not None:
        server_env["HF_HUB_OFFLINE"] = server_env["TRANSFORMERS_OFFLINE"] = "1"
    server_env.update(resolved.env)
    server_env.update(bind_env)
    return server_env


def run_served_variant(
    label: str,
    copy_root: Path,
    run_shims: list[str],
    workload: ServedWorkload,
    env: ProbeEnv,
    resolved: ResolvedModel,
    options: ProbeOptions,
    work: Path,
    extra_path: list[Path],
    log_dir: Path,
    say: Progress,
    launch_flags: list[str],
    client_path: Sequence[Path] = (),
    bind_env: dict[str, str] | None = None,
) -> tuple[RunOutcome, dict[str, str]]:
    """Run one variant (the client copy is written and patched already); ``bind_env`` is the
    OpenMP binding of the server's CPU workers (none for one worker)."""
    model = resolved.path
    cfg = text_config(model)
    layers = int(cfg.get("num_hidden_layers") or 0)
    layer_ids = list(options.layer_ids or workload.layers_for(layers))
    storage = work / label / "hidden-states"
    storage.mkdir(parents=True, exist_ok=True)
    trust = options.trust_remote_code or resolved.trust_remote_code
    extra, added = launch_extras(model, launch_flags, trust, work)
    shims = list(run_shims) + added
    if options.server_args:
        shims.append(
            "the probe's --server-args on the server's command line: "
            + " ".join(options.server_args)
        )
    shim_dir = work / label / "server-shims"
    if env.cpu_build:
        shims += prepare(vllm_dir(env.python), env.host_version, shim_dir)
    server_env = server_environment(env, resolved, shim_dir, extra_path, bind_env or {})

    port = free_port()
    cmd = server_command(env, workload, model, layer_ids, storage, port, options, extra)
    (log_dir).mkdir(parents=True, exist_ok=True)
    (log_dir / "server-command.json").write_text(json.dumps(cmd, indent=2))
    started = time.monotonic()
    server = Server(cmd, port=port, log=log_dir / SERVER_LOG, env=server_env, cwd=work)
    result_path = work / label / "result.json"
    data: dict = {}
    res: runner.RunResult | None = None
    start_stage: dict
    client_env: dict[str, str] = {}
    gpu = GpuMemorySampler(log_dir / "server-gpu-memory.csv", enabled=not env.cpu_build)
    with gpu, server:
        say(f"  starting the server on 127.0.0.1:{port} (log: {server.log})")
        try:
            seconds = server.wait_healthy(options.run_timeout)
            start_stage = {"name": "server-start", "ok": True, "seconds": round(seconds, 3)}
            start_stage.update(port=port, argv=cmd[1:])
        except ServerError as exc:
            tail = server.log_tail(40)
            start_stage = {
                "name": "server-start",
                "ok": False,
                "seconds": round(time.monotonic() - started, 3),
                "error": {
                    "type": "ServerError",
                    "message": f"{exc}; {_cause(tail)}",
                    "from_worker": False,
                    "traceback": tail,
                },
            }
        say(f"  stage server-start: {'ok' if start_stage['ok'] else 'FAILED'}")
        if start_stage["ok"]:
            spec = {
                "label": label,
                "client_root": str(copy_root),
                "url": server.url,
                "model": model,
                "layer_ids": layer_ids,
                "trust_remote_code": trust,
                "reference": resolved.builtin is not None,
                "reference_model": resolved.reference_model,
                "cosine_min": COSINE_MIN,
                "result": str(result_path),
                **workload.spec(),
            }
            spec_path = work / label / "served-spec.json"
            spec_path.write_text(json.dumps(spec, indent=2))
            client_env = run_environment(
                copy_root,
                list(client_path),
                workload,
                cpu=env.cpu_build,
                offline=resolved.builtin is not None,
            )
            left = max(60.0, options.run_timeout - (time.monotonic() - started))
            res = runner.run(
                [str(env.python), str(work / "driver_served.py"), str(spec_path)],
                env=client_env,
                cwd=work,
                timeout=left,
                log_dir=log_dir,
                name="client",
                on_line=lambda ln: say(f"  {ln}") if ln.startswith("[driftcheck-probe]") else None,
            )
            try:
                data = json.loads(result_path.read_text())
            except (OSError, ValueError):
                data = {}
    if res is None:
        res = runner.RunResult(None, time.monotonic() - started)
        data = {"stages": [], "finished": True}
    data["stages"] = [start_stage, *data.get("stages", [])]
    required = ("server-start", "import", *(s.stage for s in workload.steps), "states-file")
    outcome = interpret(label, data, res, workload.checks, (*required, "hidden-states"))
    if not start_stage["ok"]:
        outcome.worker_traceback = server.log_tail(80)
    elif not outcome.ok and outcome.failed_stage not in (None, "server-start"):
        outcome.worker_traceback = outcome.worker_traceback or _server_traceback(server)
    outcome.seconds = time.monotonic() - started
    outcome.peak_gpu_memory_mib = gpu.peaks()  # the server's and the client's, as measured
    outcome.shims = shims + list(data.get("shims", []))
    outcome.log_dir = str(log_dir)
    outcome.client_root = str(copy_root)
    start_stage["stopped"] = len(server.reaped)  # the server's processes, stopped at the end
    start_stage["peak_rss_bytes"] = server.peak_rss  # the server's whole tree, sampled
    # The run's peak: the server's and the client's, each sampled over its own tree (they run
    # at the same time, so their sum bounds the probe's tree from above).
    outcome.peak_rss = server.peak_rss + (res.peak_rss if res is not None else 0)
    start_stage["env"] = shown_env(server_env, extra=resolved.env)  # what the server ran with
    outcome.layer_ids = layer_ids
    return outcome, client_env


_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b.*")


def _cause(text: str) -> str:
    """What the log says stopped the server: its last exception line (with the first detail
    line under it, as pydantic's validation errors put the reason there), else its last line."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    for i in range(len(lines) - 1, -1, -1):
        if _EXCEPTION.match(lines[i]):
            detail = next(
                (
                    d.strip()
                    for d in lines[i + 1 : i + 4]
                    if d[:1].isspace() and "further information" not in d
                ),
                "",
            )
            return "the log's error: " + (f"{lines[i]}: {detail}" if detail else lines[i])[:600]
    return f"the log's last line: {lines[-1][-300:] if lines else 'none'}"


def _server_traceback(server: Server) -> str | None:
    """The last traceback in the server's log (an engine failure behind an HTTP error)."""
    from driftcheck.probes.outcome import worker_traceback

    try:
        return worker_traceback(server.log.read_text(errors="replace"))
    except OSError:
        return None
