"""The installed wheel finds what the source checkout finds, on every declared Python.

``.ci/run`` builds the wheel once and installs it into a fresh environment for each Python the
project declares (``.ci/wheels.py``), then points ``DRIFTCHECK_WHEEL_REPORTS`` at the reports.
Without that variable this test builds the wheel itself, for the running Python only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import missing

from driftcheck.pipeline import scan

pytestmark = [pytest.mark.network, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / ".ci"))
import wheels  # noqa: E402  (the CI script: one list of what the wheel must run)


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("DRIFTCHECK_WHEEL_REPORTS")
    if given:
        return Path(given)
    out = tmp_path_factory.mktemp("wheel-reports")
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    subprocess.run(
        [sys.executable, str(ROOT / ".ci" / "wheels.py"), "--out", str(out), "--python", here],
        check=True,
    )
    return out


def _checkout(args: list[str]) -> list[dict]:
    """The findings of the same command, run from the source checkout in this process."""
    assert args[0] == "scan" and args[2] == "--against"
    flags = dict(zip(args[2::2], args[3::2], strict=True))
    result = scan(
        args[1],
        flags["--against"],
        baseline=flags.get("--baseline"),
        host=flags.get("--host"),
    )
    return [f.to_dict() for f in result.findings]


def _installed(path: Path) -> list[dict]:
    return json.loads(path.read_text())["findings"]


def test_every_declared_python_was_tested(reports: Path):
    if not os.environ.get("DRIFTCHECK_WHEEL_REPORTS"):
        missing("DRIFTCHECK_WHEEL_REPORTS is not set: only .ci/run tests every declared Python")
    assert json.loads((reports / "pythons.json").read_text()) == wheels.declared_pythons()
    assert wheels.declared_pythons(), "no Python version declared in pyproject's classifiers"


def test_declared_pythons_match_requires_python():
    from packaging.specifiers import SpecifierSet

    from driftcheck.compat import tomllib

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    allowed = SpecifierSet(meta["requires-python"])
    declared = wheels.declared_pythons()
    assert all(f"{v}.0" in allowed for v in declared), (declared, allowed)
    assert f"{sys.version_info[0]}.{sys.version_info[1]}" in declared


def test_installed_wheel_finds_what_the_checkout_finds(reports: Path):
    versions = json.loads((reports / "pythons.json").read_text())
    smoke, main = _checkout(wheels.SMOKE), _checkout(wheels.MAIN)
    assert smoke and main, "the commands compared must find something"
    for version in versions:
        assert _installed(reports / f"{version}-smoke.json") == smoke, version
        assert _installed(reports / f"{version}-main.json") == main, version
