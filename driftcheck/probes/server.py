"""A server the probe starts, waits for and always stops: :class:`Server`.

The server (``vllm serve`` of the managed environment, or any command) runs in a session of its
own (``start_new_session``: it and every process it spawns, API servers and engine cores, share
one process group that the terminal's Ctrl-C does not reach), on a free port of 127.0.0.1, its
output in a log file. :meth:`Server.wait_healthy` polls its health route until a deadline and
fails early when the process exits. Leaving the ``with`` block in any way (success, an
exception, a timeout, ``KeyboardInterrupt``) sends SIGTERM to the group and every descendant
recorded from ``/proc``, then SIGKILL after a grace period (:func:`driftcheck.probes.runner`'s
reaping, shared with the driver's run). While it runs a thread samples the resident memory of
its whole process tree (:attr:`Server.peak_rss`: API servers, engine core, every CPU worker).
"""

from __future__ import annotations

import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

from driftcheck.probes import runner

HEALTH_PATH = "/health"


class ServerError(RuntimeError):
    """The server did not become healthy (exited, or the deadline passed)."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on at ``host`` now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts connections on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


class Server:
    """One server process group: started on entering, reaped on leaving."""

    def __init__(
        self,
        cmd: list[str],
        *,
        port: int,
        log: Path,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        host: str = "127.0.0.1",
        grace: float = 10.0,
        sample_every: float = 0.5,
    ) -> None:
        self.cmd, self.port, self.log, self.env, self.cwd = cmd, port, log, env, cwd
        self.host, self.grace = host, grace
        self.proc: subprocess.Popen | None = None
        self.seen: dict[int, int] = {}
        self.start_seconds: float | None = None  # until healthy
        self.reaped: list[int] = []
        self.reaped_names: list[str] = []
        self.returncode: int | None = None
        self.peak_rss = 0  # bytes, summed over the process tree, sampled every sample_every s
        self._sample_every = sample_every
        self._stop_sampling = threading.Event()
        self._sampler: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __enter__(self) -> Server:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._started = time.monotonic()
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                self.cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
            )
        self._record()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()
        return self

    def _sample(self) -> None:
        """Keep the largest resident memory of the server's process tree until it stops."""
        proc = self.proc
        while proc is not None and not self._stop_sampling.is_set():
            tree = [proc.pid, *runner.descendants(proc.pid)]
            self.peak_rss = max(self.peak_rss, sum(runner._rss(p) for p in tree))
            if proc.poll() is not None:
                return
            self._stop_sampling.wait(self._sample_every)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _record(self) -> None:
        """Remember the group's processes (a worker that leaves the group is still found)."""
        if self.proc is None:
            return
        st = runner._stat(self.proc.pid)
        if st is not None:
            self.seen.setdefault(self.proc.pid, st[2])
        self.seen.update(runner.descendants(self.proc.pid))
        self.seen.update(runner.group_members(self.proc.pid))

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_healthy(self, timeout: float, poll: float = 0.5) -> float:
        """Poll ``GET /health`` until it answers 200; returns the seconds since the start.

        Raises:
            ServerError: The process exited, or ``timeout`` seconds passed.
        """
        deadline = self._started + timeout
        while True:
            self._record()
            if not self.alive():
                code = self.proc.returncode if self.proc else None
                raise ServerError(f"the server exited with code {code} before it was healthy")
            try:
                with urllib.request.urlopen(self.url + HEALTH_PATH, timeout=2) as resp:
                    if resp.status == 200:
                        self.start_seconds = time.monotonic() - self._started
                        return self.start_seconds
            except (urllib.error.URLError, OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise ServerError(f"the server was not healthy after {timeout:.0f} s")
            time.sleep(poll)

    def log_tail(self, lines: int = 60) -> str:
        """The last lines of the server's log."""
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """SIGTERM to the group and every recorded process, SIGKILL after the grace period.
        A Ctrl-C while it waits does not cut the reaping short."""
        if self.proc is None:
            return
        self._stop_sampling.set()
        if self._sampler is not None:
            self._sampler.join(timeout=5)
        self._record()
        old = signal.getsignal(signal.SIGINT)
        try:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        except ValueError:  # not the main thread: nothing to hold off
            old = None
        try:
            self.reaped = runner._reap(
                self.proc, self.proc.pid, self.seen, self.grace, self.reaped_names
            )
        finally:
            if old is not None:
                signal.signal(signal.SIGINT, old)
        self.returncode = self.proc.returncode
        self.proc = None
