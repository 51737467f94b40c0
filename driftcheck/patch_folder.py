"""A folder of patches ``driftcheck fix --out`` wrote, and its manifest.

Each run writes ``driftcheck-patches.json`` beside its patches: the per-file patches in order
and the combined one. The next run into the folder removes exactly those files (never the
user's own), and ``probe --patches DIR`` applies exactly the patches listed there, so an
earlier run's patch is never applied with the current ones (nor ``all.patch`` on top of the
per-file patches it repeats). A folder without a manifest is the user's own: every patch in it.
Beside them, ``fixes.json`` and ``left.json`` say what the patches fix and what they leave
(``probe --patches`` reports the first and starts a served workload's patched server with the
launch flags the second names).
"""

from __future__ import annotations

import json
from pathlib import Path

from driftcheck.errors import UsageError

MANIFEST = "driftcheck-patches.json"
#: Written beside the patches: the fixes they apply (file, line, rule, safety, ...) and the
#: findings they leave for a person (with ``launch_flag`` where the fix is a server flag).
FIXES_FILE = "fixes.json"
LEFT_FILE = "left.json"
_WRITER = "driftcheck fix --out"


def read_manifest(folder: Path) -> list[str] | None:
    """The per-file patches the last ``fix --out`` run into ``folder`` wrote, in order (None:
    no manifest there).

    Raises:
        UsageError: The manifest is there but is not one driftcheck wrote.
    """
    names = _listed(folder)
    return None if names is None else names[0]


def previous(folder: Path) -> list[Path]:
    """Every file the manifest in ``folder`` lists (the per-file patches and the combined
    one); none when there is no manifest.

    Raises:
        UsageError: The manifest is there but is not one driftcheck wrote.
    """
    listed = _listed(folder)
    if listed is None:
        return []
    patches, combined = listed
    return [folder / name for name in [*patches, *([combined] if combined else [])]]


def remove_previous(folder: Path) -> list[Path]:
    """Remove the patches an earlier run listed in ``folder``'s manifest (plain files only, by
    the names driftcheck gives them); returns the paths removed.

    Raises:
        UsageError: The manifest is there but is not one driftcheck wrote (nothing removed).
    """
    removed = []
    for path in previous(folder):
        if path.is_file() and not path.is_symlink():
            path.unlink()
            removed.append(path)
    return removed


def write_manifest(folder: Path, patches: list[Path], combined: Path | None) -> Path:
    """Record this run's patches (``patches``: one per file, in order; ``combined``: the one
    that repeats them) in ``folder``."""
    data = {
        "written_by": _WRITER,
        "patches": [p.name for p in patches],
        "combined": combined.name if combined else None,
    }
    path = folder / MANIFEST
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return path


def _listed(folder: Path) -> tuple[list[str], str | None] | None:
    path = folder / MANIFEST
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: not a manifest driftcheck wrote ({exc})") from None
    names = data.get("patches") if isinstance(data, dict) else None
    combined = data.get("combined") if isinstance(data, dict) else None
    if (
        not isinstance(data, dict)
        or data.get("written_by") != _WRITER
        or not isinstance(names, list)
        or not all(_own_name(n) for n in names)
        or not (combined is None or _own_name(combined))
    ):
        raise UsageError(f"{path}: not a manifest driftcheck wrote")
    return names, combined


def _own_name(name: object) -> bool:
    """A patch name as driftcheck writes them: a plain ``.patch`` file in the folder."""
    return (
        isinstance(name, str)
        and name.endswith(".patch")
        and "/" not in name
        and "\\" not in name
        and not name.startswith(".")
    )
