"""The baseline host: one that reads none of the target's packages is an error, not a scan
that silently reports nothing (SQLAlchemy 1.3.17's sdist, its package under ``lib/``, once)."""

from __future__ import annotations

from pathlib import Path

import pytest

from driftcheck.errors import SourceError
from driftcheck.pipeline import scan


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.fixture
def client(tmp_path: Path) -> Path:
    return _tree(tmp_path / "client", {"c/__init__.py": "import hostpkg\nhostpkg.gone()\n"})


def test_a_baseline_with_the_target_s_package_is_compared(tmp_path: Path, client: Path):
    target = _tree(tmp_path / "t", {"hostpkg/__init__.py": "def kept(): ...\n"})
    base = _tree(tmp_path / "b", {"hostpkg/__init__.py": "def kept(): ...\ndef gone(): ...\n"})
    result = scan(str(client), str(target), baseline=str(base), host="hostpkg")
    assert [f.rule for f in result.findings if f.severity == "error"] == ["missing-symbol"]


def test_a_baseline_that_holds_none_of_the_target_s_packages_is_an_error(
    tmp_path: Path, client: Path
):
    target = _tree(tmp_path / "t", {"hostpkg/__init__.py": "def kept(): ...\n"})
    base = _tree(tmp_path / "b", {"tests/__init__.py": "", "examples/__init__.py": ""})
    with pytest.raises(SourceError, match=r"hold none of the target's packages \(hostpkg\)"):
        scan(str(client), str(target), baseline=str(base), host="hostpkg")
