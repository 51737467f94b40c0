"""``driftcheck cache path|list|clear`` on a cache folder of the test's own."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import assert_one_error_line, run_cli


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("DRIFTCHECK_CACHE_DIR", str(root))
    files = {
        "archives/vllm/0.16.0/vllm-0.16.0.whl": 2000,
        "archives/vllm/0.16.0.lock": 0,
        "archives/speculators/0.3.0/speculators-0.3.0.whl": 300,
        "snapshots/vllm/0.16.0.pickle": 50,
        **{f"uses/{i:02d}.pickle": 10 for i in range(12)},
    }
    for rel, size in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"x" * size)
    (root / "archives" / "vllm" / "0.0.1").mkdir()  # an abandoned fetch: not an entry
    return root


def test_cache_path(cache: Path):
    result = run_cli("cache", "path")
    assert (result.exit_code, result.stdout) == (0, f"{cache}\n")


def test_cache_list(cache: Path):
    result = run_cli("cache", "list")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [
        "archives       300 B  speculators/0.3.0",
        "archives      2.0 kB  vllm/0.16.0",
        "snapshots       50 B  vllm",
        "uses           120 B  (12 entries; --all lists them)",
        "15 entries, 2.5 kB",
    ]
    every = run_cli("cache", "list", "--all").stdout.splitlines()
    assert "uses            10 B  11.pickle" in every and len(every) == 16


def test_cache_clear_one_kind_then_all(cache: Path):
    result = run_cli("cache", "clear", "uses")
    assert (result.exit_code, result.stdout) == (0, "freed 120 B\n")
    assert not (cache / "uses").exists() and (cache / "archives").is_dir()
    result = run_cli("cache", "clear")
    assert (result.exit_code, result.stdout) == (0, "freed 2.4 kB\n")
    assert list(cache.iterdir()) == []


def test_cache_clear_unknown_kind(cache: Path):
    line = assert_one_error_line(run_cli("cache", "clear", "archive"), "'archive'")
    assert "archives, snapshots, uses" in line
