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
from typing import cast

from driftcheck.envs.environment import ProbeEnv
from driftcheck.envs.managed import build_plan
from driftcheck.errors import UsageError
from driftcheck.probes.driver_env import (
    cpu_thread_binding,
    driver_command,
    run_environment,
    shown_env,
)
from driftcheck.probes.env_selection import select_env
from driftcheck.probes.options import ProbeOptions, host_spec
from driftcheck.probes.patches import (
    LEFT_FILE,
    apply_patches,
    copy_tree,
    fix_patches,
    launch_flags,
    read_fixes,
    read_patch_folder,
)
from driftcheck.probes.served import ServedWorkload
from driftcheck.probes.workloads import STAGE_CHECKS, Workload, workload_for
from driftcheck.sources.specs import PackageSpec, parse_spec
from driftcheck.sources.trees import SourceTree, open_tree

# -- planning ---------------------------------------------------------------------------------


@dataclass
class ProbePlan:
    """What ``driftcheck probe --plan`` prints: nothing is run, imported or built."""

    argv: list[str]
    client: str
    client_version: str
    host: str
    workload: Workload | ServedWorkload
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
    #: A served workload: per variant, the server's command line and the client's (the
    #: served driver's; ``driver_command`` is the unpatched one's).
    servers: list[tuple[str, list[str], list[str]]] = field(default_factory=list)

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
            "servers": [
                {"variant": lab, "server": server, "client": client}
                for lab, server, client in self.servers
            ],
            "steps": [s.to_dict() for s in getattr(self.workload, "steps", ())],
        }


def make_plan(options: ProbeOptions, argv: list[str]) -> ProbePlan:
    """Describe the probe run without running, importing or building anything."""
    from driftcheck.envs.environment import EnvError, has_gpu
    from driftcheck.models.builtin import recipe
    from driftcheck.probes.client_deps import client_site

    if options.patches is not None and options.fix:
        raise UsageError("--patches and --fix exclude each other")
    host = host_spec(options.host)
    client_spec = parse_spec(options.client)
    tree = open_tree(client_spec)
    workload = workload_for(tree)
    served = isinstance(workload, ServedWorkload)
    options.check_workload(served=served)
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
    left: list[dict] = []
    if options.patches is not None:
        from driftcheck.probes.patches import patch_targets

        patch_paths, _fixes, left = read_patch_folder(options.patches, served=served)
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
                options.client,
                against,
                fix_dir,
                options.model,
                unsafe=options.unsafe_fixes,
                baseline=options.baseline,
                launch_fixes=served,
            )
            left = read_fixes(fix_dir, LEFT_FILE)
            for p in patch_paths:
                targets = patch_targets(p.read_text(errors="replace"))
                patch_desc.append(f"{p.name}: {', '.join(targets)} (from driftcheck fix)")
        except UsageError as exc:
            patch_desc.append(f"--fix would fail: {exc}")
            notes.append(str(exc))
    flags = launch_flags(left) if served else []
    patch_desc += [f"launch flag {flag} on the server's command line" for flag in flags]
    variants: list[tuple[str, list[str]]] = [("unpatched", [])]
    variants += [("patched", patch_desc)] if patch_desc else []

    rec = recipe(options.model)
    tiny = rec is not None
    if rec is not None:
        model_lines, model_arg, config = _builtin_model_lines(rec)
    else:
        model_lines = [f"{options.model}"]
        model_arg = cast(str, options.model)  # recipe(None) is the default: a name was given
        config = None
    model_lines.append(f"tensor parallel size {options.tensor_parallel_size}")
    if options.trust_remote_code:
        model_lines.append("trust remote code: yes")
    elif rec is not None and rec.TRUST_REMOTE_CODE:
        model_lines.append("trust remote code: yes (the built-in model's own configuration code)")
    else:
        model_lines.append("trust remote code: no")
    trust = options.trust_remote_code or bool(rec is not None and rec.TRUST_REMOTE_CODE)
    if isinstance(workload, ServedWorkload):
        layers = _num_layers(config if config is not None else _local_config(model_arg))
        layer_ids = list(options.layer_ids or workload.layers_for(layers))
        exprs = ", ".join(workload.layer_ids)
        model_lines.append(f"layers: {layer_ids} ({exprs} for L = {layers} decoder layers)")
    else:
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
    python = env.python if env is not None else Path("PYTHON")
    version = host.version or (env.host_version if env is not None else None)
    if cpu:
        shims += _cpu_shim_lines(env, version, served, notes)
    servers: list[tuple[str, list[str], list[str]]] = []
    model_checks: list[tuple[str, dict]] = []
    if isinstance(workload, ServedWorkload):
        servers, command, run_env, checks = _served_parts(
            workload,
            env,
            python,
            work,
            options,
            model_arg,
            layer_ids,
            trust,
            flags,
            cpu,
            tiny,
            client_site(env, md.name if md and md.name else "client", client_version)
            if env is not None
            else None,
            # A built-in model not generated yet has no folder to look in (and no template).
            False if rec is not None and not Path(model_arg).is_dir() else None,
            shims,
        )
        run_env = shown_env({**run_env, **model_env, **bind_env}, extra=model_env)
    else:
        run_env = run_environment(copy_root, extra, workload, cpu=cpu, offline=tiny)
        run_env = shown_env({**run_env, **model_env, **bind_env}, extra=model_env)
        command = driver_command(python, work)
        checks = [
            (s, c)
            for s, c in STAGE_CHECKS
            if (tiny or s != "reference") and (tp > 1 or s != "tp-match")
        ]
        model_checks = _model_checks(
            host, env, version, tree, workload, model_arg, config, patch_paths, notes
        )
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
        servers=servers,
    )


