"""Run one command in its own process group, with a timeout, and reap every process it started.

vLLM's executor spawns worker processes (and they may spawn more). When the driver exits,
crashes, times out or the user presses Ctrl-C, nothing may be left running:

* the child starts a new session (``start_new_session``), so it and everything it spawns share
  one process group that can be signalled at once, and the terminal's Ctrl-C reaches only us;
* while it runs, its descendants are recorded from ``/proc`` (pid and start time), so a worker
  that left the group (``setsid``) or was orphaned is still found and killed;
* on any exit: SIGTERM to the group and every recorded descendant, a grace period, then SIGKILL.

Output goes to files (never to pipes that could fill up and block the child).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class RunResult:
    """What one run did."""

    returncode: int | None
    seconds: float
    timed_out: bool = False
    interrupted: bool = False
    stdout_path: Path | None = None
    stderr_path: Path | None = None
    reaped: list[int] = field(default_factory=list)  # pids still alive at the end, killed
    reaped_names: list[str] = field(default_factory=list)  # their command names
    peak_rss: int = 0  # bytes, summed over the process tree, sampled

    def stdout(self) -> str:
        return _read(self.stdout_path)

    def stderr(self) -> str:
        return _read(self.stderr_path)


def _read(path: Path | None) -> str:
    if path is None:
        return ""
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


# -- /proc helpers ---------------------------------------------------------------------------


def _stat(pid: int) -> tuple[int, int, int, str] | None:
    """``(ppid, pgid, starttime, state)`` of a process, or None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # comm may contain spaces and parentheses: split after the last ')'
    rest = raw[raw.rfind(")") + 2 :].split()
    try:
        return int(rest[1]), int(rest[2]), int(rest[19]), rest[0]
    except (IndexError, ValueError):
        return None


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def descendants(root: int) -> dict[int, int]:
    """Live descendants of ``root``: pid -> start time (from ``/proc``)."""
    children: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return {}
    for pid in pids:
        st = _stat(pid)
        if st is None:
            continue
        children.setdefault(st[0], []).append(pid)
        starts[pid] = st[2]
    out: dict[int, int] = {}
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if pid in out:
            continue
        out[pid] = starts.get(pid, 0)
        todo.extend(children.get(pid, []))
    return out


def group_members(pgid: int) -> dict[int, int]:
    """Live processes in process group ``pgid``: pid -> start time."""
    out: dict[int, int] = {}
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return out
    for pid in pids:
        st = _stat(pid)
        if st is not None and st[1] == pgid and st[3] != "Z":
            out[pid] = st[2]
    return out


def _alive(pid: int, start: int) -> bool:
    st = _stat(pid)
    return st is not None and st[2] == start and st[3] != "Z"


# -- running -----------------------------------------------------------------------------------


def run(
    cmd: list[str],
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 900,
    log_dir: Path,
    name: str = "run",
    grace: float = 5.0,
    poll: float = 0.2,
    on_line: Callable[[str], None] | None = None,
) -> RunResult:
    """Run ``cmd`` and reap its whole process tree, whatever happens.

    Args:
        cmd: The command.
        env: Its environment (default: ours).
        cwd: Its working folder.
        timeout: Seconds before the tree is killed (``timed_out`` is then True).
        log_dir: Where ``NAME.out`` and ``NAME.err`` are written.
        name: Stem of the log files.
        grace: Seconds between SIGTERM and SIGKILL.
        poll: Seconds between checks of the process tree.
        on_line: Called with each new line of stdout (progress), from this thread.

    Raises:
        KeyboardInterrupt: Re-raised after the tree was reaped.
        OSError: When the command cannot be started.
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    out_path, err_path = log_dir / f"{name}.out", log_dir / f"{name}.err"
    start = time.monotonic()
    seen: dict[int, int] = {}
    result = RunResult(None, 0.0, stdout_path=out_path, stderr_path=err_path)
    with out_path.open("wb") as out_f, err_path.open("wb") as err_f:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out_f,
            stderr=err_f,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        pgid = proc.pid
        st = _stat(proc.pid)
        if st is not None:
            seen[proc.pid] = st[2]
        offset = 0
        try:
            while True:
                rc = proc.poll()
                tree = descendants(proc.pid)
                seen.update(tree)
                rss = sum(_rss(p) for p in [proc.pid, *tree])
                result.peak_rss = max(result.peak_rss, rss)
                if on_line is not None:
                    offset = _emit(out_path, offset, on_line)
                if rc is not None:
                    result.returncode = rc
                    break
                if time.monotonic() - start > timeout:
                    result.timed_out = True
                    break
                time.sleep(poll)
        except KeyboardInterrupt:
            result.interrupted = True
            raise
        finally:
            seen.update(group_members(pgid))
            result.reaped = _reap(proc, pgid, seen, grace, result.reaped_names)
            if result.returncode is None:
                result.returncode = proc.returncode
            result.seconds = time.monotonic() - start
            if on_line is not None:
                _emit(out_path, offset, on_line)
    return result


def _emit(path: Path, offset: int, on_line: Callable[[str], None]) -> int:
    try:
        with path.open("rb") as f:
            f.seek(offset)
            chunk = f.read()
    except OSError:
        return offset
    end = chunk.rfind(b"\n")
    if end < 0:
        return offset
    for line in chunk[: end + 1].decode(errors="replace").splitlines():
        on_line(line)
    return offset + end + 1


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def _reap(
    proc: subprocess.Popen,
    pgid: int,
    seen: dict[int, int],
    grace: float,
    names: list[str] | None = None,
) -> list[int]:
    """Terminate the group and every recorded descendant; returns the pids that were alive."""
    alive = {pid: s for pid, s in seen.items() if _alive(pid, s)}
    if proc.poll() is None:
        alive.setdefault(proc.pid, seen.get(proc.pid, 0))
    reaped = sorted(alive)
    if names is not None:
        names.extend(_comm(pid) for pid in reaped)
    if not alive and not group_members(pgid):
        proc.wait()
        return reaped
    _signal_all(pgid, alive, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        proc.poll()
        alive = {pid: s for pid, s in alive.items() if _alive(pid, s)}
        alive.update({p: s for p, s in group_members(pgid).items() if p not in alive})
        if not alive:
            break
        time.sleep(0.05)
    if alive:
        _signal_all(pgid, alive, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            proc.poll()
            alive = {pid: s for pid, s in alive.items() if _alive(pid, s)}
            if not alive and not group_members(pgid):
                break
            time.sleep(0.05)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    return reaped


def _signal_all(pgid: int, pids: dict[int, int], sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    for pid, s in pids.items():
        if _alive(pid, s):  # checked just before: the pid was not reused
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
