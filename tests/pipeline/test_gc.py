"""A scan freezes the client's trees out of the cyclic GC while it collects their uses, and
leaves the collector as it found it: nothing of its own frozen, a caller's frozen objects still
frozen."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from conftest import release_tree, write_tree

from driftcheck import collect
from driftcheck.pipeline import scan

HOST = "def run(a, b):\n    return a\n"
TARGET = "def run(a):\n    return a\n"
CLIENT = "from gchost.api import run\n\n\ndef go():\n    return run(1, 2)\n"


def _scan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """The findings of a scan in a cache of its own (so the client's uses are collected)."""
    monkeypatch.setenv("DRIFTCHECK_CACHE_DIR", str(tmp_path / "cache"))
    base = release_tree(tmp_path, "gchost", "1.0", {"api.py": HOST})
    target = release_tree(tmp_path, "gchost", "2.0", {"api.py": TARGET})
    root = write_tree(tmp_path / "client", {"gcclient/__init__.py": "", "gcclient/a.py": CLIENT})
    result = scan(str(root / "gcclient"), str(target), baseline=str(base), host="gchost")
    return sorted((f.rule, f.line) for f in result.findings)


def test_a_scan_freezes_while_collecting_and_leaves_nothing_frozen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    froze: list[int] = []
    real = collect.gc.freeze
    monkeypatch.setattr(collect.gc, "freeze", lambda: (froze.append(1), real())[1])
    assert gc.get_freeze_count() == 0
    found = _scan(tmp_path, monkeypatch)
    assert froze and gc.get_freeze_count() == 0
    assert found and found == _scan_unfrozen(tmp_path / "again", monkeypatch)


def _scan_unfrozen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    monkeypatch.setattr(collect.gc, "get_freeze_count", lambda: 1)  # as if a caller froze
    return _scan(tmp_path, monkeypatch)


def test_a_callers_frozen_objects_stay_frozen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    monkeypatch.setattr(collect.gc, "freeze", lambda: calls.append("freeze"))
    monkeypatch.setattr(collect.gc, "unfreeze", lambda: calls.append("unfreeze"))
    monkeypatch.setattr(collect.gc, "get_freeze_count", lambda: 7)  # what a caller froze
    _scan(tmp_path, monkeypatch)
    assert calls == []
