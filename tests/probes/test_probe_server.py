"""The served probe's server lifecycle: started on a free loopback port, waited for with a
deadline, and reaped whole (its process group and every descendant) on every way out:
success, failure, timeout and Ctrl-C. Runs a fixture server of our own (fixtures/servers)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from driftcheck.probes import runner
from driftcheck.probes.server import Server, ServerError, free_port, port_in_use

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "servers" / "health_server.py"


def _server(tmp_path: Path, *flags: str, grace: float = 2.0) -> Server:
    port = free_port()
    cmd = [sys.executable, str(FIXTURE), str(port), *flags]
    return Server(cmd, port=port, log=tmp_path / "server.log", grace=grace)


def _left(server: Server) -> list[int]:
    """The recorded processes still alive, and the port still open."""
    alive = [pid for pid, start in server.seen.items() if runner._alive(pid, start)]
    return alive + ([-server.port] if port_in_use(server.port) else [])


def test_success_leaves_nothing(tmp_path: Path) -> None:
    server = _server(tmp_path, "--child")
    with server:
        seconds = server.wait_healthy(20)
        assert port_in_use(server.port)
        time.sleep(0.3)
        server._record()
        assert len(server.seen) >= 2  # the server and its grandchild
    assert seconds < 20
    assert _left(server) == []


def test_the_peak_memory_counts_the_whole_tree(tmp_path: Path) -> None:
    """The sampled peak is the server's and its descendants' resident memory together (a
    served CPU run's workers are the server's grandchildren), not the server process alone."""
    server = _server(tmp_path, "--child")
    with server:
        server.wait_healthy(20)
        deadline = time.monotonic() + 10
        while len(server.seen) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
            server._record()
        time.sleep(1.5)  # a few samples with the child alive
        own = runner._rss(server.proc.pid)
        tree = sum(runner._rss(pid) for pid in server.seen)
    assert len(server.seen) >= 2 and tree > own > 0
    assert server.peak_rss >= 0.9 * tree and server.peak_rss > own
    assert _left(server) == []


def test_failure_inside_leaves_nothing(tmp_path: Path) -> None:
    server = _server(tmp_path, "--child")
    with pytest.raises(RuntimeError, match="client failed"), server:
        server.wait_healthy(20)
        time.sleep(0.3)
        raise RuntimeError("client failed")
    assert len(server.seen) >= 2
    assert _left(server) == []


def test_timeout_leaves_nothing(tmp_path: Path) -> None:
    server = _server(tmp_path, "--never-healthy", "--child")
    t = time.monotonic()
    with pytest.raises(ServerError, match="not healthy after 2 s"), server:
        server.wait_healthy(2)
    assert time.monotonic() - t < 15
    assert _left(server) == []


def test_exit_before_healthy_is_reported(tmp_path: Path) -> None:
    server = _server(tmp_path, "--exit-early")
    with pytest.raises(ServerError, match="exited with code 3"), server:
        server.wait_healthy(20)
    assert _left(server) == []


def test_ctrl_c_leaves_nothing(tmp_path: Path) -> None:
    server = _server(tmp_path, "--never-healthy", "--child")
    stop = threading.Event()

    def interrupt() -> None:
        # Ctrl-C once the server and its child are both recorded (a fixed delay raced a slow
        # machine's start), or after 20 s in any case.
        deadline = time.monotonic() + 20
        while not stop.is_set() and len(server.seen) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        if not stop.is_set():
            os.kill(os.getpid(), signal.SIGINT)

    # Python leaves SIGINT ignored when its parent ignored it (a run started in the background
    # of a script): Ctrl-C is KeyboardInterrupt here whatever this run inherited.
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    thread = threading.Thread(target=interrupt, daemon=True)
    thread.start()
    try:
        with pytest.raises(KeyboardInterrupt), server:
            server.wait_healthy(30)
    finally:
        stop.set()
        signal.signal(signal.SIGINT, before)
    assert len(server.seen) >= 2
    assert _left(server) == []


def test_sigterm_ignored_gets_sigkill(tmp_path: Path) -> None:
    server = _server(tmp_path, "--ignore-term", grace=1.0)
    with server:
        server.wait_healthy(20)
    assert server.returncode == -signal.SIGKILL
    assert _left(server) == []


def test_healthy_server_near_miss_is_not_killed_early(tmp_path: Path) -> None:
    """A healthy server is left running until the block ends."""
    server = _server(tmp_path)
    with server:
        server.wait_healthy(20)
        time.sleep(1.0)
        assert server.alive() and port_in_use(server.port)
