"""The managed environments' disk: sizes with shared files counted once, eviction of the least
recently used above ``probe-cache-gb`` (never one in use), hard links between identical files,
the limit's setting, and the build's progress lines (fake environments in a temporary cache)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from driftcheck.config import load_config
from driftcheck.envs import disk as env_cache
from driftcheck.envs import managed as managed_envs
from driftcheck.envs.disk import disk_usage, evict, in_use, limit_bytes, share_files
from driftcheck.errors import UsageError

MB = 10**6


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DRIFTCHECK_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _env(cache: Path, name: str, mb: int, used_ago: float, same: bytes = b"") -> Path:
    root = cache / "envs" / name
    site = root / "lib" / "site-packages"
    site.mkdir(parents=True)
    (site / "own.so").write_bytes(os.urandom(mb * MB))
    if same:
        (site / "same.so").write_bytes(same)
    (root / "env.json").write_text("{}")
    stamp = time.time() - used_ago
    (root / ".last-used").write_text("")
    os.utime(root / ".last-used", (stamp, stamp))
    return root


def test_evict_removes_the_least_recently_used_first(cache):
    old = _env(cache, "vllm-0.11.0", 3, used_ago=7200)
    mid = _env(cache, "vllm-0.16.0", 3, used_ago=3600)
    new = _env(cache, "vllm-0.25.0", 3, used_ago=10)
    (cache / "envs" / "witness-numpy-2.0.0").mkdir()  # not a probe environment
    said: list[str] = []
    removed = evict(7 * MB, progress=said.append)
    assert [r for r, _ in removed] == [old]
    assert not old.exists() and mid.exists() and new.exists()
    assert (cache / "envs" / "witness-numpy-2.0.0").exists()
    assert said[0].startswith("evicting vllm-0.11.0 (0.0 GB, last used 2.0 h ago)")


def test_evict_never_takes_one_kept_or_in_use(cache):
    old = _env(cache, "vllm-0.11.0", 3, used_ago=7200)
    mid = _env(cache, "vllm-0.16.0", 3, used_ago=3600)
    new = _env(cache, "vllm-0.25.0", 3, used_ago=10)
    said: list[str] = []
    with in_use(old):
        assert env_cache.busy(old)
        removed = evict(1 * MB, keep=(mid,), progress=said.append)
    assert [r for r, _ in removed] == [new]
    assert old.exists() and mid.exists()
    assert "none left to evict" in said[-1]
    assert not env_cache.busy(old)  # the marker went with the block


def test_a_marker_of_a_dead_process_does_not_hold_the_environment(cache):
    root = _env(cache, "vllm-0.11.0", 1, used_ago=10)
    (root / ".in-use").mkdir()
    (root / ".in-use" / "999999999").write_text("")
    assert not env_cache.busy(root)


def test_room_for_the_next_environment(cache):
    _env(cache, "vllm-0.11.0", 3, used_ago=7200)
    _env(cache, "vllm-0.16.0", 3, used_ago=10)
    assert evict(7 * MB) == []
    assert len(evict(7 * MB, room=3 * MB)) == 1


def test_share_files_links_identical_files_and_sizes_count_them_once(cache):
    same = os.urandom(2 * MB)
    a = _env(cache, "vllm-0.11.0", 1, used_ago=10, same=same)
    b = _env(cache, "vllm-0.16.0", 1, used_ago=10, same=same)
    (b / "lib" / "site-packages" / "differs.so").write_bytes(os.urandom(MB))
    (a / "lib" / "site-packages" / "differs.so").write_bytes(os.urandom(MB))
    (a / "bin").mkdir()
    (b / "bin").mkdir()
    (a / "bin" / "tool").write_bytes(same)
    (b / "bin" / "tool").write_bytes(same)
    before, used_before = disk_usage([a, b])
    said: list[str] = []
    saved = share_files(b, [a], progress=said.append)
    assert saved == 2 * MB and "shared 0.00 GB" in said[0]
    twin_a, twin_b = a / "lib/site-packages/same.so", b / "lib/site-packages/same.so"
    assert os.stat(twin_a).st_ino == os.stat(twin_b).st_ino
    assert os.stat(a / "bin/tool").st_ino != os.stat(b / "bin/tool").st_ino  # scripts: never
    assert os.stat(a / "lib/site-packages/differs.so").st_nlink == 1
    envs, used = disk_usage([a, b])
    assert used == used_before - 2 * MB
    assert envs[0].bytes - envs[0].own_bytes == 2 * MB  # the shared file is not its own
    assert share_files(b, [a]) == 0  # linked already


def test_probe_cache_gb_setting(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[tool.driftcheck]\nprobe-cache-gb = 12.5\n")
    monkeypatch.chdir(tmp_path)
    assert limit_bytes("speculators==0.3.0") == int(12.5 * 10**9)
    assert load_config(tmp_path / "pyproject.toml").probe_cache_gb == 12.5
    (tmp_path / "pyproject.toml").write_text("[tool.driftcheck]\nhost = 'vllm'\n")
    assert limit_bytes("speculators==0.3.0") == 40 * 10**9
    for bad in ("'40'", "0", "true"):
        (tmp_path / "pyproject.toml").write_text(f"[tool.driftcheck]\nprobe-cache-gb = {bad}\n")
        with pytest.raises(UsageError, match="'probe-cache-gb' must be a positive number"):
            load_config(tmp_path / "pyproject.toml")


def test_a_long_build_step_says_its_time_and_size(tmp_path, monkeypatch):
    from driftcheck.envs import steps as env_steps

    monkeypatch.setattr(env_steps, "HEARTBEAT", 0.2)
    (tmp_path / "f").write_bytes(b"x" * 1000)
    said: list[str] = []
    cmd = [sys.executable, "-c", "import time; time.sleep(0.7)"]
    env_steps.run_step(
        cmd, "pip install torch==2.10.0", env=dict(os.environ), watch=tmp_path, say=said.append
    )
    assert said and said[0].startswith("  ... pip install torch==2.10.0: 0 s, 0.0 GB so far")
    with pytest.raises(managed_envs.EnvError, match="pip x failed"):
        env_steps.run_step(
            [sys.executable, "-c", "raise SystemExit(3)"], "pip x", env=dict(os.environ)
        )
    # pip's note on releases for another Python is no reason: the real error line is.
    noisy = (
        "import sys; print('ERROR: Ignored the following versions that require a different "
        "python version: 0.52.0 Requires-Python >=3.6,<3.9', file=sys.stderr); print('ERROR: "
        "ResolutionImpossible: numba==0.65.0', file=sys.stderr); raise SystemExit(1)"
    )
    with pytest.raises(managed_envs.EnvError, match=r"exit 1\): ERROR: ResolutionImpossible"):
        env_steps.run_step([sys.executable, "-c", noisy], "pip y", env=dict(os.environ))


def test_managed_env_evicts_before_a_build(cache, monkeypatch):
    old = _env(cache, "vllm-0.11.0", 3, used_ago=7200)
    monkeypatch.setattr(env_cache, "NEW_ENV_BYTES", 2 * MB)
    monkeypatch.setattr(managed_envs, "has_gpu", lambda: False)

    def build(root, dist, version, progress=None):
        raise managed_envs.EnvError("stop here")

    monkeypatch.setattr(managed_envs, "_build", build)
    with pytest.raises(managed_envs.EnvError, match="stop here"):
        managed_envs.managed_env("0.16.0", cache_limit=4 * MB)
    assert not old.exists()


def test_a_torch_release_pin_the_index_does_not_serve_is_left_out(monkeypatch):
    """torchaudio is pinned to torch's release; where the index has no such torchaudio
    (torch 2.13.0, vLLM 0.27+), it is left out with a note, not a failed build."""
    from driftcheck.sources import versions

    served = {"torchaudio": ["2.11.1", "2.11.0"]}
    monkeypatch.setattr(versions, "available_versions", lambda name, **_: served[name])
    _, reqs, notes = managed_envs.cpu_requirements(["torch==2.13.0+cpu", "torchaudio", "numpy"])
    assert "torchaudio==2.13.0" in reqs
    kept, said = managed_envs._served_pins(reqs, notes, "2.13.0")
    assert kept == ["numpy"]
    assert said[-1] == "left out torchaudio: the index has no torchaudio==2.13.0 (torch's release)"
    assert not any(n.startswith("pinned torchaudio") for n in said)
    _, reqs, notes = managed_envs.cpu_requirements(["torch==2.11.0", "torchaudio"])
    assert managed_envs._served_pins(reqs, notes, "2.11.0")[0] == ["torchaudio==2.11.0"]


def test_a_torch_extension_that_does_not_import_is_uninstalled(monkeypatch, tmp_path):
    """torchvision built for another torch raises at import (every transformers import that
    looks for it fails with it): the build uninstalls it and says why; one that imports, or is
    not installed, stays as it is."""
    import subprocess

    outcomes = {"torchvision": (1, "RuntimeError: operator torchvision::nms does not exist")}
    ran: list[list[str]] = []

    def fake_run(cmd, **_kw):
        name = cmd[-1].rsplit("import ", 1)[-1]
        code, err = outcomes.get(name, (3, ""))  # 3: not installed
        return subprocess.CompletedProcess(cmd, code, "", err)

    monkeypatch.setattr(subprocess, "run", fake_run)
    monkeypatch.setattr(managed_envs, "_pip", lambda py, args, **_kw: ran.append(args))
    notes: list[str] = []
    managed_envs._drop_broken_extensions(tmp_path / "python", notes, lambda _m: None)
    assert ran == [["uninstall", "-y", "torchvision"]]
    assert notes == [
        "uninstalled torchvision: it does not import with this torch "
        "(RuntimeError: operator torchvision::nms does not exist)"
    ]


def test_managed_envs_help_is_help_not_a_version(capsys):
    """``python -m driftcheck.envs.managed --help`` prints its usage; it once took
    ``--help`` for a vLLM version to build."""
    from driftcheck.envs.managed import main

    with pytest.raises(SystemExit) as stop:
        main(["--help"])
    assert stop.value.code == 0
    assert "VERSION" in capsys.readouterr().out
