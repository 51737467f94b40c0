"""Writing a bundle (:func:`make_bundle`): the wheels the other machine lacks, chosen by pip's
own resolver for that machine's Python and platform; driftcheck's wheel; the client; its
patches; the built-in model; all cut into pieces with a manifest and a README.

What the other machine already has (``--have``, one ``name==version`` a line, as ``pip list
--format=freeze`` prints it) is given to pip as empty stand-in wheels of those versions, pinned
by constraints: pip resolves against them and downloads nothing of theirs (torch and the CUDA
libraries stay where they are), and a requirement that the machine's version does not meet
fails here, with pip's message, not there. What must not be carried although something
requires it (``--exclude``: a package published as an sdist only, or one the run never imports)
gets a stand-in for each of its releases, so whatever version is asked for resolves to nothing.
Hand pins are a pip constraints file (``--constraints``); neither is code.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from driftcheck.probes.bundle.pieces import (
    FORMAT,
    MANIFEST,
    README,
    TAR,
    BundleError,
    sha256_of,
    write_pieces,
)
from driftcheck.probes.bundle.wheels import own_wheel, wheel_requires, write_wheel

Progress = Callable[[str], None]
#: The local label of a stand-in wheel: it sorts above the public release of the same version,
#: so pip prefers the stand-in to the index's wheel.
STANDIN = "driftcheck.have"
#: The local label of an excluded package's stand-ins.
EXCLUDED = "driftcheck.excluded"
DEFAULT_PIECE = 54 << 20


@dataclass
class BundleRequest:
    """What ``driftcheck probe --bundle`` was asked to carry, and for which machine."""

    client: str
    host: str
    folder: Path
    piece_size: int = DEFAULT_PIECE
    #: The other machine's ``X.Y`` (None: this interpreter's).
    python_version: str | None = None
    #: Its platform tags for pip (``manylinux_2_35_x86_64``; none: this machine's).
    platforms: list[str] = field(default_factory=list)
    implementation: str | None = None
    abi: str | None = None
    #: A file of what it has, ``name==version`` a line.
    have: Path | None = None
    #: pip constraints files (hand pins).
    constraints: list[Path] = field(default_factory=list)
    #: Packages not carried although something requires them.
    exclude: list[str] = field(default_factory=list)
    model: str | None = None
    patches: Path | None = None
    fix: bool = False
    unsafe_fixes: bool = False
    baseline: str | None = None
    #: Carry driftcheck's own wheel and requirements (the other side runs it from the bundle).
    driftcheck: bool = True
    #: More options for every ``pip download`` (tests pass ``--no-index --find-links``).
    pip_args: list[str] = field(default_factory=list)

    def target_python(self) -> str:
        return self.python_version or f"{sys.version_info[0]}.{sys.version_info[1]}"

    def pip_target(self) -> list[str]:
        """pip's options that choose wheels for the other machine."""
        out = ["--only-binary=:all:"]
        py = self.python_version
        if py:
            out += ["--python-version", py]
        if self.implementation or py:
            out += ["--implementation", self.implementation or "cp"]
        if self.abi or py:
            out += ["--abi", self.abi or f"cp{(py or '').replace('.', '')}"]
        for platform in self.platforms:
            out += ["--platform", platform]
        return out


def read_have(path: Path) -> dict[str, str]:
    """``--have FILE``: name -> version of what the other machine has.

    Raises:
        BundleError: A line without a version, naming the line.
    """
    out: dict[str, str] = {}
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise BundleError(f"--have {path}: {exc.strerror or exc}") from None
    for n, raw in enumerate(lines, start=1):
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        name, sep, version = line.partition("==")
        if not sep or not version.strip() or " @ " in line:
            raise BundleError(
                f"--have {path} line {n}: {line!r} has no version (write the lines of "
                "'python -m pip list --format=freeze' on that machine: name==version)"
            )
        out[canonicalize_name(name.strip())] = version.strip()
    return out


def _standins(have: dict[str, str], folder: Path) -> list[str]:
    """Empty wheels for ``have`` in ``folder``; returns the constraints that pin them."""
    lines = []
    for name, version in sorted(have.items()):
        try:
            v = Version(version)
        except InvalidVersion:
            continue  # pip could not compare it either; it is left to the index
        local = f"{v}.{STANDIN.replace('.', '')}" if v.local else f"{v}+{STANDIN}"
        write_wheel(folder, name, local)
        lines.append(f"{name}=={v.public}")
    return lines


def _excluded_standins(req: BundleRequest, folder: Path) -> None:
    """A stand-in for every release of each ``--exclude`` package (pip's ``index versions``).

    Raises:
        BundleError: The index lists no release of one.
    """
    import subprocess

    from driftcheck.envs.environment import clean_env
    from driftcheck.sources.versions import _parse_listing

    for name in req.exclude:
        cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "index", "versions"]
        proc = subprocess.run(
            [*cmd, name, *req.pip_args],
            capture_output=True,
            text=True,
            env=clean_env(),
            check=False,
        )
        versions = _parse_listing(proc.stdout)
        if not versions:
            raise BundleError(f"--exclude {name}: pip lists no release of it")
        for version in versions:
            write_wheel(folder, name, f"{Version(version).public}+{EXCLUDED}")


