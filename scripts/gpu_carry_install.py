"""The last step there: check the whole tar, unpack it, install its wheels into one folder, make
that folder visible to the machine's ``python3`` and write the run's environment.

``pip install --target`` keeps the machine's own packages untouched. driftcheck starts vLLM's
interpreter without the caller's ``PYTHONPATH`` (it runs helpers in a clean environment), so a
``.pth`` in that interpreter's site-packages puts the folder on its path too: before the
machine's own packages, as ``PYTHONPATH`` would, and as a site folder, so the ``.pth`` files of
the carried wheels (``nvidia_cutlass_dsl.pth``) count.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import time
from importlib import metadata
from pathlib import Path

from gpu_carry_data import IGNORED_CONFLICTS, LEAVE_OUT, RUN_ENV
from gpu_carry_pieces import MANIFEST, MiB, sha256_of
from gpu_carry_reqs import Requirement, norm, satisfies, wheel_metadata

PTH = "driftcheck-carry.pth"


class InstallError(Exception):
    """The tar is incomplete or damaged, or pip failed."""


def _pth_line(site: Path) -> str:
    return (
        f"import sys, site; p = {str(site)!r}; "
        "p in sys.path or sys.path.insert(next((i for i, e in enumerate(sys.path) "
        "if e.endswith('-packages')), len(sys.path)), p); site.addsitedir(p)\n"
    )


def patch_tool() -> str:
    """Which tool the probe will apply the patches with (it needs 'patch' or 'git')."""
    tool = shutil.which("patch") or shutil.which("git")
    if tool:
        return f"patches: the probe applies them with {tool}"
    return "WARNING: neither 'patch' nor 'git' here: the probe cannot apply the patches"


def env_lines(dest: Path) -> list[str]:
    """``export`` lines of the run's environment, each with its reason."""
    out = []
    for key, (value, why) in RUN_ENV.items():
        out.append(f"# {why}")
        out.append(f'export {key}="{value.format(dest=dest)}"')
    return out


def unmet_there(
    site: Path, extras: dict[str, list[str]], client: Path | None = None
) -> tuple[list[str], list[str]]:
    """(unmet, missing): requirements of the carried distributions (and of the client's wheel)
    that the versions really installed here, the machine's and the carried ones, do not meet;
    and those that name nothing installed."""
    versions = {norm(d.metadata["Name"] or ""): d.version for d in metadata.distributions()}
    carried = list(metadata.distributions(path=[str(site)]))
    versions.update({norm(d.metadata["Name"] or ""): d.version for d in carried})
    owners: list[tuple[str, list[Requirement]]] = []
    for dist in carried:
        reqs = []
        for line in dist.requires or []:
            try:
                reqs.append(Requirement.parse(line))
            except ValueError:
                continue
        owners.append((norm(dist.metadata["Name"] or ""), reqs))
    if client is not None:
        name, _version, reqs = wheel_metadata(client)
        owners.append((norm(name), reqs))
    unmet, missing = [], []
    for owner, reqs in owners:
        for req in reqs:
            if not req.applies(tuple(extras.get(owner, ())), env=_here()):
                continue
            if req.key in LEAVE_OUT or (owner, req.key) in IGNORED_CONFLICTS:
                continue
            have = versions.get(req.key)
            if have is None:
                missing.append(f"{owner} needs {req}: not installed")
            elif req.specifier and not satisfies(have, req.specifier):
                unmet.append(f"{owner} needs {req} but {req.key}=={have} is there")
    return unmet, missing


def _here() -> dict[str, str]:
    import platform

    return {
        "python_version": ".".join(platform.python_version_tuple()[:2]),
        "python_full_version": platform.python_version(),
        "implementation_version": platform.python_version(),
        "implementation_name": sys.implementation.name,
        "platform_python_implementation": platform.python_implementation(),
        "platform_machine": platform.machine(),
        "platform_system": platform.system(),
        "sys_platform": sys.platform,
        "os_name": "posix",
        "platform_release": platform.release(),
        "platform_version": platform.version(),
    }


def install(dest: Path) -> list[str]:
    """Check, unpack and install ``dest/carry.tar``; returns the report's lines."""
    lines: list[str] = []
    manifest = json.loads((dest / MANIFEST).read_text())
    tar = dest / "carry.tar"
    t0 = time.time()
    size = tar.stat().st_size if tar.exists() else 0
    if size != manifest["whole"]["bytes"]:
        raise InstallError(
            f"{tar} holds {size} of {manifest['whole']['bytes']} bytes: not all there"
        )
    if sha256_of(tar) != manifest["whole"]["sha256"]:
        raise InstallError(f"{tar}: sha256 differs from the manifest's: send the pieces again")
    lines.append(f"whole tar: {size / MiB:.1f} MiB, sha256 ok ({time.time() - t0:.1f} s)")

    t1 = time.time()
    unpacked, site = dest / "x", dest / "site"
    for folder in (unpacked, site):
        shutil.rmtree(folder, ignore_errors=True)
    with tarfile.open(tar) as t:
        if hasattr(tarfile, "data_filter"):
            t.extractall(unpacked, filter="data")
        else:
            t.extractall(unpacked)
    wheels = sorted((unpacked / "wheels").glob("*.whl"))
    lines.append(f"unpacked {len(wheels)} wheels into {unpacked} ({time.time() - t1:.1f} s)")

    t2 = time.time()
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    cmd += ["--no-index", "--no-deps", "--no-compile", "--target", str(site), *map(str, wheels)]
    proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    if proc.returncode != 0:
        raise InstallError("pip install failed: " + " | ".join(proc.stderr.splitlines()[-5:]))
    lines.append(f"pip install --target {site}: {time.time() - t2:.1f} s")

    purelib = Path(sysconfig.get_paths()["purelib"])
    try:
        (purelib / PTH).write_text(_pth_line(site))
        lines.append(f"wrote {purelib / PTH}: {site} is on {sys.executable}'s path")
    except OSError as exc:
        lines.append(f"WARNING: cannot write {purelib / PTH} ({exc}): 'probe --env' won't see vLLM")

    (dest / "env.sh").write_text("\n".join(env_lines(dest)) + "\n")
    lines.append(f"wrote {dest / 'env.sh'} (. it before the run)")

    sys.path.insert(0, str(site))
    extras = {norm(w["name"]): w["extras"] for s in manifest["sections"].values() for w in s}
    mine = {norm(d.metadata["Name"] or "") for d in metadata.distributions(path=[str(site)])}
    theirs = {norm(d.metadata["Name"] or "") for d in metadata.distributions(path=[str(purelib)])}
    unmet, missing = unmet_there(site, extras, unpacked / manifest["client"])
    for line in sorted(set(unmet)):
        lines.append(f"UNMET {line}")
    for line in sorted(set(missing)):
        lines.append(f"MISSING {line}")
    for name in sorted(mine & theirs):
        lines.append(f"NOTE the carried {name} shadows the machine's own")
    lines.append(patch_tool())
    if not unmet and not missing:
        lines.append("requirements: every carried distribution's requirements are met here")
    lines.append(f"install: {time.time() - t0:.1f} s in all")
    return lines
