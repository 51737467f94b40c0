"""Client copies and patch application.

The probe never touches the client's own files: each variant runs a fresh copy of the client's
source tree (a wheel's files, a directory's files), to which unified-diff ``.patch`` files are
applied (``a/``/``b/`` prefixes, paths relative to the client root, e.g.
``a/speculators/data_generation/custom_worker.py``) with ``patch -p1`` (or ``git apply`` when
``patch`` is missing). With ``--fix``, :func:`fix_patches` writes driftcheck's own fixes as
such patch files first.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from driftcheck.errors import UsageError
from driftcheck.patch_folder import FIXES_FILE, LEFT_FILE
from driftcheck.sources.trees import SourceTree

_TARGET = re.compile(r"^(?:\+\+\+|---) (\S+)", re.MULTILINE)


@dataclass
class AppliedPatch:
    """One patch file applied to a copy."""

    name: str
    files: list[str] = field(default_factory=list)


class PatchError(UsageError):
    """A patch does not apply to the client copy."""


def copy_tree(tree: SourceTree, dest: Path) -> list[str]:
    """Write every file of ``tree`` under ``dest``; returns the relative paths written."""
    written: list[str] = []
    for rel in sorted(tree.files()):
        parts = PurePosixPath(rel).parts
        if not parts or ".." in parts or PurePosixPath(rel).is_absolute():
            continue
        target = dest.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(tree.read_bytes(rel))
        written.append(rel)
    return written


def ensure_dist_info(dest: Path, name: str, version: str) -> str | None:
    """Give a copy without ``.dist-info`` a minimal one, so ``importlib.metadata.version(name)``
    answers (some clients read their own version at import). Returns a note, or None."""
    if any(dest.glob("*.dist-info/METADATA")):
        return None
    safe = re.sub(r"[^A-Za-z0-9.]+", "_", name)
    info = dest / f"{safe}-{version or '0'}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version or '0'}\n"
    )
    return f"wrote a minimal {info.name}/METADATA into the client copy (the source has none)"


def patch_targets(text: str) -> list[str]:
    """Files a unified diff touches (``b/`` side; ``a/`` for deletions), relative to the root.

    Raises:
        PatchError: When a path is absolute or climbs out of the root.
    """
    out: list[str] = []
    for m in _TARGET.finditer(text):
        raw = m.group(1)
        if raw == "/dev/null":
            continue
        path = PurePosixPath(raw)
        parts = path.parts[1:] if len(path.parts) > 1 else path.parts  # strip a/ or b/
        if path.is_absolute() or ".." in parts or not parts:
            raise PatchError(f"patch names an unsafe path: {raw}")
        rel = "/".join(parts)
        if rel not in out:
            out.append(rel)
    return out


def patch_files(folder: Path, *, allow_none: bool = False) -> list[Path]:
    """The patches of a folder: those the last ``driftcheck fix --out`` run there listed in its
    manifest (:mod:`driftcheck.patch_folder`: its per-file patches, not an earlier run's, not
    ``all.patch`` on top of them), else every ``.patch``/``.diff`` file, in name order.
    ``allow_none``: a folder without a patch is no error (its ``left.json`` names a launch
    flag, the only fix a served workload's patched run needs).

    Raises:
        UsageError: When the folder does not exist or holds no patch, or a patch its manifest
            lists is gone.
    """
    from driftcheck.patch_folder import MANIFEST, read_manifest

    if not folder.is_dir():
        raise UsageError(f"--patches {folder}: not a directory")
    listed = read_manifest(folder)
    if listed is not None:
        if not listed and not allow_none:
            raise UsageError(
                f"--patches {folder}: the last 'driftcheck fix --out' there wrote no patch"
            )
        missing = [name for name in listed if not (folder / name).is_file()]
        if missing:
            raise UsageError(f"--patches {folder}: {missing[0]} (listed in {MANIFEST}) is gone")
        return [folder / name for name in listed]
    found = sorted(p for p in folder.iterdir() if p.suffix in (".patch", ".diff") and p.is_file())
    if not found and not allow_none:
        raise UsageError(f"--patches {folder}: no .patch files there")
    return found


def apply_patches(root: Path, patches: list[Path]) -> list[AppliedPatch]:
    """Apply each patch to the copy at ``root`` (all are checked first, then applied).

    Raises:
        PatchError: When one does not apply; the message names the patch and the tool's reason.
    """
    applied: list[AppliedPatch] = []
    for patch in patches:
        text = patch.read_text(errors="replace")
        targets = patch_targets(text)
        if not targets:
            raise PatchError(f"{patch.name}: not a unified diff (no ---/+++ lines)")
        _apply_one(root, patch)
        applied.append(AppliedPatch(patch.name, targets))
    return applied


def _apply_one(root: Path, patch: Path) -> None:
    if shutil.which("patch"):
        base = ["patch", "-p1", "--batch", "--forward", "--fuzz=0", "--no-backup-if-mismatch"]
        base += ["-d", str(root), "-i", str(patch.resolve())]
        check = subprocess.run(
            [*base, "--dry-run"], capture_output=True, text=True, errors="replace", check=False
        )
        if check.returncode != 0:
            raise PatchError(f"{patch.name} does not apply: {_why(check)}")
        done = subprocess.run(base, capture_output=True, text=True, errors="replace", check=False)
        if done.returncode != 0:
            raise PatchError(f"{patch.name} does not apply: {_why(done)}")
        return
    if shutil.which("git"):
        # Outside any repository (discovery stops at the copy's parent), git apply acts on
        # plain files relative to the working folder, like patch -p1.
        env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(root.resolve().parent)}
        base = ["git", "apply", "-p1"]
        check = subprocess.run(
            [*base, "--check", str(patch.resolve())],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            errors="replace",
            check=False,
        )
        if check.returncode != 0:
            raise PatchError(f"{patch.name} does not apply: {_why(check)}")
        done = subprocess.run(
            [*base, str(patch.resolve())],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            errors="replace",
            check=False,
        )
        if done.returncode != 0:
            raise PatchError(f"{patch.name} does not apply: {_why(done)}")
        return
    raise PatchError("neither 'patch' nor 'git' is installed: cannot apply patches")


def _why(proc: subprocess.CompletedProcess) -> str:
    lines = [ln.strip() for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    useful = [ln for ln in lines if "FAILED" in ln or "error" in ln.lower() or "can't" in ln]
    return " | ".join((useful or lines)[:3])[:400] or f"exit {proc.returncode}"


class NoPatchError(UsageError):
    """``driftcheck fix`` made no patch for this client and target (nothing to fix)."""


def fix_patches(
    client: str,
    against: str,
    dest: Path,
    model: str | None = None,
    *,
    unsafe: bool = False,
    baseline: str | None = None,
    launch_fixes: bool = False,
) -> list[Path]:
    """Write driftcheck's own patches (``driftcheck.fixes.run.plan_patches``, with ``unsafe``
    fixes too when asked) into ``dest``, and the fixes they apply into ``dest/fixes.json``;
    scanned for the served ``model`` when its config is on this machine (else the default),
    and against ``baseline`` (the HTTP checks compare two releases). With ``launch_fixes`` (a
    served workload) a fix that only adds a flag to the server's command line is a fix too.

    Raises:
        UsageError: When this driftcheck has no fix machinery yet.
        NoPatchError: When it made no patch (and, with ``launch_fixes``, named no flag).
    """
    try:
        from driftcheck.fixes.run import plan_patches
    except ImportError as exc:
        raise UsageError(
            "--fix needs driftcheck.fixes.run.make_patches, which this driftcheck does not "
            f"have yet ({exc}); run 'driftcheck fix' yourself and pass --patches DIR"
        ) from None
    made = plan_patches(
        client, against, baseline=baseline, model=_local_model(model), unsafe=unsafe
    )
    flags = launch_flags(made.left) if launch_fixes else []
    if not made.patches and not flags:
        raise NoPatchError(f"driftcheck fix made no patch for {client} against {against}")
    dest.mkdir(parents=True, exist_ok=True)
    out: list[Path] = []
    for i, (rel, text) in enumerate(sorted(made.patches.items()), start=1):
        name = f"{i:03d}-" + rel.replace("/", "__").removesuffix(".patch") + ".patch"
        path = dest / name
        path.write_text(text)
        out.append(path)
    (dest / FIXES_FILE).write_text(json.dumps(made.fixes, indent=2) + "\n")
    (dest / LEFT_FILE).write_text(json.dumps(made.left, indent=2) + "\n")
    return out


def read_patch_folder(folder: Path, *, served: bool) -> tuple[list[Path], list[dict], list[dict]]:
    """``probe --patches DIR``: its patches, the fixes they apply (``fixes.json``) and the
    findings they leave (``left.json``); for a ``served`` workload a folder without a patch is
    enough when ``left.json`` names a launch flag (the patched run's server gets it)."""
    left = read_fixes(folder, LEFT_FILE)
    patches = patch_files(folder, allow_none=served and bool(launch_flags(left)))
    return patches, read_fixes(folder), left


def launch_flags(left: list[dict]) -> list[str]:
    """The flags the fixes left for a person say to add to the server's command line."""
    return list(dict.fromkeys(str(d["launch_flag"]) for d in left if d.get("launch_flag")))


def read_fixes(folder: Path, name: str = FIXES_FILE) -> list[dict]:
    """The fixes a patch folder says it applies (its ``fixes.json``; ``left.json``: the
    findings they leave), or none."""
    try:
        data = json.loads((folder / name).read_text())
    except (OSError, ValueError):
        return []
    return [d for d in data if isinstance(d, dict)] if isinstance(data, list) else []


def _local_model(model: str | None) -> str | None:
    """``model`` when the scan can read its config here (a model id not on this machine is
    scanned as the default model: the probe loads it, the scan cannot)."""
    if model is None:
        return None
    from driftcheck.models.configs import builtin_models, find_config

    return model if model in builtin_models() or find_config(model) is not None else None
