"""Choosing the environment to probe in (:func:`select_env`): the current one when it has the
wanted vLLM, one the user names (a folder or an interpreter), or a managed one. The choice is
the one place where the ``--env`` and ``--host`` options meet the environments, so it sits above
both :mod:`driftcheck.envs.environment` and :mod:`driftcheck.envs.managed`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from packaging.utils import canonicalize_name

from driftcheck.envs.environment import HOST_DISTS, ProbeEnv, Progress, host_in, same_version
from driftcheck.envs.managed import managed_env
from driftcheck.errors import UsageError

# -- choosing an environment --------------------------------------------------------------------


def select_env(
    choice: str | None,
    host_name: str,
    host_version: str | None,
    *,
    build: bool = True,
    progress: Progress | None = None,
    cache_limit: int | None = None,
) -> ProbeEnv:
    """The environment to probe in.

    Args:
        choice: ``current``, ``managed``, a path (an environment folder or its interpreter), or
            None: the current environment when it has that host version, else a managed one.
        host_name: The host's name (``vllm``).
        host_version: The wanted version, or None for "whatever is installed".
        build: Build a missing managed environment (False: describe what would be built).
        progress: Receives one line per step.
        cache_limit: Bytes the managed environments may take before the least recently used
            are evicted (None: ``probe-cache-gb``).

    Raises:
        UsageError: Unknown host, or a version that the chosen environment does not have.
        EnvError: A managed environment cannot be built.
    """
    if canonicalize_name(host_name) not in HOST_DISTS:
        raise UsageError(f"the probe drives vLLM; unsupported host {host_name!r}")
    if choice in (None, "current"):
        found = host_in(sys.executable)
        if found and (host_version is None or same_version(found[1], host_version)):
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
    return managed_env(host_version, build=build, progress=progress, cache_limit=cache_limit)


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
    if host_version is not None and not same_version(found[1], host_version):
        raise UsageError(f"--env {path}: it has {found[0]}=={found[1]}, not vllm=={host_version}")
    root = path if path.is_dir() else None
    return ProbeEnv("path", python, found[0], found[1], root=root)