def _model_checks(
    host: PackageSpec,
    env: ProbeEnv | None,
    version: str | None,
    tree: SourceTree,
    workload: Workload,
    model_arg: str,
    config: dict | None,
    patch_paths: list[Path],
    notes: list[str],
) -> list[tuple[str, dict]]:
    """The static model check of the in-process workload, from the host API (nothing
    imported): the unpatched client, and the patched one where there are patches."""
    from driftcheck.host.load import load_host
    from driftcheck.probes.plan import check_model, client_needs

    model_checks: list[tuple[str, dict]] = []
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
    return model_checks


def _served_parts(
    workload: ServedWorkload,
    env: ProbeEnv | None,
    python: Path,
    work: Path,
    options: ProbeOptions,
    model: str,
    layer_ids: list[int],
    trust: bool,
    flags: list[str],
    cpu: bool,
    tiny: bool,
    site: Path | None,
    template: bool | None,
    shims: list[str],
) -> tuple[
    list[tuple[str, list[str], list[str]]], list[str], dict[str, str], list[tuple[str, str]]
]:
    """A served workload's plan: the server's and the client's command line for each variant
    (the patched server with the fixes' launch flags), the client's variables, the stages;
    the probe's additions to the server's command line go to ``shims``."""
    from driftcheck.probes.served_run import launch_extras, server_command

    target = env or ProbeEnv("managed", python, "vllm", "")
    servers = []
    for label in ("unpatched", "patched") if flags else ("unpatched",):
        launch = flags if label == "patched" else []
        extra, added = launch_extras(model, launch, trust, work, write=False, template=template)
        shims += [line for line in added if line not in shims]
        storage = work / label / "hidden-states"
        cmd = server_command(target, workload, model, layer_ids, storage, 0, options, extra)
        cmd[cmd.index("--port") + 1] = "PORT"  # a free loopback port, chosen at run time
        spec = work / label / "served-spec.json"
        servers.append((label, cmd, [str(python), str(work / "driver_served.py"), str(spec)]))
    copy_root = work / "unpatched" / "client"
    run_env = run_environment(copy_root, [site] if site else [], workload, cpu=cpu, offline=tiny)
    checks = [(s, c) for s, c in workload.checks if tiny or s != "reference"]
    return servers, servers[0][2], run_env, checks


def _cpu_shim_lines(
    env: ProbeEnv | None, version: str | None, served: bool, notes: list[str]
) -> list[str]:
    """The CPU shims the target's vLLM source shows a need for (:func:`cpu_shims.needed`):
    every kind for a served workload's server, the source shims for the in-process driver;
    read from the environment's files, else from the release's source."""
    from packaging.utils import canonicalize_name

    from driftcheck.models.builtin import vllm_dir
    from driftcheck.probes.cpu_shims import installed_finders, load_shims, needed

    shims = [s for s in load_shims() if served or s.kind == "source"]
    if version is None:
        return []
    if env is not None and env.python.exists():
        find, has_dist = installed_finders(vllm_dir(env.python))
    else:
        try:
            tree = open_tree(parse_spec(f"vllm=={version}"))
        except Exception as exc:  # a fetch problem: say so, do not fail the plan
            notes.append(f"CPU shims not decided: cannot read vllm=={version}'s source ({exc})")
            return []
        dist = canonicalize_name(env.host_dist if env is not None else "vllm-cpu")
        notes.append(f"CPU shims read from vllm=={version}'s source (no environment yet)")

        def find(rel: str) -> list[str] | None:
            path = f"vllm/{rel}"
            return tree.read_text(path).splitlines() if tree.exists(path) else None

        def has_dist(name: str) -> bool:
            return canonicalize_name(name) == dist

    return [item.line(version) for item in needed(find, has_dist, shims)]


def _num_layers(config: dict | None) -> int:
    """The decoder layers of a config (its ``text_config``'s for a multimodal one)."""
    if not isinstance(config, dict):
        return 0
    inner = config.get("text_config")
    return int((inner if isinstance(inner, dict) else config).get("num_hidden_layers") or 0)


def _local_config(model: str) -> dict | None:
    """The model's ``config.json`` where it is on this machine (nothing downloaded)."""
    from driftcheck.models.configs import find_config

    path = find_config(model)
    try:
        return json.loads(path.read_text()) if path is not None else None
    except (OSError, ValueError):
        return None


def _memory(model: str, config: dict | None, options: ProbeOptions, notes: list[str]) -> dict:
    """The memory estimate per GPU from the model's config (read here; nothing downloaded)."""
    from driftcheck.probes.memory import estimate

    if config is None:
        config = _local_config(model)
    if not isinstance(config, dict):
        notes.append(f"no memory estimate: no config.json for {model} on this machine")
        return {}
    est = estimate(config, options.tensor_parallel_size, options.max_model_len)
    return {"lines": est.lines(), **est.to_dict()}


def _builtin_model_lines(rec: ModuleType) -> tuple[list[str], str, dict]:
    """A built-in model for ``--plan``: its lines, its folder, and its config (with placeholder
    token ids: the static check reads only the architecture)."""
    from driftcheck.models.builtin import model_dir

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