def _pip(args: list[str], what: str, progress: Progress | None, watch: Path | None) -> None:
    from driftcheck.envs.environment import EnvError, clean_env
    from driftcheck.envs.steps import run_step

    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    try:
        run_step(cmd, what, env=clean_env(), watch=watch, say=progress)
    except EnvError as exc:
        raise BundleError(str(exc)) from None


def _client(req: BundleRequest, work: Path, progress: Progress | None) -> tuple[Path, list[str]]:
    """The client to carry (a wheel or a folder) and its requirement lines."""
    from driftcheck.sources.specs import parse_spec

    spec = parse_spec(req.client)
    if spec.kind == "release":
        dest = work / "client"
        line = f"{spec.name}=={spec.version}"
        _pip(
            [
                "download",
                "-q",
                "--no-deps",
                *req.pip_target(),
                *req.pip_args,
                "-d",
                str(dest),
                line,
            ],
            f"pip download {line}",
            progress,
            None,
        )
        found = sorted(dest.glob("*.whl"))
        if not found:
            raise BundleError(f"{line}: pip found no wheel of it for the bundle's machine")
        return found[0], wheel_requires(found[0])[2]
    if spec.kind == "archive" and spec.path is not None and spec.path.suffix == ".whl":
        return spec.path, wheel_requires(spec.path)[2]
    if spec.kind == "directory" and spec.path is not None:
        return spec.path, _folder_requires(spec.path)
    raise BundleError(
        f"--bundle: the client {req.client} must be a release (name==version), a wheel or a "
        "folder (an sdist would be built there, which needs a network)"
    )


def _folder_requires(path: Path) -> list[str]:
    """A client folder's ``[project] dependencies`` (none when it has no pyproject.toml)."""
    from driftcheck.compat import tomllib

    pyproject = path / "pyproject.toml"
    if not pyproject.is_file():
        return []
    data = tomllib.loads(pyproject.read_text())
    return list(data.get("project", {}).get("dependencies", []))


def _patches(req: BundleRequest, work: Path) -> Path | None:
    """The patch folder to carry: ``--patches`` as given, or driftcheck's own (``--fix``),
    made here where the host's source can be fetched."""
    if req.patches is not None:
        if not req.patches.is_dir():
            raise BundleError(f"--patches {req.patches}: no such folder")
        return req.patches
    if not req.fix:
        return None
    from driftcheck.probes.patches import NoPatchError, fix_patches
    from driftcheck.probes.served import ServedWorkload
    from driftcheck.probes.workloads import workload_for
    from driftcheck.sources.specs import parse_spec
    from driftcheck.sources.trees import open_tree

    served = isinstance(workload_for(open_tree(parse_spec(req.client))), ServedWorkload)
    dest = work / "patches"
    try:
        fix_patches(
            req.client,
            req.host,
            dest,
            req.model,
            unsafe=req.unsafe_fixes,
            baseline=req.baseline,
            launch_fixes=served,
        )
    except NoPatchError:
        return None
    return dest


def _model(name: str | None, progress: Progress | None) -> Path | None:
    """The built-in model's folder, when it is in the cache or this interpreter can generate it
    (else the other machine generates it at first use, with its own torch)."""
    import importlib.util

    from driftcheck.models.builtin import ensure_model, model_dir, recipe

    rec = recipe(name)
    if rec is None:
        return None
    where = model_dir(rec)
    if (where / "ready.json").exists():
        return where
    needs = ("torch", "transformers", "tokenizers", "safetensors")
    if all(importlib.util.find_spec(m) is not None for m in needs):
        if progress:
            progress(f"generating the built-in model {rec.NAME}")
        return ensure_model(rec, sys.executable)
    return None


