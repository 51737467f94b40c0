"""One step of building a managed environment: a command (pip, venv) run with a progress line
every :data:`HEARTBEAT` seconds (the time so far and the size of the folder being filled) and,
when it fails, the one line that says why."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

from driftcheck.envs.disk import folder_bytes
from driftcheck.envs.environment import EnvError, Progress, clean_env

#: pip's note on the releases it skipped because they need another Python (it starts with
#: ``ERROR:`` before the real error, e.g. numba's old releases).
_IGNORED = re.compile(r"ERROR: Ignored the following (yanked )?versions")

#: Seconds between the progress lines of a long pip step.
HEARTBEAT = 30.0


def pip_step(
    py: Path, args: list[str], *, watch: Path | None = None, say: Progress | None = None
) -> None:
    """Run ``python -m pip ARGS`` of an environment as one build step (:func:`run_step`)."""
    run_step(
        [str(py), "-m", "pip", "--disable-pip-version-check", *args],
        f"pip {args[0]} {'-r requirements.txt' if '-r' in args else args[-1]}",
        env=clean_env(),
        watch=watch,
        say=say,
    )


def run_step(
    cmd: list[str],
    what: str,
    *,
    env: dict[str, str],
    watch: Path | None = None,
    say: Progress | None = None,
) -> None:
    """Run one build step (its first pip ``ERROR`` line, or its last line, says why it failed;
    pip's note on the releases it ignored for another Python is no reason); with ``watch`` and
    ``say``, a line every :data:`HEARTBEAT` seconds
    with the time so far and the size of the folder being filled."""
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            stdin=subprocess.DEVNULL,
            env=env,
        )
    except OSError as exc:
        raise EnvError(f"cannot run {what}: {exc.strerror or exc}") from None
    while True:
        try:
            stdout, stderr = proc.communicate(timeout=HEARTBEAT)
            break
        except subprocess.TimeoutExpired:
            if watch is not None and say is not None:
                took = time.monotonic() - start
                say(f"  ... {what}: {took:.0f} s, {folder_bytes(watch) / 1e9:.1f} GB so far")
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    if proc.returncode != 0:
        lines = [ln.strip() for ln in (stderr + stdout).splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("ERROR") and not _IGNORED.match(ln)]
        first = errors[0] if errors else (lines[-1] if lines else "")
        raise EnvError(f"{what} failed (exit {proc.returncode}): {first[:400]}")
