"""Release snapshots: what a run adds is kept, and a run that visited nothing loses nothing.

The release is a wheel built from ``fixtures/hosts/minihost/2.0`` and served through a patched
``fetch_release``; the cache is the test's own folder.
"""

from __future__ import annotations

import hashlib
import pickle
from pathlib import Path

import pytest
from conftest import build_wheel

from driftcheck.host.load import load_host, release_host, save_snapshots
from driftcheck.sources.specs import PackageSpec

HOST = Path(__file__).resolve().parents[2] / "fixtures" / "hosts" / "minihost" / "2.0"
SPEC = PackageSpec(kind="release", name="minihost", version="2.0")


@pytest.fixture
def release(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DRIFTCHECK_CACHE_DIR", str(tmp_path / "cache"))
    files = {p.relative_to(HOST).as_posix(): p.read_text() for p in HOST.rglob("*.py")}
    wheel = build_wheel(
        tmp_path / "minihost-2.0-py3-none-any.whl", files, name="minihost", version="2.0"
    )
    monkeypatch.setattr("driftcheck.sources.fetch.fetch_release", lambda *_a, **_k: wheel)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    monkeypatch.setattr("driftcheck.sources.fetch.cached_sha256", lambda *_a: digest)
    release_host(SPEC)
    yield
    release_host(SPEC)


def _pickled(api: object) -> dict:
    with api.tree.modules_path.open("rb") as f:
        return pickle.load(f)


def test_visited_modules_are_kept_and_a_run_reading_only_facts_keeps_them(release):
    api = load_host(SPEC)
    assert api.module("minihost.core") is not None
    save_snapshots()
    visited = set(_pickled(api))
    assert "minihost.core" in visited
    release_host(SPEC)
    # A later run that only reads a host-wide fact (as `driftcheck routes` does) changes the
    # snapshot but looks no module up: the earlier run's modules stay.
    again = load_host(SPEC)
    assert again.fact("test-fact", lambda: [1, 2]) == [1, 2]
    save_snapshots()
    assert set(_pickled(again)) == visited
    release_host(SPEC)
    third = load_host(SPEC)
    assert third.fact("test-fact", lambda: pytest.fail("recomputed")) == [1, 2]
    assert third.module("minihost.core") is not None and third.tree.archive_reads == 0


def test_a_snapshot_of_an_sdist_read_before_its_lib_folder_was_found_is_read_again(
    tmp_path: Path,
):
    import json

    from driftcheck.host.snapshot import FORMAT, LAYOUT, SnapshotTree
    from driftcheck.sources.trees import DirectoryTree

    real = tmp_path / "real"
    (real / "p").mkdir(parents=True)
    (real / "p" / "__init__.py").write_text("X = 1\n")
    opened: list[int] = []

    def opener() -> DirectoryTree:
        opened.append(1)
        return DirectoryTree(real)

    old = {"format": FORMAT, "files": ["lib/p/__init__.py", "test/__init__.py"], "top_level": []}
    old |= {"metadata": None, "texts": {}, "facts": {}}
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(old))
    tree = SnapshotTree(path, opener, label="p 1.0")
    assert opened and tree.files() == ["p/__init__.py"] and tree.data["layout"] == LAYOUT
    # near miss: a snapshot without the layout mark whose packages sit at the top is kept
    path.write_text(json.dumps({**old, "files": ["p/__init__.py", "lib/notes.txt"]}))
    opened.clear()
    kept = SnapshotTree(path, opener, label="p 1.0")
    assert not opened and kept.files() == ["p/__init__.py", "lib/notes.txt"]
