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
        "170 B of it in 13 files other driftcheck code made, which this one never reads: "
        "cache clear --stale removes them",
    ]
    every = run_cli("cache", "list", "--all").stdout.splitlines()
    assert "uses            10 B  11.pickle" in every and len(every) == 17


def test_cache_clear_one_kind_then_all(cache: Path):
    result = run_cli("cache", "clear", "uses")
    assert (result.exit_code, result.stdout) == (0, "freed 120 B\n")
    assert not (cache / "uses").exists() and (cache / "archives").is_dir()
    result = run_cli("cache", "clear")
    assert (result.exit_code, result.stdout) == (0, "freed 2.4 kB\n")
    assert [p.name for p in cache.iterdir()] == ["CACHEDIR.TAG"]  # still driftcheck's folder


def test_cache_clear_stale_removes_only_what_other_code_made(cache: Path):
    from driftcheck.cache import code_suffix

    mine = {
        f"snapshots/vllm/0.16.0-0123.griffe-2.4.1{code_suffix()}": 40,
        f"uses/abcd{code_suffix()}": 7,
        f"findings/ef01{code_suffix()}": 5,
        "snapshots/vllm/0.16.0-0123.json": 30,  # the release's texts: any code reads them
        "uses/abcd.pickle.77.part": 3,  # a write in progress
    }
    for rel, size in mine.items():
        (cache / rel).parent.mkdir(parents=True, exist_ok=True)
        (cache / rel).write_bytes(b"y" * size)
    result = run_cli("cache", "clear", "--stale")
    assert (result.exit_code, result.stdout) == (0, "freed 170 B\n")
    assert all((cache / rel).exists() for rel in mine)
    assert not (cache / "snapshots/vllm/0.16.0.pickle").exists()
    assert sorted(p.name for p in (cache / "uses").iterdir()) == sorted(
        [f"abcd{code_suffix()}", "abcd.pickle.77.part"]
    )
    assert (cache / "archives/vllm/0.16.0/vllm-0.16.0.whl").exists()
    assert "--stale" not in run_cli("cache", "list").stdout  # nothing stale is left to say
    again = run_cli("cache", "clear", "--stale", "uses")
    assert (again.exit_code, again.stdout) == (0, "freed 0 B\n")


def test_cache_clear_stale_refuses_a_kind_not_keyed_by_code(cache: Path):
    line = assert_one_error_line(run_cli("cache", "clear", "--stale", "archives"), "'archives'")
    assert "findings, snapshots, uses" in line
    assert (cache / "archives/vllm/0.16.0/vllm-0.16.0.whl").exists()


def test_cache_clear_unknown_kind(cache: Path):
    line = assert_one_error_line(run_cli("cache", "clear", "archive"), "'archive'")
    assert "archives, snapshots, uses" in line


# -- only driftcheck's own folder, only driftcheck's own entries --------------------------------


def _tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


FOREIGN = {
    # DRIFTCHECK_CACHE_DIR pointed at a project folder.
    "project": {"pyproject.toml": "[project]\n", "src/app.py": "x = 1\n", "uses/keep.txt": "!"},
    # ... at the user's cache of every tool (pip's and Hugging Face's caches beside ours).
    "user-cache": {"pip/http/a": "x", "huggingface/hub/m": "x", "driftcheck/archives/a": "x"},
    # ... at a folder another tool tagged as its cache (a cargo target folder).
    "other-tag": {"CACHEDIR.TAG": "Signature: 8a477f597d28d172789f06886806bc55\n", "index/a": "x"},
}


@pytest.mark.parametrize("layout", sorted(FOREIGN))
@pytest.mark.parametrize("command", [("clear",), ("clear", "uses"), ("list",)])
def test_a_folder_driftcheck_did_not_make_is_refused(tmp_path, monkeypatch, layout, command):
    root = tmp_path / layout
    _tree(root, FOREIGN[layout])
    before = sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))
    monkeypatch.setenv("DRIFTCHECK_CACHE_DIR", str(root))
    result = run_cli("cache", *command)
    assert_one_error_line(result, f"{root} is not a driftcheck cache folder")
    assert result.stdout == ""
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == before


