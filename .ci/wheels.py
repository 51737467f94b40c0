"""What users install is what we test: build the wheel once, then for every Python version the
project declares (its ``Programming Language :: Python :: 3.X`` classifiers), install the wheel
into a fresh virtual environment and run the README's main command and an offline smoke test.

Each run gets a fresh driftcheck cache (nothing analysed by the checkout is reused) and writes
its reports under ``--out``; ``tests/test_wheel.py`` compares them with the checkout's findings.

Usage::

    python .ci/wheels.py --out DIR [--python 3.11 ...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
#: The README's main command (its arguments after ``driftcheck``).
MAIN = ["scan", "speculators==0.3.0", "--against", "vllm==0.16.0"]
#: The offline smoke test: a fixture client against the fixture hosts, nothing fetched.
SMOKE = [
    "scan",
    str(FIXTURES / "clients" / "miniclient"),
    "--against",
    str(FIXTURES / "hosts" / "minihost" / "2.0"),
    "--baseline",
    str(FIXTURES / "hosts" / "minihost" / "1.0"),
    "--host",
    "minihost",
]


def declared_pythons() -> list[str]:
    """The ``3.X`` versions of the project's classifiers."""
    import tomllib

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    prefix = "Programming Language :: Python :: "
    out = [c[len(prefix) :] for c in meta.get("classifiers", []) if c.startswith(prefix)]
    return [v for v in out if v.count(".") == 1]


def find_python(version: str) -> str:
    """An interpreter of ``version``: pyenv's, else one on PATH."""
    try:
        root = subprocess.run(
            ["pyenv", "root"], capture_output=True, text=True, check=True
        ).stdout.strip()
        found = sorted(Path(root, "versions").glob(f"{version}.*/bin/python{version}"))
        if found:
            return str(found[-1])
    except (OSError, subprocess.CalledProcessError):
        pass
    exe = shutil.which(f"python{version}")
    if exe:
        return exe
    raise SystemExit(f"wheels: no Python {version} on this machine")


def build_wheel(dest: Path) -> Path:
    """``pip wheel`` of a clean copy of the checkout, once (a ``build/`` folder left in the
    checkout by an earlier build could carry modules that no longer exist)."""
    src = dest.parent / "src"
    skip = shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__", ".*cache")
    shutil.copytree(ROOT, src, ignore=skip)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dest), str(src)],
        check=True,
    )
    [wheel] = dest.glob("driftcheck-*.whl")
    return wheel


def _run(cmd: list[str], *, env: dict[str, str], cwd: Path, ok: tuple[int, ...] = (0,)) -> str:
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    if proc.returncode not in ok:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-15:]
        raise SystemExit(f"wheels: {' '.join(cmd)} exited {proc.returncode}:\n" + "\n".join(tail))
    return proc.stdout


#: Run by the installed wheel's Python: the matrix page's template is in the wheel.
_PAGE_CHECK = (
    "from importlib import resources; "
    "page = resources.files('driftcheck.matrix').joinpath('page.html'); "
    "print('ok' if page.is_file() and '@@DATA@@' in page.read_text() else 'missing')"
)


def check_python(version: str, wheel: Path, out: Path, work: Path) -> dict:
    """Install the wheel for one Python and run the main command and the smoke test."""
    t0 = time.perf_counter()
    venv = work / f"venv-{version}"
    subprocess.run([find_python(version), "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["DRIFTCHECK_CACHE_DIR"] = str(work / f"cache-{version}")
    _run([str(py), "-m", "pip", "install", "-q", str(wheel)], env=env, cwd=work)
    exe = str(venv / "bin" / "driftcheck")
    here = work / f"cwd-{version}"  # not the checkout: only the installed wheel is importable
    here.mkdir()
    _run([exe, "--version"], env=env, cwd=here)
    listed = _run([exe, "rules", "list"], env=env, cwd=here)
    builtin = sorted(p.stem for p in (ROOT / "rules").glob("*/*.toml"))
    missing = [r for r in builtin if r not in listed]
    if missing:
        raise SystemExit(f"wheels: Python {version}: rules list lacks {', '.join(missing)}")
    api = _run(
        [str(py), "-c", "import driftcheck; print(len(driftcheck.load_rules()))"], env=env, cwd=here
    )
    if int(api.strip()) != len(builtin):
        raise SystemExit(f"wheels: Python {version}: load_rules() has {api.strip()} rules")
    # package data beyond the rules: the matrix page's template (driftcheck matrix report --html)
    page = _run([str(py), "-c", _PAGE_CHECK], env=env, cwd=here)
    if page.strip() != "ok":
        raise SystemExit(f"wheels: Python {version}: the matrix page's template is missing")
    smoke = _run(
        [exe, *SMOKE, "--format", "json"], env={**env, "PIP_NO_INDEX": "1"}, cwd=here, ok=(0, 1)
    )
    (out / f"{version}-smoke.json").write_text(smoke)
    main = _run([exe, *MAIN, "--format", "json", "-q"], env=env, cwd=here, ok=(1,))
    (out / f"{version}-main.json").write_text(main)
    found = len(json.loads(main)["findings"])
    return {
        "python": version,
        "main_findings": found,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="Folder for the reports.")
    parser.add_argument("--python", action="append", help="Only these versions (repeat).")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    versions = args.python or declared_pythons()
    with tempfile.TemporaryDirectory(prefix="driftcheck-wheels-") as tmp:
        work = Path(tmp)
        wheel = build_wheel(work / "dist")
        for version in versions:
            done = check_python(version, wheel, args.out, work)
            print(
                f"wheels: Python {version}: {done['main_findings']} findings, {done['seconds']} s"
            )
    (args.out / "pythons.json").write_text(json.dumps(versions))


if __name__ == "__main__":
    main()