def make_bundle(req: BundleRequest, progress: Progress | None = None) -> dict:
    """Write the bundle ``req`` asks for into ``req.folder``; returns its manifest.

    Raises:
        BundleError: The folder is not empty, a ``--have`` line has no version, or pip cannot
            resolve or download a wheel (its message).
    """
    say = progress or (lambda _m: None)
    folder = req.folder
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise BundleError(f"--bundle {folder}: not an empty folder (give a new or empty one)")
    have = read_have(req.have) if req.have else {}
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="driftcheck-bundle-") as tmp:
        work = Path(tmp)
        client, client_requires = _client(req, work, progress)
        roots = [req.host, *client_requires]
        bootstrap = None
        if req.driftcheck:
            say("building driftcheck's own wheel")
            bootstrap = own_wheel(work / "own")
            roots.append(str(bootstrap))
        (work / "roots.txt").write_text("\n".join(roots) + "\n")
        args = ["download", "-q", *req.pip_target(), *req.pip_args, "-d", str(work / "wheels")]
        if have:
            pins = _standins(have, work / "have")
            (work / "have.txt").write_text("\n".join(pins) + "\n")
            args += ["-c", str(work / "have.txt")]
        _excluded_standins(req, work / "have")
        if have or req.exclude:
            args += ["--find-links", str(work / "have")]
        for path in req.constraints:
            args += ["-c", str(path)]
        say(
            f"resolving {req.host}, the client's and driftcheck's requirements for Python "
            f"{req.target_python()}"
            + (f" ({', '.join(req.platforms)})" if req.platforms else "")
            + (f", less the {len(have)} packages of {req.have}" if have else "")
        )
        _pip([*args, "-r", str(work / "roots.txt")], "pip download", progress, work / "wheels")

        wheels: list[dict[str, Any]] = []
        provided: dict[str, str] = {}
        excluded: dict[str, str] = {}
        for path in sorted((work / "wheels").glob("*.whl")):
            name, version, _build, _tags = parse_wheel_filename(path.name)
            label = (version.local or "").replace(".", "")
            if label.endswith(STANDIN.replace(".", "")):
                provided[str(name)] = have.get(str(name), version.public)
                continue
            if label == EXCLUDED.replace(".", ""):
                excluded[str(name)] = version.public
                continue
            if bootstrap is not None and path.name == bootstrap.name:
                continue
            wheels.append(
                {"file": f"wheels/{path.name}", "name": str(name), "version": str(version)}
            )
        patches = _patches(req, work)
        model = _model(req.model, progress)

        members = [(w["file"], work / w["file"]) for w in wheels]
        client_arc = f"client/{client.name}"
        members.append((client_arc, client))
        patch_files = []
        if patches is not None:
            patch_files = sorted(p for p in patches.iterdir() if p.is_file())
            members += [(f"patches/{p.name}", p) for p in patch_files]
        if model is not None:
            members.append((f"models/{model.name}", model))
        for member in wheels:
            path = work / member["file"]
            member.update(bytes=path.stat().st_size, sha256=sha256_of(path))
        mib = sum(w["bytes"] for w in wheels) / (1 << 20)
        say(
            f"{len(wheels)} wheels ({mib:.1f} MiB); cutting the bundle into pieces of {req.piece_size / (1 << 20):g} MiB"
        )
        cut = write_pieces(folder, members, req.piece_size)
        boot = None
        if bootstrap is not None:
            shutil.copyfile(bootstrap, folder / bootstrap.name)
            boot = {
                "file": bootstrap.name,
                "bytes": bootstrap.stat().st_size,
                "sha256": sha256_of(bootstrap),
            }
    import driftcheck

    manifest = {
        "format": FORMAT,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "driftcheck": getattr(driftcheck, "__version__", None) or _own_version(),
        "host": req.host,
        "client": client_arc,
        "patches": [f"patches/{p.name}" for p in patch_files],
        "models": [f"models/{model.name}"] if model is not None else [],
        "target": {
            "python": req.target_python(),
            "platforms": req.platforms,
            "implementation": req.implementation or ("cp" if req.python_version else None),
        },
        "provided": provided,
        "excluded": excluded,
        "constraints": [p.read_text().splitlines() for p in req.constraints],
        "wheels": wheels,
        "bootstrap": boot,
        "tar": TAR,
        **cut,
    }
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    (folder / README).write_text(readme(manifest))
    return manifest


def _own_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("driftcheck")
    except metadata.PackageNotFoundError:
        return "unknown"


def run_command(manifest: dict) -> str:
    """The one command that installs and runs the bundle on the other machine, from its folder."""
    boot = manifest.get("bootstrap")
    py = f"python{manifest['target']['python']}"
    if boot:
        return f"PYTHONPATH={boot['file']} {py} -m driftcheck.probes.bundle . [probe options]"
    return "driftcheck probe --from-bundle . [probe options]"


def readme(manifest: dict) -> str:
    """README.txt: what the bundle holds and the command to run on the other side."""
    n = len(manifest["pieces"])
    platforms = ", ".join(manifest["target"]["platforms"]) or "the machine it was made on"
    lines = [
        f"A driftcheck probe bundle: {manifest['client']} against {manifest['host']},",
        f"for Python {manifest['target']['python']} on {platforms}.",
        f"{len(manifest['wheels'])} wheels, "
        f"{sum(p.endswith('.patch') for p in manifest['patches'])} patches, "
        f"{len(manifest['models'])} built-in models; {n} pieces, "
        f"{manifest['whole']['bytes'] / (1 << 20):.1f} MiB; {MANIFEST} lists the sha256 of each.",
        "",
        "Copy this whole folder to the machine that runs the probe, then there, in it:",
        "",
        f"    {run_command(manifest)}",
        "",
        "It checks every piece, installs the wheels offline (pip --no-index) into a venv under",
        "driftcheck's cache that sees that Python's own packages, and runs the probe there.",
    ]
    if manifest.get("bootstrap"):
        lines += ["Where driftcheck is installed: driftcheck probe --from-bundle . [probe options]"]
    return "\n".join(lines) + "\n"
