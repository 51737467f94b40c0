"""A served client's own site folder (``probes/client_deps.install_missing``): only what the
environment does not satisfy goes there, resolved by pip against the environment and what the
folder already holds (pip's ``--target`` alone reinstalls every dependency: torch 2.13.0 for
speculators 0.9.0's hs-connectors, 1.3 GB). Offline: tiny wheels of our own, a local folder as
the only index."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import build_wheel

from driftcheck.probes.client_deps import install_missing

WHEELS = {
    ("present", "1.0"): (),
    ("present", "2.0"): (),
    ("absent", "1.0"): (),
    ("needed", "1.0"): ("present>=1.0", "absent"),
    ("newer", "1.0"): ("present>=2.0",),
}


@pytest.fixture(scope="module")
def env_and_wheels(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A venv with ``present`` 1.0 installed, and the folder of wheels pip may install from."""
    root = tmp_path_factory.mktemp("site")
    wheels = root / "wheels"
    for (name, version), requires in WHEELS.items():
        build_wheel(
            wheels / f"{name}-{version}-py3-none-any.whl",
            {f"{name}/__init__.py": f"VERSION = {version!r}\n"},
            name=name,
            version=version,
            requires=requires,
            record=True,
        )
    env = root / "env"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    python = env / "bin" / "python"
    offline = ["--no-index", "--find-links", str(wheels), "--disable-pip-version-check"]
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", *offline, "present==1.0"], check=True
    )
    return python, wheels


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, env_and_wheels: tuple[Path, Path]) -> Path:
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(env_and_wheels[1]))
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    return env_and_wheels[0]


def _dists(target: Path) -> set[str]:
    return {p.name.removesuffix(".dist-info") for p in target.glob("*.dist-info")}


@pytest.mark.slow
def test_what_the_environment_has_is_not_installed_again(offline: Path, tmp_path: Path):
    target, pins = tmp_path / "site", tmp_path / "c.txt"
    pins.write_text("")
    got = install_missing(offline, target, "needed", pins)
    assert sorted(got) == ["absent==1.0", "needed==1.0"]
    assert _dists(target) == {"absent-1.0", "needed-1.0"}  # present 1.0: the environment's
    # The folder counts as installed too: asked again, nothing is installed.
    assert install_missing(offline, target, "absent", pins) == []


@pytest.mark.slow
def test_near_miss_a_version_the_environment_does_not_satisfy_goes_into_the_folder(
    offline: Path, tmp_path: Path
):
    target, pins = tmp_path / "site", tmp_path / "c.txt"
    pins.write_text("")
    assert sorted(install_missing(offline, target, "newer", pins)) == [
        "newer==1.0",
        "present==2.0",
    ]
    assert _dists(target) == {"newer-1.0", "present-2.0"}
    # A constraint holding the environment's version refuses it (one line says why).
    pins.write_text("present==1.0\n")
    from driftcheck.envs.environment import EnvError

    with pytest.raises(EnvError, match="pip install --dry-run newer"):
        install_missing(offline, tmp_path / "other", "newer", pins)
