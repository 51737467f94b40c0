"""``driftcheck probe --plan``: :class:`ProbePlan` and :func:`make_plan`, which describe a probe
run (environment, variants and their patches, the driver's command and environment variables,
shims, model, checks, and the static model check) without running, importing or building
anything. It is kept apart from the harness, which runs; the static model check itself is
:mod:`driftcheck.probes.plan`.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from driftcheck.errors import UsageError
from driftcheck.probes.driver_env import (
    cpu_thread_binding,
    driver_command,
    run_environment,
    shown_env,
)
from driftcheck.probes.env_selection import select_env
from driftcheck.probes.envs import ProbeEnv
from driftcheck.probes.managed_envs import build_plan
from driftcheck.probes.options import ProbeOptions, host_spec
from driftcheck.probes.patches import apply_patches, copy_tree, fix_patches, patch_files
from driftcheck.probes.workloads import CHECKS, Workload, workload_for
from driftcheck.sources.specs import PackageSpec, parse_spec
from driftcheck.sources.trees import open_tree

# -- planning ---------------------------------------------------------------------------------


@dataclass
class ProbePlan:
    """What ``driftcheck probe --plan`` prints: nothing is run, imported or built."""

    argv: list[str]
    client: str
    client_version: str
    host: str
    workload: Workload
    env_lines: list[str]
    env_problem: str | None
    variants: list[tuple[str, list[str]]]  # label, patch descriptions
    driver_command: list[str]
    run_env: dict[str, str]
    shims: list[str]
    model_lines: list[str]
    checks: list[tuple[str, str]]
    model_checks: list[tuple[str, dict]] = field(default_factory=list)  # label, ModelCheck dict
    notes: list[str] = field(default_factory=list)
    #: The memory estimate per GPU (``lines`` to print, and the numbers).
    memory: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "argv": self.argv,
            "client": {"spec": self.client, "version": self.client_version},
            "host": self.host,
            "workload": self.workload.entry,
            "environment": self.env_lines,
            "environment_problem": self.env_problem,
            "variants": [{"label": lab, "patches": p} for lab, p in self.variants],
            "driver_command": self.driver_command,
            "run_env": self.run_env,
            "shims": self.shims,
            "model": self.model_lines,
            "checks": [{"stage": s, "check": c} for s, c in self.checks],
            "model_check": [{"variant": lab, **mc} for lab, mc in self.model_checks],
            "memory": {k: v for k, v in self.memory.items() if k != "lines"},
            "notes": self.notes,
        }


def make_plan(options: ProbeOptions, argv: list[str]) -> ProbePlan:
    """Describe the probe run without running, importing or building anything."""
    from driftcheck.host.load import load_host
    from driftcheck.probes.builtin_models import recipe
    from driftcheck.probes.envs import EnvError, has_gpu
    from driftcheck.probes.plan import check_model, client_needs

    if options.patches is not None and options.fix:
        raise UsageError("--patches and --fix exclude each other")
    host = host_spec(options.host)
    client_spec = parse_spec(options.client)
    tree = open_tree(client_spec)
    workload = workload_for(tree)
    options.check_workload(served=not isinstance(workload, Workload))
    if not isinstance(workload, Workload):
        raise UsageError(
            f"--plan describes in-process workloads; {tree.label}'s is served "
            f"({workload.name}): run the probe without --plan"
        )
    md = tree.metadata
    client_version = md.version if md and md.version else (client_spec.version or "")
    notes: list[str] = []

    env: ProbeEnv | None = None
    env_problem = None
    try:
        env = select_env(options.env, host.name or "vllm", host.version, build=False)
        env_lines = plan_env_description(env)
    except (UsageError, EnvError) as exc:
        env_problem = str(exc)
        env_lines = [f"PROBLEM: {exc}"]

    gpu = has_gpu()
    cpu = env.cpu_build if env is not None else not gpu
    shims: list[str] = []
    if cpu:
        shims.append(
            "torch.cuda.mem_get_info() answered from VLLM_CPU_KVCACHE_SPACE "
            "(when torch sees no GPU)"
        )
        if env is not None and env.kind == "managed" and env.root is not None:
            cached = env.root / "driftcheck-platform.json"
            if cached.exists():
                try:
                    if json.loads(cached.read_text()).get("needs_shim"):
                        shims.append(
                            "vllm.platform_plugins entry point -> CpuPlatform (needed by this env)"
                        )
                except (OSError, ValueError):
                    pass
            else:
                shims.append(
                    "vllm.platform_plugins entry point -> CpuPlatform, if this "
                    "vllm-cpu's platform detection needs it (decided at run time)"
                )
    if md is None or not any(f.endswith(".dist-info/METADATA") for f in tree.files()):
        shims.append("a minimal .dist-info for the client copy (its source has none)")

    # patches
    patch_desc: list[str] = []
    patch_paths: list[Path] = []
    if options.patches is not None:
        from driftcheck.probes.patches import patch_targets

        patch_paths = patch_files(options.patches)
        for p in patch_paths:
            patch_desc.append(
                f"{p.name}: {', '.join(patch_targets(p.read_text(errors='replace')))}"
            )
    elif options.fix:
        from driftcheck.probes.patches import patch_targets

        against = str(host) if host.kind == "release" else "installed"
        fix_dir = Path(tempfile.mkdtemp(prefix="driftcheck-plan-fix-"))
        try:
            # Static, like a scan: the plan shows the patches --fix would apply.
            patch_paths = fix_patches(
                options.client, against, fix_dir, options.model, unsafe=options.unsafe_fixes
            )
            for p in patch_paths:
                targets = patch_targets(p.read_text(errors="replace"))
                patch_desc.append(f"{p.name}: {', '.join(targets)} (from driftcheck fix)")
        except UsageError as exc:
            patch_desc.append(f"--fix would fail: {exc}")
            notes.append(str(exc))
    variants = [("unpatched", [])] + ([("patched", patch_desc)] if patch_desc else [])

    rec = recipe(options.model)
    tiny = rec is not None
    if rec is not None:
        model_lines, model_arg, config = _builtin_model_lines(rec)
    else:
        model_lines = [f"{options.model}"]
        model_arg = options.model
        config = None
    model_lines.append(f"tensor parallel size {options.tensor_parallel_size}")
    if options.trust_remote_code:
        model_lines.append("trust remote code: yes")
    elif rec is not None and rec.TRUST_REMOTE_CODE:
        model_lines.append("trust remote code: yes (the built-in model's own configuration code)")
    else:
        model_lines.append("trust remote code: no")
    model_lines.append(
        f"layers: {options.layer_ids}"
        if options.layer_ids
        else "layers: the client's default choice"
    )

    work = Path(tempfile.gettempdir()) / "driftcheck-probe-XXXX"
    copy_root = work / "unpatched" / "client"
    extra = [work / "shims"] if any("platform_plugins" in s for s in shims) else []
    model_env = {var: value for var, value, _, _ in rec.CPU_NEEDS} if rec and cpu else {}
    tp = options.tensor_parallel_size
    bind_env: dict[str, str] = {}
    if cpu and env is not None:
        bind_env, bind_shims = cpu_thread_binding(tp, env.python)
        shims += bind_shims
    run_env = run_environment(copy_root, extra, workload, cpu=cpu, offline=tiny)
    run_env = shown_env({**run_env, **model_env, **bind_env}, extra=model_env)
    python = env.python if env is not None else Path("PYTHON")
    command = driver_command(python, work)

    checks = [
        (s, c) for s, c in CHECKS if (tiny or s != "reference") and (tp > 1 or s != "tp-match")
    ]

    # static model check, from the host API (nothing imported)
    model_checks: list[tuple[str, dict]] = []
    version = host.version or (env.host_version if env is not None else None)
    if version is None:
        notes.append(
            "no host version known: the static model check needs --host vllm==X "
            "or an environment with vLLM"
        )
    else:
        if host.kind == "installed" and env is not None and env.kind == "current":
            # Read this environment's own vLLM files (a local or dev build has no release).
            source = PackageSpec(kind="installed", name=env.host_dist)
        else:
            source = parse_spec(f"vllm=={version}")
        try:
            api = load_host(source)
        except Exception as exc:  # a fetch problem: report, do not fail the plan
            notes.append(f"static model check skipped: cannot load vllm=={version} ({exc})")
            api = None
        if api is not None:
            rel = tree.module_file(workload.worker_module)
            text = tree.read_text(rel) if rel else None
            mc = check_model(api, model_arg, client_needs(rel, text), config=config)
            model_checks.append(("unpatched", mc.to_dict()))
            if patch_paths and rel:
                check_dir = Path(tempfile.mkdtemp(prefix="driftcheck-plan-"))
                try:
                    copy_tree(tree, check_dir)
                    apply_patches(check_dir, patch_paths)
                    patched_text = (check_dir / rel).read_text()
                    mc2 = check_model(
                        api, model_arg, client_needs(rel, patched_text), config=config
                    )
                    model_checks.append(("patched", mc2.to_dict()))
                finally:
                    shutil.rmtree(check_dir, ignore_errors=True)
    if options.fix:
        shutil.rmtree(fix_dir, ignore_errors=True)
    memory = _memory(model_arg, config, options, notes)
    return ProbePlan(
        argv=argv,
        client=options.client,
        client_version=client_version,
        host=str(host),
        workload=workload,
        env_lines=env_lines,
        env_problem=env_problem,
        variants=variants,
        driver_command=command,
        run_env=run_env,
        shims=shims,
        model_lines=model_lines,
        checks=checks,
        model_checks=model_checks,
        notes=notes,
        memory=memory,
    )


def _memory(model: str, config: dict | None, options: ProbeOptions, notes: list[str]) -> dict:
    """The memory estimate per GPU from the model's config (read here; nothing downloaded)."""
    from driftcheck.model_configs import find_config
    from driftcheck.probes.memory import estimate

    if config is None:
        path = find_config(model)
        try:
            config = json.loads(path.read_text()) if path is not None else None
        except (OSError, ValueError):
            config = None
    if not isinstance(config, dict):
        notes.append(f"no memory estimate: no config.json for {model} on this machine")
        return {}
    est = estimate(config, options.tensor_parallel_size, options.max_model_len)
    return {"lines": est.lines(), **est.to_dict()}


