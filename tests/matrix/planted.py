"""A small matrix without network: ``tinyhost`` releases and a ``myclient`` release planted in a
private cache (archives and index listings, as a fetch leaves them), and a folder client."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import OFFLINE_PIP_ENV, build_wheel

#: tinyhost's ``make`` per release: 2.0 makes ``b`` keyword-only ``c``; 3.0 removes ``helper``.
HOST = {
    "1.0": ("a, b=1", True),
    "2.0": ("a, *, c", True),
    "3.0": ("a, *, c", False),
}
CLIENT = (
    "from tinyhost.core import make, helper\n\n\ndef go():\n    helper()\n    return make(1, b=2)\n"
)
FOLDER_CLIENT = "from tinyhost.core import helper\n\n\ndef go():\n    return helper()\n"


@dataclass
class Matrix:
    cache: Path
    clients: Path
    folder: Path

    def plant(self, name: str, version: str, files: dict[str, str], requires=()) -> None:
        """Put a release in the cache as a fetch would, and list it on the 'index'."""
        folder = self.cache / "archives" / name / version
        folder.mkdir(parents=True, exist_ok=True)
        wheel = build_wheel(
            folder / f"{name}-{version}-py3-none-any.whl",
            files,
            name=name,
            version=version,
            requires=tuple(requires),
        )
        sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
        (folder / "entry.json").write_text(json.dumps({"file": wheel.name, "sha256": sha}))
        listing = self.cache / "index" / f"{name}.json"
        listing.parent.mkdir(parents=True, exist_ok=True)
        known = json.loads(listing.read_text())["versions"] if listing.exists() else []
        versions = sorted({*known, version}, key=lambda v: [int(p) for p in v.split(".")])
        listing.write_text(json.dumps({"time": time.time() + 86400, "versions": versions[::-1]}))


def _host_files(version: str) -> dict[str, str]:
    sig, has_helper = HOST[version]
    core = f"def make({sig}):\n    return a\n"
    if has_helper:
        core += "\n\ndef helper():\n    return 1\n"
    return {"tinyhost/__init__.py": "", "tinyhost/core.py": core}


@pytest.fixture(name="matrix")
def matrix_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Matrix:
    """tinyhost 1.0/2.0/3.0, myclient 0.1 (pinned to tinyhost 1.0) and a folder client, in a
    private cache; pip points nowhere, so anything not planted fails at once."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("DRIFTCHECK_CACHE_DIR", str(cache))
    monkeypatch.setenv("DRIFTCHECK_NO_RANGED", "1")
    for key, value in OFFLINE_PIP_ENV.items():
        monkeypatch.setenv(key, value)
    m = Matrix(cache, tmp_path / "clients.txt", tmp_path / "folderclient")
    for version in HOST:
        m.plant("tinyhost", version, _host_files(version))
    m.plant(
        "myclient", "0.1",
        {"myclient/__init__.py": "", "myclient/use.py": CLIENT},
        requires=["tinyhost==1.0"],
    )  # fmt: skip
    (m.folder / "folderclient").mkdir(parents=True)
    (m.folder / "pyproject.toml").write_text(
        '[project]\nname = "folderclient"\nversion = "0.2"\ndependencies = ["tinyhost==1.0"]\n'
    )
    (m.folder / "folderclient" / "__init__.py").write_text("")
    (m.folder / "folderclient" / "go.py").write_text(FOLDER_CLIENT)
    m.clients.write_text("# the matrix's clients\nmyclient==0.1\n\n./folderclient  # a folder\n")
    return m
