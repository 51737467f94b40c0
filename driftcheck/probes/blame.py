"""Where a failed probe run's blame lies, decided from the run's traceback, the patches' hunks
and the scan's findings (what the fixes applied and what they left):

* ``outside-host``: the client imports another package's module that this environment lacks
  (:func:`outside_host`);
* ``left-for-a-person``: the run fails at a use the scan reports with no applied fix;
* ``fix-is-wrong``: the failing client line is one a patch wrote, or the use a fix changed;
* ``missed-by-scan``: the failing client line calls into the host (the frames below it are the
  host's, or the line itself raised a TypeError or AttributeError) and the scan reported nothing
  there.

Anything else stays undecided (None): a person reads the traceback.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from driftcheck.probes.outcome import RunOutcome, left_at

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", re.MULTILINE)
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
_MISSING = re.compile(r"No module named '([\w.]+)'")
_CANNOT = re.compile(r"cannot import name '(\w+)' from '([\w.]+)'")
#: Exceptions a call or attribute read raises at the client's own line when the host's
#: signature or class no longer fits it (no host frame below it).
_AT_THE_CALL = ("TypeError", "AttributeError")


@dataclass(frozen=True)
class Hunk:
    """One hunk of a unified diff: its old and new line ranges, the new lines it adds and, for
    each line it keeps, (new line, old line)."""

    old_start: int
    old_len: int
    new_start: int
    new_len: int
    added: tuple[int, ...]
    kept: tuple[tuple[int, int], ...] = ()


def hunks_of(text: str) -> list[Hunk]:
    """The hunks of one file's unified diff."""
    out: list[Hunk] = []
    lines = text.splitlines()
    for i, ln in enumerate(lines):
        m = _HUNK.match(ln)
        if not m:
            continue
        old, old_len, new, new_len = (int(g) if g else 1 for g in m.groups())
        added, kept, at, was = [], [], new, old
        for body in lines[i + 1 :]:
            if body.startswith(("@@", "--- ", "diff ")):
                break
            if body.startswith("+"):
                added.append(at)
                at += 1
            elif body.startswith("-"):
                was += 1
            elif not body.startswith("\\"):
                kept.append((at, was))
                at, was = at + 1, was + 1
        out.append(Hunk(old, old_len, new, new_len, tuple(added), tuple(kept)))
    return out


def patch_hunks(patches: list[Path]) -> dict[str, list[dict]]:
    """Each patched file's hunks (relative path -> hunks as dicts), from the patch files."""
    from driftcheck.probes.patches import patch_targets

    out: dict[str, list[dict]] = {}
    for path in patches:
        text = path.read_text(errors="replace")
        # One section per file: from its '--- ' header to the next one.
        parts = re.split(r"(?m)^(?=--- )", text)
        for part in parts:
            targets = patch_targets(part)
            if targets:
                out.setdefault(targets[0], []).extend(vars(h) for h in hunks_of(part))
    return out


def original_line(hunks: list[dict], line: int) -> int | None:
    """The client's own line that is ``line`` of the patched copy; None: a patch wrote it."""
    shift = 0
    for h in sorted(hunks, key=lambda h: h["new_start"]):
        if line in h["added"]:
            return None
        if line < h["new_start"]:
            break
        if line < h["new_start"] + h["new_len"]:
            return dict(map(tuple, h["kept"])).get(line)
        shift = (h["old_start"] + h["old_len"]) - (h["new_start"] + h["new_len"])
    return line + shift


def _frames(traceback: str) -> list[tuple[str, int, str]]:
    last = traceback.rsplit("Traceback (most recent call last)", 1)[-1]
    return [(m.group(1), int(m.group(2)), m.group(3)) for m in _FRAME.finditer(last)]


def _host_file(path: str, host: str) -> str | None:
    marker = f"/site-packages/{host.replace('-', '_')}/"
    return host.replace("-", "_") + "/" + path.split(marker, 1)[1] if marker in path else None


def _failing_frame(run: RunOutcome, host: str) -> tuple[str, int, str | None] | None:
    """(client file, patched line, the host frame below it) of the innermost client frame."""
    err = run.error or {}
    root = (run.client_root or "").rstrip("/") + "/"
    for text in (run.worker_traceback if err.get("from_worker") else None, err.get("traceback")):
        frames = _frames(str(text or ""))
        inner = [i for i, f in enumerate(frames) if run.client_root and f[0].startswith(root)]
        if not inner:
            continue
        i = inner[-1]
        below = next((h for f in frames[i + 1 :] if (h := _host_file(f[0], host))), None)
        host_at = None
        if below is not None:
            line = next(f[1] for f in frames[i + 1 :] if _host_file(f[0], host) == below)
            host_at = f"{below}:{line}"
        return frames[i][0][len(root) :], frames[i][1], host_at
    return None


