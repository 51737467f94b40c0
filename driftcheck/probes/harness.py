"""The probe: run the client's real workload against a real vLLM, unpatched and patched.

For each variant (``unpatched``, and ``patched`` when patches are given or made with ``--fix``)
the harness writes a fresh copy of the client, applies the patches to it, and runs
:mod:`driftcheck.probes.driver` with the target environment's interpreter, in its own process
group, with the copy first on ``PYTHONPATH`` (so vLLM's spawned workers load the worker
extension from the copy too). Whatever the harness must provide because the machine has no GPU
is a *shim*, and every shim is listed in the report. With ``--tensor-parallel-size N>1`` a
variant whose hidden states pass is also compared with a TP=1 run of the same copy
(:mod:`~driftcheck.probes.tensor_parallel`).

The pieces it runs with have their own modules: the options (:mod:`~driftcheck.probes.options`),
workloads and checks (:mod:`~driftcheck.probes.workloads`), the driver's command, environment and
shims (:mod:`~driftcheck.probes.driver_env`), outcomes and their interpretation
(:mod:`~driftcheck.probes.outcome`) and ``--plan`` (:mod:`~driftcheck.probes.probe_plan`).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from driftcheck.cache import cache_root
from driftcheck.envs.disk import in_use, limit_bytes
from driftcheck.envs.environment import ProbeEnv
from driftcheck.errors import UsageError
from driftcheck.models.builtin import (
    DEFAULT_MODEL,
    ResolvedModel,
    recipe,
    resolve_model,
    vllm_dir,
)
from driftcheck.probes import runner
from driftcheck.probes.blame import blame, patch_hunks
from driftcheck.probes.client_deps import client_site, ensure_client_deps
from driftcheck.probes.cpu_shims import load_shims, prepare
from driftcheck.probes.driver_env import (
    cpu_thread_binding,
    driver_command,
    install_driver,
    needs_platform_shim,
    platform_plugin_dir,
    run_environment,
    shown_env,
)
from driftcheck.probes.env_selection import select_env
from driftcheck.probes.gpu_memory import GpuMemorySampler
from driftcheck.probes.options import ProbeOptions, host_spec
from driftcheck.probes.outcome import ProbeReport, RunOutcome, interpret
from driftcheck.probes.patches import (
    LEFT_FILE,
    apply_patches,
    copy_tree,
    ensure_dist_info,
    fix_patches,
    launch_flags,
    read_fixes,
    read_patch_folder,
)
from driftcheck.probes.probe_plan import make_plan
from driftcheck.probes.served import ServedWorkload
from driftcheck.probes.served_run import run_served_variant
from driftcheck.probes.tensor_parallel import STATES_FILE, add_tp_match, keep_states, states_key
from driftcheck.probes.workloads import COSINE_MIN, Workload, workload_for
from driftcheck.sources.specs import parse_spec
from driftcheck.sources.trees import SourceTree, open_tree

# driftcheck.cli imports these from here.
__all__ = ["ProbeOptions", "make_plan", "probe"]

Progress = Callable[[str], None]


# -- running ----------------------------------------------------------------------------------


def probe(options: ProbeOptions, *, progress: Progress | None = None) -> ProbeReport:
    """Run the probe: unpatched, then patched when patches are given (or made with --fix).

    Raises:
        UsageError: Bad options, unknown client workload, patches that do not apply.
        EnvError: The environment cannot be found or built.
    """
    say = progress or (lambda _m: None)
    if options.patches is not None and options.fix:
        raise UsageError("--patches and --fix exclude each other")
    if options.unsafe_fixes and not options.fix:
        raise UsageError("--unsafe-fixes goes with --fix (it chooses which of driftcheck's fixes)")
    host = host_spec(options.host)
    client_spec = parse_spec(options.client)
    tree = open_tree(client_spec)
    workload = workload_for(tree)
    options.check_workload(served=isinstance(workload, ServedWorkload))
    md = tree.metadata
    client_name = md.name if md and md.name else (client_spec.name or workload.entry.split(".")[0])
    client_version = md.version if md and md.version else (client_spec.version or "")

    work = Path(tempfile.mkdtemp(prefix="driftcheck-probe-"))
    held = contextlib.ExitStack()
    try:
        patches: list[Path] = []
        fixes: list[dict] = []
        left: list[dict] = []
        served = isinstance(workload, ServedWorkload)
        if options.patches is not None:
            patches, fixes, left = read_patch_folder(options.patches, served=served)
        elif options.fix:
            against = str(host) if host.kind == "release" else "installed"
            fix_dir = work / "fix-patches"
            patches = fix_patches(
                options.client,
                against,
                fix_dir,
                options.model,
                unsafe=options.unsafe_fixes,
                baseline=options.baseline,
                launch_fixes=served,
            )
            fixes = read_fixes(fix_dir)
            left = read_fixes(fix_dir, LEFT_FILE)
        flags = launch_flags(left) if served else []
        # Fail early on patches that do not apply, before building anything.
        if patches:
            check_dir = work / "patch-check"
            copy_tree(tree, check_dir)
            apply_patches(check_dir, patches)
            shutil.rmtree(check_dir, ignore_errors=True)

        env = select_env(
            options.env,
            host.name or "vllm",
            host.version,
            progress=say,
            cache_limit=limit_bytes(options.client),
        )
        shims: list[str] = []
        extra_path: list[Path] = []
        if needs_platform_shim(env, work):
            shims.append(platform_plugin_dir(work / "shims"))
            extra_path.append(work / "shims")
        if env.cpu_build:
            # The corrections of vLLM's own code its CPU build needs (no distribution record:
            # that is for the server's console entry point).
            source = [s for s in load_shims() if s.kind == "source"]
            host_shims = prepare(
                vllm_dir(env.python), env.host_version, work / "host-shims", source
            )
            if host_shims:
                shims += host_shims
                extra_path.append(work / "host-shims")

        resolved = _resolve_model(options, env, say)
        model, tiny = resolved.path, resolved.builtin is not None
        shims += resolved.shims
        host_facts = list(shims)  # what changes the host's code or setup (not the TP binding)

        tp = options.tensor_parallel_size
        bind_env, bind_shims = cpu_thread_binding(tp, env.python) if env.cpu_build else ({}, [])
        shims += bind_shims
        install_driver(work)
        logs_root = _logs_dir()
        runs: list[RunOutcome] = []
        variants: list[tuple[str, list[Path]]] = [("unpatched", [])]
        variants += [("patched", patches)] if patches or flags else []
        last_env: dict[str, str] = {}

        def run(label: str, variant_patches: list[Path], opts: ProbeOptions) -> tuple:
            return _run_variant(
                label,
                variant_patches,
                tree,
                client_name,
                client_version,
                workload,
                env,
                resolved,
                opts,
                work,
                extra_path,
                shims,
                logs_root / label,
                say,
                bind_env if opts.tensor_parallel_size > 1 else {},
                flags if label.startswith("patched") else [],
                host_facts,
            )

        single = replace(options, tensor_parallel_size=1)  # the TP=1 run tp-match compares with
        # The environment is not evicted while it runs (another probe may be building one).
        held.enter_context(in_use(env.root if env.kind == "managed" else None))
        for label, variant_patches in variants:
            say(f"running the {label} client against {env.host_dist}=={env.host_version}")
            outcome, last_env = run(label, variant_patches, options)
            if tp > 1:

                def baseline(lb: str = label, vp: list[Path] = variant_patches) -> RunOutcome:
                    return run(f"{lb}-tp1", vp, single)[0]

                add_tp_match(outcome, tp, env, work, baseline, say)
            runs.append(outcome)
        report = ProbeReport(
            client=options.client,
            client_version=client_version,
            host=str(host),
            env=env,
            model=model,
            tiny_model=tiny,
            workload=workload,
            shims=shims,
            runs=runs,
            command=driver_command(env.python, Path("WORK")),
            run_env=shown_env(last_env, extra=resolved.env),
            client_name=client_name,
            fixes=fixes,
            left=left,
            hunks=patch_hunks(patches),
        )
        patched = next((r for r in runs if r.label == "patched" and not r.ok), None)
        if patched is not None:
            report.patched_blame = blame(
                patched, host.name or "vllm", fixes=fixes, left=left, hunks=report.hunks
            )
        return report
    finally:
        held.close()
        if not options.keep:
            shutil.rmtree(work, ignore_errors=True)


def _resolve_model(options: ProbeOptions, env: ProbeEnv, say: Progress) -> ResolvedModel:
    """``--model``: a built-in model (generated on first use) or a path or hub name as given."""
    if recipe(options.model) is not None:
        say(f"preparing the built-in model {options.model or DEFAULT_MODEL}")
    return resolve_model(options.model, env.python, cpu=env.cpu_build)


def _logs_dir() -> Path:
    """A fresh folder for this probe's logs (the 20 most recent are kept)."""
    base = cache_root() / "probe-logs"
    base.mkdir(parents=True, exist_ok=True)
    old = sorted(p for p in base.iterdir() if p.is_dir())
    for stale in old[:-19]:
        shutil.rmtree(stale, ignore_errors=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path(tempfile.mkdtemp(prefix=f"{stamp}-", dir=base))


def _run_variant(
    label: str,
    patches: list[Path],
    tree: SourceTree,
    client_name: str,
    client_version: str,
    workload: Workload | ServedWorkload,
    env: ProbeEnv,
    resolved: ResolvedModel,
    options: ProbeOptions,
    work: Path,
    extra_path: list[Path],
    shims: list[str],
    log_dir: Path,
    say: Progress,
    bind_env: dict[str, str],
    launch: list[str],
    host_facts: list[str] | None = None,
) -> tuple[RunOutcome, dict[str, str]]:
    copy_root = (work / label / "client").resolve()
    copy_tree(tree, copy_root)
    run_shims = list(shims)
    note = ensure_dist_info(copy_root, client_name, client_version)
    if note:
        run_shims.append(note)
    applied = apply_patches(copy_root, patches) if patches else []
    if isinstance(workload, ServedWorkload):
        md = tree.metadata
        site = client_site(env, client_name, client_version)
        run_shims += ensure_client_deps(
            env,
            workload.modules[0],
            list(md.requires) if md else [],
            run_environment(copy_root, [], workload, cpu=env.cpu_build, offline=False),
            key=f"{client_name}=={client_version}",
            progress=say,
            target=site,
        )
        outcome, run_env = run_served_variant(
            label,
            copy_root,
            run_shims,
            workload,
            env,
            resolved,
            options,
            work,
            extra_path,
            log_dir,
            say,
            launch,
            [site] if site is not None else [],
            bind_env,
        )
        outcome.patches = applied
        return outcome, run_env
    result_path = work / label / "result.json"
    states_path = work / label / STATES_FILE
    spec = {
        "label": label,
        "client_root": str(copy_root),
        "entry": workload.entry,
        "model": resolved.path,
        "tensor_parallel_size": options.tensor_parallel_size,
        "cpu": env.cpu_build,  # the driver's CPU shims: decided here, so it never asks CUDA
        "layer_ids": options.layer_ids,
        "max_model_len": options.max_model_len,
        "trust_remote_code": options.trust_remote_code or resolved.trust_remote_code,
        "reference": resolved.builtin is not None,
        "reference_model": resolved.reference_model,
        "cosine_min": COSINE_MIN,
        "capture_method": workload.capture_method,
        "state_attrs": list(workload.state_attrs),
        "states": str(states_path),
        "result": str(result_path),
    }
    (work / "spec.json").write_text(json.dumps(spec, indent=2))
    facts = [*(host_facts or []), json.dumps(resolved.env, sort_keys=True)]
    key = states_key(copy_root, env, spec, host=facts)
    offline = resolved.builtin is not None
    run_env = run_environment(copy_root, extra_path, workload, cpu=env.cpu_build, offline=offline)
    run_env.update(resolved.env)
    run_env.update(bind_env)
    md = tree.metadata
    run_shims += ensure_client_deps(
        env,
        workload.entry.split(":", 1)[0],
        list(md.requires) if md else [],
        run_env,
        key=f"{client_name}=={client_version}",
        progress=say,
    )
    cmd = driver_command(env.python, work)
    with GpuMemorySampler(log_dir / "driver-gpu-memory.csv", enabled=not env.cpu_build) as gpu:
        res = runner.run(
            cmd,
            env=run_env,
            cwd=work,
            timeout=options.run_timeout,
            log_dir=log_dir,
            name="driver",
            on_line=lambda ln: say(f"  {ln}") if ln.startswith("[driftcheck-probe]") else None,
        )
    data: dict = {}
    try:
        data = json.loads(result_path.read_text())
    except (OSError, ValueError):
        pass
    outcome = interpret(label, data, res)
    outcome.patches = applied
    outcome.peak_gpu_memory_mib = gpu.peaks()
    outcome.shims = run_shims + list(data.get("shims", []))
    outcome.log_dir = str(log_dir)
    outcome.states_file = str(states_path) if states_path.is_file() else None
    outcome.states_key = key
    outcome.client_root = str(copy_root)
    if options.tensor_parallel_size == 1:
        keep_states(key, outcome, states_path)
    return outcome, run_env
