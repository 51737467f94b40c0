"""driftcheck's side of the carry: its wheel, built from the working tree, and its patches for
the client, made by that very wheel in a Python 3.12 venv that stands in for the GPU machine
(it holds only the machine's part of driftcheck's requirements: no pydantic, no vLLM).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import gpu_carry_data as data

ROOT = Path(__file__).resolve().parent.parent
#: What a wheel build of driftcheck reads from the working tree.
BUILD_INPUTS = ("pyproject.toml", "README.md", "LICENSE", "driftcheck", "rules")


class BuildError(Exception):
    """The wheel, the stand-in venv or the patches could not be made."""


def git_output(*args: str) -> str:
    """What ``git ARGS`` prints in the checkout (nothing when git fails)."""
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout


def tree_files() -> list[Path]:
    """The files a call sends besides ``carry``: tracked, and untracked ones not ignored."""
    names = git_output("ls-files", "-z", "-co", "--exclude-standard").split("\0")
    return [ROOT / n for n in names if n and (ROOT / n).is_file()]


def build_driftcheck(src: Path | None, out: Path) -> Path:
    """driftcheck's wheel, built with pip from a clean copy of ``src`` (default: the working
    tree as a call sends it), so that no stale ``build/`` of the checkout slips in."""
    with tempfile.TemporaryDirectory(prefix="driftcheck-src-") as tmp:
        copy = Path(tmp) / "src"
        files = tree_files() if src is None else [p for p in src.rglob("*") if p.is_file()]
        base = ROOT if src is None else src
        for path in files:
            rel = path.relative_to(base)
            if rel.parts[0] in BUILD_INPUTS and "__pycache__" not in rel.parts:
                (copy / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, copy / rel)
        built = Path(tmp) / "wheel"
        cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(built), str(copy)]
        proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
        wheels = list(built.glob("driftcheck-*.whl"))
        if proc.returncode != 0 or len(wheels) != 1:
            raise BuildError(f"building driftcheck's wheel failed: {proc.stderr[-800:]}")
        out.mkdir(parents=True, exist_ok=True)
        for old in out.glob("driftcheck-*.whl"):
            old.unlink()
        return Path(shutil.copy2(wheels[0], out / wheels[0].name))


def find_python312() -> Path:
    """pyenv's Python 3.12 (the machine's minor version)."""
    root = subprocess.run(["pyenv", "root"], capture_output=True, text=True).stdout.strip()
    found = sorted(Path(root or "/root/.pyenv").glob("versions/3.12*/bin/python"))
    if not found:
        raise BuildError("no Python 3.12 under pyenv: pass --python312")
    return found[-1]


def sim_venv(work: Path, python312: Path, provided: list[str]) -> Path:
    """A 3.12 venv standing in for the machine as driftcheck sees it: it holds just those of
    driftcheck's requirements that the machine has (from the index); no pydantic, no vLLM."""
    venv = work / "sim-venv"
    py = venv / "bin" / "python"
    if not py.exists():
        subprocess.run([str(python312), "-m", "venv", str(venv)], check=True)
    if provided:
        cmd = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", *provided]
        if subprocess.run(cmd, capture_output=True, text=True).returncode != 0:
            raise BuildError(f"installing {provided} into {venv} failed")
    return py


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without Python's own variables (and a venv's), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    return {**env, **extra}


def make_patches(py: Path, wheels: list[Path], work: Path) -> Path:
    """``driftcheck fix CLIENT --against HOST [--baseline B] --out DIR``, run by the carried driftcheck (its
    wheels in a --target folder, on the stand-in venv). Returns DIR (it may hold no patch)."""
    site, out = work / "patch-site", work / "patches"
    for folder in (site, out):
        shutil.rmtree(folder, ignore_errors=True)
    cmd = [str(py), "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile"]
    subprocess.run([*cmd, "--target", str(site), *map(str, wheels)], check=True)
    main = "import sys; from driftcheck.cli import main; sys.argv[0] = 'driftcheck'; main()"
    fix = [str(py), "-c", main, "fix", data.CLIENT, "--against", data.HOST, "--out", str(out)]
    fix += ["--baseline", data.BASELINE] if getattr(data, "BASELINE", None) else []
    proc = subprocess.run(
        fix, cwd=work, env=clean_env(PYTHONPATH=str(site)), capture_output=True, text=True
    )
    if proc.returncode not in (0, 1):
        raise BuildError(f"driftcheck fix failed ({proc.returncode}): {proc.stderr[-600:]}")
    out.mkdir(exist_ok=True)
    return out


def carried_patches(folder: Path) -> list[Path]:
    """The patch files to carry: ``driftcheck fix --out`` writes one per file and ``all.patch``,
    which repeats them (the probe applies every patch of the folder, so one set only)."""
    found = sorted(p for p in folder.iterdir() if p.suffix in (".patch", ".diff") and p.is_file())
    single = [p for p in found if p.name != "all.patch"]
    return single or found


def check_patches(client_wheel: Path, patches: list[Path]) -> None:
    """Apply ``patches`` in order to an unpacked copy of the client wheel, as the probe will
    (``patch -p1 --forward --fuzz=0``)."""
    with tempfile.TemporaryDirectory(prefix="carry-client-") as tmp:
        with zipfile.ZipFile(client_wheel) as z:
            z.extractall(tmp)
        for patch in patches:
            cmd = ["patch", "-p1", "--batch", "--forward", "--fuzz=0", "-d", tmp, "-i", str(patch)]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise BuildError(
                    f"{patch.name} does not apply to {client_wheel.name}: "
                    f"{proc.stdout.strip()[-300:]}"
                )
