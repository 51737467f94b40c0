"""The cache under faults a user meets: a full disk (ENOSPC is said at once, never after a
fallback download into the same disk), a read-only warm cache (read without locks), and an
unreachable index (the cached release list is used, and its age is said)."""

from __future__ import annotations

import builtins
import errno
import io
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from conftest import assert_one_error_line, build_wheel, run_cli

from driftcheck.errors import SourceError
from driftcheck.sources import fetch as releases
from driftcheck.sources import ranged
from driftcheck.sources.fetch import fetch_release

HOST = {"1.0": "a, b=1", "2.0": "a, *, c"}  # make(a, b=1) becomes make(a, *, c)
CLIENT = "from tinyhost.core import make\n\n\ndef go():\n    return make(1, b=2)\n"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DRIFTCHECK_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def downloads(cache: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """The whole-archive download, faked: it writes a tiny ``tinyhost`` wheel (calls counted)."""
    calls: list[tuple[str, str]] = []

    def download(name: str, version: str, dest: Path, *, quiet: bool) -> None:
        calls.append((name, version))
        files = {
            f"{name}/__init__.py": "",
            f"{name}/core.py": f"def make({HOST[version]}):\n    return a\n",
            f"{name}/extra.py": "def thing():\n    pass\n" if version == "1.0" else "",
        }
        build_wheel(dest / f"{name}-{version}-py3-none-any.whl", files, name=name, version=version)

    monkeypatch.setattr(releases, "_pip_download", download)
    return calls


def _under(path: object, root: Path) -> bool:
    return isinstance(path, (str, os.PathLike)) and os.fspath(path).startswith(str(root))


def _patch_open(monkeypatch: pytest.MonkeyPatch, root: Path, code: int) -> None:
    """Opening a file under ``root`` for writing fails with ``code``."""
    real = io.open

    def open_(file, mode="r", *args, **kwargs):
        if any(c in mode for c in "wax+") and _under(file, root):
            raise OSError(code, os.strerror(code), os.fspath(file))
        return real(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", open_)
    monkeypatch.setattr(io, "open", open_)


# -- a full disk ---------------------------------------------------------------------------------


def _wheel_at(monkeypatch: pytest.MonkeyPatch, size: int = 100) -> None:
    """pip says where the wheel lives, and the file host serves it (no network)."""
    name = "tinyhost-1.0-py3-none-any.whl"
    monkeypatch.delenv("DRIFTCHECK_NO_RANGED", raising=False)
    where = ranged.WheelLocation(f"http://127.0.0.1:9/{name}", None, name)
    monkeypatch.setattr(ranged, "locate", lambda _n, _v: where)
    monkeypatch.setattr(ranged, "_content_length", lambda _url: size)


def test_a_full_disk_is_said_at_once_without_a_whole_download(cache, downloads, monkeypatch):
    _wheel_at(monkeypatch)
    monkeypatch.setattr(ranged.urllib.request, "urlopen", lambda *a, **k: io.BytesIO(b"x" * 100))
    _patch_open(monkeypatch, cache, errno.ENOSPC)
    with pytest.raises(SourceError) as info:
        fetch_release("tinyhost", "1.0")
    assert str(info.value).startswith(f"no space left on {cache / 'archives/tinyhost/1.0'} (")
    assert downloads == []  # no fallback into the same disk


def test_pip_saying_no_space_is_said_at_once(cache, monkeypatch, tmp_path):
    monkeypatch.delenv("DRIFTCHECK_NO_RANGED", raising=False)
    seen: list[list[str]] = []
    full = (
        "ERROR: Could not install packages due to an OSError: [Errno 28] No space left on "
        f"device: '{tmp_path}/pip-unpack-1x2y/tinyhost-1.0-py3-none-any.whl'\n"
    )

    def run(cmd, **kwargs):
        seen.append(cmd)
        return subprocess.CompletedProcess(cmd, 1, stdout="", stderr=full)

    monkeypatch.setattr(subprocess, "run", run)
    result = run_cli("scan", str(_client(tmp_path)), "--against", "tinyhost==2.0")
    assert_one_error_line(result, f"no space left on {tmp_path} (")
    assert len(seen) == 1  # pip's dry run said it: no download attempts follow
    with pytest.raises(SourceError, match=f"^no space left on {tmp_path} "):
        releases._pip_download("tinyhost", "2.0", tmp_path / "dest", quiet=True)
    assert len(seen) == 2  # one attempt, not every platform and Python


def test_a_lost_connection_still_falls_back_to_the_whole_download(cache, downloads, monkeypatch):
    _wheel_at(monkeypatch)

    def reset(*args, **kwargs):
        raise ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")

    monkeypatch.setattr(ranged.urllib.request, "urlopen", reset)
    assert fetch_release("tinyhost", "1.0").name == "tinyhost-1.0-py3-none-any.whl"
    assert downloads == [("tinyhost", "1.0")]


# -- a read-only warm cache ------------------------------------------------------------------------


def _client(tmp_path: Path) -> Path:
    root = tmp_path / "client"
    (root / "myclient").mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text('[project]\nname = "myclient"\nversion = "0.1"\n')
    (root / "myclient" / "__init__.py").write_text("")
    (root / "myclient" / "good.py").write_text(CLIENT)
    return root


def _read_only(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    """Make ``root`` behave as a read-only mount: its modes say so (for a user), and every
    write under it fails with EROFS (for root, whom modes do not stop)."""
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            os.chmod(os.path.join(dirpath, name), 0o444)
        os.chmod(dirpath, 0o555)
    _patch_open(monkeypatch, root, errno.EROFS)
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

    def refuse(real, check=lambda *a, **k: True):
        def call(*args, **kwargs):
            if any(_under(a, root) for a in args[:2]) and check(*args, **kwargs):
                if real is os.mkdir and os.path.isdir(args[0]):
                    raise FileExistsError(errno.EEXIST, "File exists", os.fspath(args[0]))
                raise OSError(errno.EROFS, "Read-only file system", os.fspath(args[0]))
            return real(*args, **kwargs)

        return call

    monkeypatch.setattr(os, "open", refuse(os.open, lambda _p, flags, *a, **k: flags & write_flags))
    for name in ("mkdir", "replace", "rename", "unlink", "remove", "rmdir", "utime", "link"):
        monkeypatch.setattr(os, name, refuse(getattr(os, name)))


def test_a_read_only_warm_cache_is_read_without_locks(cache, downloads, monkeypatch, tmp_path):
    """The cache was warmed by another job (CI's main branch); this one, on a read-only copy,
    reads a host module that job did not (the snapshot misses, the archive is opened)."""
    monkeypatch.setenv("DRIFTCHECK_NO_RANGED", "1")
    client = _client(tmp_path)
    args = ["scan", str(client), "--against", "tinyhost==2.0", "--baseline", "1.0"]
    warm = run_cli(*args, "--format", "json")
    assert warm.exit_code == 1, warm.stderr
    (client / "myclient" / "more.py").write_text("from tinyhost.extra import thing\n")
    try:
        _read_only(monkeypatch, cache)
        again = run_cli(*args, "--format", "json")
        monkeypatch.undo()
    finally:
        for dirpath, _dirs, _files in os.walk(cache):
            os.chmod(dirpath, 0o755)
    assert again.exit_code == 1, again.stderr
    found = sorted(f["symbol"] for f in json.loads(again.stdout)["findings"])
    assert found == ["tinyhost.core.make", "tinyhost.extra.thing"]
    assert downloads == [("tinyhost", "2.0"), ("tinyhost", "1.0")]  # nothing fetched again


def test_a_read_only_cached_release_is_served_without_its_lock(cache, downloads, monkeypatch):
    monkeypatch.setenv("DRIFTCHECK_NO_RANGED", "1")
    archive = fetch_release("tinyhost", "1.0")
    try:
        _read_only(monkeypatch, cache)
        assert fetch_release("tinyhost", "1.0") == archive
        with pytest.raises(SourceError, match="Read-only file system"):
            fetch_release("tinyhost", "2.0")  # a miss still needs the lock: said in one line
        monkeypatch.undo()
    finally:
        for dirpath, _dirs, _files in os.walk(cache):
            os.chmod(dirpath, 0o755)
    assert downloads == [("tinyhost", "1.0")]


# -- an unreachable index ------------------------------------------------------------------------


def _listing(cache: Path, age_s: float) -> None:
    (cache / "index").mkdir(parents=True, exist_ok=True)
    listing = {"time": time.time() - age_s, "versions": ["2.0", "1.0"]}
    (cache / "index" / "tinyhost.json").write_text(json.dumps(listing))


def test_offline_latest_says_how_old_the_cached_release_list_is(cache, downloads, tmp_path):
    from conftest import OFFLINE_PIP_ENV

    _listing(cache, age_s=3 * 86400 + 60)
    args = ["scan", str(_client(tmp_path)), "--against", "tinyhost@latest", "--baseline", "1.0"]
    env = {**OFFLINE_PIP_ENV, "DRIFTCHECK_NO_RANGED": "1"}
    text = run_cli(*args, env=env)
    assert text.exit_code == 1, text.stderr
    head = text.stdout.splitlines()[:2]
    assert head[0].startswith("myclient 0.1 against tinyhost 2.0 (baseline 1.0)")
    assert head[1] == (
        "release list of tinyhost from the cache, 3 days old (index unreachable): newer "
        "releases than 2.0 may exist"
    )
    data = json.loads(run_cli(*args, "--format", "json", env=env).stdout)
    listed = data["host"]["release_list"]
    assert (listed["source"], listed["why"]) == ("cache", "index unreachable")
    assert 3 * 86400 + 60 <= listed["age_s"] < 3 * 86400 + 600


@pytest.mark.parametrize("against", ["tinyhost@latest", "tinyhost==2.0"])
def test_a_fresh_listing_or_an_exact_version_says_nothing(cache, downloads, tmp_path, against):
    from conftest import OFFLINE_PIP_ENV

    _listing(cache, age_s=60 if against.endswith("@latest") else 3 * 86400)
    args = ["scan", str(_client(tmp_path)), "--against", against, "--baseline", "1.0"]
    env = {**OFFLINE_PIP_ENV, "DRIFTCHECK_NO_RANGED": "1"}
    text = run_cli(*args, env=env)
    assert text.exit_code == 1, text.stderr
    assert "release list" not in text.stdout
    assert (
        "release_list" not in json.loads(run_cli(*args, "--format", "json", env=env).stdout)["host"]
    )


def test_offline_timeline_to_latest_says_how_old_the_cached_release_list_is(
    cache, downloads, tmp_path
):
    from conftest import OFFLINE_PIP_ENV

    _listing(cache, age_s=3 * 86400 + 60)
    env = {**OFFLINE_PIP_ENV, "DRIFTCHECK_NO_RANGED": "1"}
    args = ["timeline", str(_client(tmp_path)), "--host", "tinyhost", "--from", "1.0"]
    text = run_cli(*args, "--to", "latest", env=env)
    assert text.exit_code in (0, 1), text.stderr
    assert text.stdout.splitlines()[1] == (
        "release list of tinyhost from the cache, 3 days old (index unreachable): newer "
        "releases than 2.0 may exist"
    )
    data = json.loads(run_cli(*args, "--to", "latest", "--format", "json", env=env).stdout)
    assert data["host"]["release_list"]["why"] == "index unreachable"
    # The near miss: an explicit last release needs no fresh list.
    exact = run_cli(*args, "--to", "2.0", env=env)
    assert "release list" not in exact.stdout
    assert (
        "release_list"
        not in json.loads(run_cli(*args, "--to", "2.0", "--format", "json", env=env).stdout)["host"]
    )
