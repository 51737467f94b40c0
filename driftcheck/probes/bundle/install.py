"""The other side of a bundle: check its pieces, unpack them and install its wheels offline
into a fresh environment (:func:`install_bundle`). Standard library only: it runs from
driftcheck's wheel before driftcheck's requirements are installed.

The environment is a venv of the interpreter the bundle was made for (the one whose packages
``--have`` listed): the bundle carries only what that interpreter lacks, and a ``.pth`` file
puts that interpreter's own site folders after the venv's, so the venv sees the rest (also when
the interpreter is itself a venv, whose packages ``--system-site-packages`` would miss). Its
wheels are installed with driftcheck's interpreter's pip (``--python VENV``, pip 22.3 or later),
``--no-index --no-deps``; then ``pip check`` names a requirement that neither the machine nor
the bundle meets (one the bundle excluded on purpose aside) instead of anything being fetched.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from driftcheck.probes.bundle.pieces import BundleError, extract, read_manifest, verify

#: Written last into an install's folder: which bundle it holds (its sha256).
DONE = "installed.json"
#: Present while an install is under way (a folder holding it is a broken install).
PARTIAL = ".partial"

Progress = Callable[[str], None]


@dataclass
class Installed:
    """A bundle installed offline: what the probe needs from it."""

    root: Path
    python: Path
    host: str
    client: Path
    patches: Path | None = None
    models: list[Path] = field(default_factory=list)
    reused: bool = False


def default_root(manifest: dict) -> Path:
    """Where a bundle is installed when no folder is given: ``envs/bundle-<sha256[:16]>`` in
    driftcheck's cache (``$DRIFTCHECK_CACHE_DIR``, else the XDG user cache, as driftcheck's
    cache finds it on Linux)."""
    base = os.environ.get("DRIFTCHECK_CACHE_DIR")
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        base = str(Path(xdg) / "driftcheck")
    return Path(base).expanduser() / "envs" / f"bundle-{manifest['whole']['sha256'][:16]}"


def _clean_env() -> dict[str, str]:
    """This environment without Python's own variables: ``envs._clean_env``'s twin, since this
    module may import nothing beyond the standard library (``envs`` needs packaging)."""
    env = dict(os.environ)
    for key in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV"):
        env.pop(key, None)
    return env


def _run(cmd: list[str], what: str) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            errors="replace",
            stdin=subprocess.DEVNULL,
            env=_clean_env(),
            check=False,
        )
    except OSError as exc:
        raise BundleError(f"cannot run {what}: {exc.strerror or exc}") from None
    if proc.returncode != 0:
        lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("ERROR")]
        why = (errors or lines or [f"exit {proc.returncode}"])[0]
        raise BundleError(f"{what} failed: {why[:400]}")
    return proc


def python_version(python: Path | str) -> str:
    """``X.Y`` of an interpreter."""
    code = "import sys; print('%d.%d' % sys.version_info[:2])"
    return _run([str(python), "-c", code], f"{python}").stdout.strip()


def check_python(manifest: dict, python: Path | str) -> None:
    """Refuse an interpreter of another Python than the bundle's wheels were chosen for.

    Raises:
        BundleError: Another ``X.Y``.
    """
    want = manifest["target"]["python"]
    have = python_version(python)
    if have != want:
        raise BundleError(
            f"the bundle is for Python {want}, {python} is Python {have}: run it with a "
            f"Python {want} (--env PY names the interpreter)"
        )


_SITE_DIRS = (
    "import json, sys; "
    "print(json.dumps([p for p in sys.path if p.endswith(('site-packages', 'dist-packages'))]))"
)
_PURELIB = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
#: The ``.pth`` that shows the base interpreter's packages to the venv.
BASE_PTH = "driftcheck-bundle-base.pth"


def _see_base(python: Path | str, venv_python: Path) -> None:
    """Put ``python``'s site folders on the venv's path after its own, as site folders (their
    ``.pth`` files count, as they do for ``python``)."""
    dirs = json.loads(_run([str(python), "-c", _SITE_DIRS], f"{python}").stdout)
    purelib = Path(_run([str(venv_python), "-c", _PURELIB], f"{venv_python}").stdout.strip())
    line = f"import site; list(map(site.addsitedir, {dirs!r}))\n"
    (purelib / BASE_PTH).write_text(line)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


_MISSING = re.compile(r"^(\S+) \S+ requires ([A-Za-z0-9._-]+).*, which is not installed")
_UNMET = re.compile(r"^(\S+) \S+ has requirement ")


def _problems(report: str, carried: set[str], excluded: set[str]) -> tuple[list[str], list[str]]:
    """``pip check``'s lines about the carried packages: (missing requirements, unmet versions),
    less the requirements on excluded packages (the machine's own problems are not ours)."""
    missing, unmet = [], []
    for line in report.splitlines():
        m = _MISSING.match(line)
        if m and _norm(m[1]) in carried and _norm(m[2]) not in excluded:
            missing.append(line.strip().rstrip("."))
        m = _UNMET.match(line)
        if m and _norm(m[1]) in carried:
            unmet.append(line.strip())
    return missing, unmet


def _read_done(root: Path) -> dict | None:
    try:
        done = json.loads((root / DONE).read_text())
    except (OSError, ValueError):
        return None
    return done if isinstance(done, dict) else None


def _installed(root: Path, manifest: dict, reused: bool) -> Installed:
    files = root / "files"
    patches = files / "patches" if manifest.get("patches") else None
    return Installed(
        root=root,
        python=root / "venv" / "bin" / "python",
        host=manifest["host"],
        client=files / manifest["client"],
        patches=patches,
        models=[files / m for m in manifest.get("models", [])],
        reused=reused,
    )


def install_bundle(
    folder: Path,
    root: Path | None = None,
    *,
    python: Path | str | None = None,
    progress: Progress | None = None,
) -> Installed:
    """Check the bundle in ``folder``, unpack it and install it offline into ``root`` (default:
    :func:`default_root`) with a venv of ``python`` (default: this interpreter). An install of
    the same bundle already there is reused.

    Raises:
        BundleError: A piece is missing or damaged, another Python, ``root`` holds something
            else, or pip cannot install a wheel or finds a requirement missing.
    """
    say = progress or (lambda _m: None)
    manifest = read_manifest(folder)
    root = (root or default_root(manifest)).expanduser().resolve()
    python = Path(python or sys.executable)
    done = _read_done(root)
    if done is not None and not (root / PARTIAL).exists():
        if done.get("sha256") != manifest["whole"]["sha256"]:
            raise BundleError(
                f"{root} holds the install of another bundle: give an empty or new folder"
            )
        say(f"the bundle is installed in {root} already")
        return _installed(root, manifest, reused=True)
    if root.exists() and any(root.iterdir()) and not (root / PARTIAL).exists():
        raise BundleError(f"{root} is not empty: give an empty or new folder to install into")
    check_python(manifest, python)
    n = len(manifest["pieces"])
    say(
        f"checking the {n} piece{'s' if n != 1 else ''} of {folder} against {folder.name}/manifest.json"
    )
    verify(folder, manifest)
    if root.exists():
        shutil.rmtree(root)  # an install that did not finish
    root.mkdir(parents=True)
    (root / PARTIAL).write_text("")
    files = root / "files"
    say(f"unpacking {manifest['whole']['bytes'] / (1 << 20):.1f} MiB into {files}")
    extract(folder, manifest, files)
    venv = root / "venv"
    say(f"making a venv of {python} in {venv} that sees {python}'s own packages")
    _run([str(python), "-m", "venv", "--without-pip", str(venv)], f"{python} -m venv")
    _see_base(python, venv / "bin" / "python")
    wheels = sorted((files / "wheels").glob("*.whl"))
    if manifest.get("bootstrap"):
        wheels.append(folder / manifest["bootstrap"]["file"])
    say(f"installing {len(wheels)} wheels offline (pip --no-index)")
    # This interpreter's pip (the other may have none) works on the venv through --python.
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    cmd += ["--python", str(venv / "bin" / "python")]
    # --no-deps: what --exclude left out is required but absent; pip check says what else is.
    _run([*cmd, "install", "--quiet", "--no-index", "--no-deps", *map(str, wheels)], "pip install")
    check = subprocess.run(
        [*cmd, "check"], capture_output=True, text=True, env=_clean_env(), check=False
    )
    carried = {_norm(w["name"]) for w in manifest.get("wheels", [])}
    missing, unmet = _problems(check.stdout, carried, set(map(_norm, manifest.get("excluded", {}))))
    for line in unmet:
        say(f"warning: {line}")
    if missing:
        more = f" ({len(missing) - 1} more)" if len(missing) > 1 else ""
        raise BundleError(
            f"{missing[0]}{more}: neither {python} nor the bundle has it (make the bundle again "
            "without it in --have, or --exclude it)"
        )
    record = {
        "sha256": manifest["whole"]["sha256"],
        "host": manifest["host"],
        "python": str(python),
    }
    (root / DONE).write_text(json.dumps(record, indent=1))
    (root / PARTIAL).unlink()
    return _installed(root, manifest, reused=False)