def _builtin_model_lines(rec: ModuleType) -> tuple[list[str], str, dict]:
    """A built-in model for ``--plan``: its lines, its folder, and its config (with placeholder
    token ids: the static check reads only the architecture)."""
    from driftcheck.probes.builtin_models import model_dir

    where = model_dir(rec)
    state = "generated" if (where / "ready.json").exists() else "generated on first use"
    lines = [f"{rec.NAME}: {rec.describe()}: {where} ({state})"]
    lines += [f"on the CPU: {var}={value} ({why})" for var, value, why, _ in rec.CPU_NEEDS]
    return lines, str(where), rec.plan_config()


def plan_env_description(env: ProbeEnv) -> list[str]:
    """Lines that describe the environment for ``--plan``."""
    lines = [env.describe()]
    if env.build.get("missing"):
        lines.append("not built yet; the probe would build it first:")
        lines += [f"  {step}" for step in build_plan(env.host_dist, env.host_version)]
    elif env.build:
        secs = env.build.get("seconds", {}).get("total")
        size = env.build.get("bytes")
        if secs and size:
            lines.append(f"built in {secs:.0f} s, {size / 1e9:.1f} GB")
    lines += [f"note: {n}" for n in env.notes]
    return lines


def python_here() -> str:
    return sys.executable