def _at(item: dict, line: int) -> bool:
    """The line is the finding's: from its use's first line to the finding's last (a missing
    argument spans the whole call, from the callee to the closing parenthesis)."""
    first = int(item.get("use_line") or item.get("line") or 0)
    last = max(int(item.get("line") or 0), int(item.get("end_line") or 0))
    return first <= line <= last


def blame(
    run: RunOutcome,
    host: str,
    *,
    fixes: list[dict],
    left: list[dict],
    hunks: dict[str, list[dict]],
) -> dict | None:
    """The blame of a failed run (``kind`` and a line of ``text``), or None when undecided."""
    if run.ok:
        return None
    if outside := outside_host(run, host) or _import_elsewhere(run, host):
        return {"kind": "outside-host", "text": outside}
    if hit := left_at(run, left):
        return _left(hit)
    got = _failing_frame(run, host)
    if got is None:
        return None
    file, line, host_at = got
    own = original_line(hunks.get(file, []), line)
    if own is None:
        fix = _fix_of_hunk(file, line, fixes, hunks)
        by = f" by {fix.get('rule')} ({file}:{fix.get('line')})" if fix else ""
        return {
            "kind": "fix-is-wrong",
            "text": f"fix is wrong: {file}:{line} of the patched copy was written{by}",
        }
    for fx in fixes:
        if fx.get("file") == file and _at(fx, own):
            return {
                "kind": "fix-is-wrong",
                "text": f"fix is wrong: {file}:{own} is the use {fx.get('rule')} fixed, and "
                "it still fails",
            }
    kind = str((run.error or {}).get("type") or "").rsplit(".", 1)[-1]
    if host_at is None and kind not in _AT_THE_CALL:
        return None
    for item in left:
        if item.get("file") == file and _at(item, own):
            return _left(item)
    into = f" (down to {host_at})" if host_at else f" ({kind} at that line)"
    return {
        "kind": "missed-by-scan",
        "text": f"missed by the scan: {file}:{own} calls into {host}{into}, and the scan "
        "reported nothing there",
    }


def outside_host(run: RunOutcome, host: str) -> str | None:
    """A failure that is not the host's API: the client imports a module of another package,
    which this environment has at a version that lacks it. None for anything else."""
    err = run.error or {}
    kind = str(err.get("type") or "").rsplit(".", 1)[-1]
    if kind not in ("ModuleNotFoundError", "ImportError"):
        return None
    message = str(err.get("message") or "")
    m = _MISSING.search(message)
    module = m.group(1) if m else None
    if module is None and (c := _CANNOT.search(message)):
        module = f"{c.group(2)}.{c.group(1)}"
    if not module:
        return None
    top = module.split(".", 1)[0]
    if top.replace("-", "_") == host.replace("-", "_"):
        return None
    frame = str(err.get("client_frame") or "").split(" in ", 1)[0]
    if not frame:
        return None
    have = run.versions.get(top)
    at = f" ({top} {have} in this environment)" if have else ""
    return f"outside {host}'s API: {frame} imports {module}{at}, not a {host} module"


def _import_elsewhere(run: RunOutcome, host: str) -> str | None:
    """Importing the client fails inside another installed package, with no frame of the host
    anywhere in the traceback (its causes included): not the host's API."""
    err = run.error or {}
    text = str(err.get("traceback") or "")
    if run.failed_stage != "import" or not run.client_root or not text:
        return None
    frames = [(m.group(1), int(m.group(2))) for m in _FRAME.finditer(text)]
    if any(_host_file(path, host) for path, _ in frames):
        return None
    last = _frames(text)
    root = run.client_root.rstrip("/") + "/"
    inner = [i for i, f in enumerate(last) if f[0].startswith(root)]
    if not inner or inner[-1] == len(last) - 1 or "/site-packages/" not in last[-1][0]:
        return None
    client, raised = last[inner[-1]], last[-1]
    where = raised[0].split("/site-packages/", 1)[1]
    return (
        f"outside {host}'s API: importing the client fails in {where.split('/', 1)[0]} "
        f"({where}:{raised[1]}), called from {client[0][len(root) :]}:{client[1]}; "
        f"no {host} frame is involved"
    )


def _left(item: dict) -> dict:
    from driftcheck.probes.report import left_line

    return {"kind": "left-for-a-person", "text": left_line(item)}


def _fix_of_hunk(file: str, line: int, fixes: list[dict], hunks: dict) -> dict | None:
    for h in hunks.get(file, []):
        if line in h["added"]:
            end = h["old_start"] + h["old_len"]
            return next(
                (
                    fx
                    for fx in fixes
                    if fx.get("file") == file and h["old_start"] <= int(fx.get("line") or 0) < end
                ),
                None,
            )
    return None