def test_cache_path_names_a_foreign_folder_without_claiming_it(tmp_path, monkeypatch):
    _tree(tmp_path / "project", FOREIGN["project"])
    monkeypatch.setenv("DRIFTCHECK_CACHE_DIR", str(tmp_path / "project"))
    result = run_cli("cache", "path")
    assert (result.exit_code, result.stdout) == (0, f"{tmp_path / 'project'}\n")
    assert "is not a driftcheck cache folder" in result.stderr
    assert not (tmp_path / "project" / "CACHEDIR.TAG").exists()


def test_the_folder_driftcheck_creates_is_marked_and_only_its_kinds_are_cleared(
    tmp_path, monkeypatch
):
    root = tmp_path / "new" / "cache"
    monkeypatch.setenv("DRIFTCHECK_CACHE_DIR", str(root))
    made = run_cli("cache", "path")
    assert (made.stdout, made.stderr) == (f"{root}\n", "")
    assert "created by driftcheck" in (root / "CACHEDIR.TAG").read_text()
    _tree(root, {"uses/a.pickle": "xyz", "notes.txt": "the user's own", "mine/b": "xy"})
    listed = run_cli("cache", "list")
    assert listed.stdout.splitlines()[:2] == ["uses        3 B  a.pickle", "1 entry, 3 B"]
    result = run_cli("cache", "clear")
    assert (result.exit_code, result.stdout) == (0, "freed 3 B\n")
    assert sorted(p.name for p in root.iterdir()) == ["CACHEDIR.TAG", "mine", "notes.txt"]


def test_an_existing_cache_of_driftcheck_kinds_only_is_adopted(cache: Path):
    """A cache made before the marker existed holds only driftcheck's kinds: it is marked on
    first use (so is an empty folder, which the test suite's own cache starts as)."""
    assert run_cli("cache", "list").exit_code == 0
    assert "created by driftcheck" in (cache / "CACHEDIR.TAG").read_text()


def test_clear_leaves_an_entry_in_use_and_says_so(cache: Path):
    from driftcheck.cache import locked
    from driftcheck.envs.disk import in_use

    env = cache / "envs" / "vllm-0.16.0"
    _tree(env, {"bin/python": "#!", "env.json": "{}"})
    with locked(cache / "archives" / "vllm" / "0.16.0"), in_use(env):
        result = run_cli("cache", "clear")
    line = assert_one_error_line(result, "could not remove 2 entries")
    assert "archives/vllm/0.16.0 (in use" in line and "envs/vllm-0.16.0 (in use" in line
    assert result.stdout == "freed 470 B\n"  # speculators, the snapshot and the uses
    assert (cache / "archives" / "vllm" / "0.16.0" / "vllm-0.16.0.whl").stat().st_size == 2000
    assert (env / "bin" / "python").exists()
    assert not (cache / "uses").exists() and not (cache / "snapshots").exists()
    assert not (cache / "archives" / "speculators").exists()


def test_clear_says_what_it_could_not_remove(cache: Path, monkeypatch: pytest.MonkeyPatch):
    """As on a read-only mount (root ignores file modes, so the refusal is the file system's)."""
    import errno
    import os

    real_unlink = os.unlink

    def unlink(path, *args, **kwargs):
        if str(path).endswith(".pickle"):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", unlink)
    result = run_cli("cache", "clear", "uses", "snapshots")
    line = assert_one_error_line(result, "could not remove 13 entries", "Read-only file system")
    assert "uses/00.pickle" in line
    assert result.stdout == "freed 0 B\n"
    assert len(list((cache / "uses").iterdir())) == 12


def test_every_folder_driftcheck_writes_into_is_a_known_kind():
    """``cache list`` and ``clear`` handle only :data:`KINDS`: a kind written but not registered
    would be neither listed nor cleared (and would stop an old cache being adopted)."""
    import re

    from driftcheck.cache import KINDS

    used: set[str] = set()
    for path in (Path(__file__).parents[2] / "driftcheck").rglob("*.py"):
        used.update(re.findall(r'cache_root\(\) / "([^"]+)"', path.read_text()))
    assert used and used <= set(KINDS), used - set(KINDS)
