"""Turn findings into fixed code, unified-diff patches, and atomic in-place rewrites."""

from __future__ import annotations

import ast
import difflib
import hashlib
import json
import os
import tempfile
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import libcst as cst

from driftcheck.errors import UsageError
from driftcheck.findings import Finding, Fix
from driftcheck.fixes.base import Decline
from driftcheck.fixes.codemods import CODEMODS
from driftcheck.fixes.notebook_fix import notebook_patch, on_disk


@dataclass
class FileFix:
    """The fixes of one client file."""

    file: str
    old: str
    new: str
    applied: list[Finding] = field(default_factory=list)
    declined: list[tuple[Finding, str]] = field(default_factory=list)
    #: The file on disk where it is not ``old`` itself (a notebook's JSON).
    raw: str | None = None

    @property
    def changed(self) -> bool:
        """True when the file's code changes."""
        return self.new != self.old

    def on_disk(self) -> tuple[str, str]:
        """The file's text on disk before and after (a notebook: its JSON)."""
        return on_disk(self.raw, self.old, self.new)

    def patch(self) -> str:
        """Unified diff with ``a/`` and ``b/`` prefixes, ``git apply``- and ``patch -p1``-ready
        (a notebook's: of its JSON, after a readable diff of each changed cell)."""
        old, new = self.on_disk()
        if self.raw is None or not self.file.endswith(".ipynb"):
            return unified_diff(self.file, old, new)
        return notebook_patch(self.file, self.raw, self.new, unified_diff(self.file, old, new))


@dataclass
class FixPlan:
    """Every file's fixes, and the findings left for a person."""

    files: list[FileFix]
    manual: list[Finding]
    skipped_unsafe: list[Finding]

    @property
    def pending(self) -> list[FileFix]:
        """Files that change."""
        return [f for f in self.files if f.changed]


def unified_diff(rel: str, old: str, new: str) -> str:
    """A unified diff of one file."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    out = []
    for line in difflib.unified_diff(a, b, fromfile=f"a/{rel}", tofile=f"b/{rel}", n=3):
        out.append(line)
        if not line.endswith("\n"):
            out.append("\n\\ No newline at end of file\n")
    return "".join(out)


def fix_code(
    code: str, findings: list[Finding]
) -> tuple[str, list[Finding], list[tuple[Finding, str]]]:
    """Apply each finding's codemod to one file's code.

    Findings are applied bottom-up: every codemod edits in place, so an edit never moves the
    lines above it. The moved names of one import statement are rewritten together.
    """
    applied: list[Finding] = []
    declined: list[tuple[Finding, str]] = []
    groups: dict[tuple, list[Finding]] = {}
    spans = _import_spans(code)
    for f in findings:
        if not f.fix:
            continue
        key: tuple = (*f.fix_at, id(f))
        if f.fix.codemod == "rename-import":
            line = f.fix_at[0]
            start = next((a for a, b in spans if a <= line <= b), line)
            key = ("import", start)
        groups.setdefault(key, []).append(f)
    steps = sorted(groups.values(), key=lambda g: max(f.fix_at for f in g), reverse=True)
    for group in steps:
        fix = cast(Fix, group[0].fix)  # the plan groups findings that have a fix
        codemod = CODEMODS.get(fix.codemod or "")
        if codemod is None:
            declined.extend((f, f"no codemod {fix.codemod!r}") for f in group)
            continue
        try:
            new = codemod(code, group)
            if new == code:
                raise Decline("nothing to change at this site")
            cst.parse_module(new)
            with warnings.catch_warnings():  # the client's own oddities are not ours to print
                warnings.simplefilter("ignore")
                compile(new, group[0].file, "exec")  # what libcst parses CPython may refuse
        except Decline as exc:
            declined.extend((f, str(exc)) for f in group)
            continue
        except (cst.ParserSyntaxError, SyntaxError, KeyError, ValueError) as exc:
            declined.extend(
                (f, f"the fix would not produce valid code ({type(exc).__name__})") for f in group
            )
            continue
        except Exception as exc:  # a codemod bug must not stop the other files' fixes
            declined.extend(
                (f, f"codemod {fix.codemod} failed here ({type(exc).__name__}: {exc})")
                for f in group
            )
            continue
        code = new
        applied.extend(group)
    return code, applied, declined


def _import_spans(code: str) -> list[tuple[int, int]]:
    """(first line, last line) of every from-import statement (none when the code does not
    parse: the codemods then decline on their own)."""
    from driftcheck.client.names import parse

    try:
        tree = parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    return [
        (node.lineno, node.end_lineno or node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
    ]


def plan(
    findings: list[Finding],
    texts: Mapping[str, str],
    *,
    unsafe: bool = False,
    raw: dict[str, str] | None = None,
) -> FixPlan:
    """Decide, file by file, which findings to fix and produce the new code (``raw``: the
    files whose text on disk is not the analysed text, notebooks)."""
    fixable: dict[str, list[Finding]] = {}
    manual: list[Finding] = []
    skipped: list[Finding] = []
    for f in findings:
        if f.fix is None or f.fix.safety == "manual" or not f.fix.codemod:
            manual.append(f)
        elif f.fix.safety == "unsafe" and not unsafe:
            skipped.append(f)
        elif f.file in texts:
            fixable.setdefault(f.file, []).append(f)
    files = []
    for rel, group in sorted(fixable.items()):
        new, applied, declined = fix_code(texts[rel], group)
        files.append(FileFix(rel, texts[rel], new, applied, declined, (raw or {}).get(rel)))
    return FixPlan(files=files, manual=manual, skipped_unsafe=skipped)


def write_patches(
    fix_plan: FixPlan,
    out: Path,
    records: dict[str, list[dict]] | None = None,
    *,
    make: bool = False,
) -> list[Path]:
    """One ``.patch`` per changed file plus ``all.patch``, listed in the folder's manifest
    (:mod:`driftcheck.patch_folder`), after removing the patches an earlier run listed there
    (never the user's own files), and ``records`` beside them (file name -> JSON list: the
    fixes applied and the findings left, which ``probe --patches`` reads); returns the patches
    written. With nothing to patch, a folder that does not exist is not made, unless ``make``."""
    from driftcheck.patch_folder import MANIFEST, remove_previous, write_manifest

    if not fix_plan.pending and not make and not (out / MANIFEST).is_file():
        return []
    out.mkdir(parents=True, exist_ok=True)
    remove_previous(out)
    written = []
    combined = []
    for ff in fix_plan.pending:
        text = ff.patch()
        combined.append(text)
        path = out / (ff.file.replace("/", "__") + ".patch")
        path.write_text(text)
        written.append(path)
    whole = None
    if combined:
        whole = out / "all.patch"
        whole.write_text("".join(combined))
    for name, data in (records or {}).items():
        (out / name).write_text(json.dumps(data, indent=2) + "\n")
    write_manifest(out, written, whole)
    return written + ([whole] if whole else [])


def digest(text: str) -> str:
    """Content hash used to refuse rewriting a file edited since it was read."""
    return hashlib.sha256(text.encode("utf-8", errors="surrogateescape")).hexdigest()


def apply_in_place(fix_plan: FixPlan, root: Path) -> tuple[list[str], list[tuple[str, str]]]:
    """Rewrite changed files under ``root``; each file is replaced atomically.

    A file whose content differs from what the scan read is refused. All new contents are
    written to temporary files first, then renamed into place, so a failure leaves every file
    either old or new. A symlinked module is rewritten in its target (the rename happens in
    the target's folder, so the link stays a link); a link out of ``root`` is refused. A file
    with several hard links is refused: the rename gives it a new inode, which would leave the
    other names unfixed, and writing into the shared inode instead cannot be atomic (a crash
    or a full disk would leave a half-written file under every name).
    """
    done: list[str] = []
    refused: list[tuple[str, str]] = []
    staged: list[tuple[Path, Path, str]] = []
    top = root.resolve()
    targets: dict[Path, str] = {}
    try:
        for ff in fix_plan.pending:
            try:
                path, mode = _target(root / ff.file, top, targets)
                current = path.read_bytes().decode("utf-8", errors="surrogateescape")
            except _Refused as exc:
                refused.append((ff.file, str(exc)))
                continue
            except OSError as exc:
                refused.append((ff.file, f"cannot read: {exc.strerror or exc}"))
                continue
            try:
                current.encode("utf-8")
            except UnicodeEncodeError:  # undecodable bytes: the scan read them as U+FFFD
                refused.append((ff.file, "not valid UTF-8; rewrite it by hand"))
                continue
            old, new = ff.on_disk()
            if digest(current) != digest(old):
                refused.append((ff.file, "changed since it was scanned; scan again"))
                continue
            if not os.access(path, os.W_OK):
                refused.append((ff.file, "not writable"))
                continue
            targets[path] = ff.file
            fd, tmp_name = tempfile.mkstemp(
                prefix=f".{path.name}.", suffix=".driftcheck", dir=path.parent
            )
            # Recorded first: removed even if writing fails.
            staged.append((Path(tmp_name), path, ff.file))
            with os.fdopen(fd, "wb") as handle:
                handle.write(new.encode("utf-8", errors="surrogateescape"))
            os.chmod(tmp_name, mode & 0o7777)
        for tmp, path, rel in staged:
            os.replace(tmp, path)
            done.append(rel)
    finally:
        for tmp, _, _ in staged:
            if tmp.exists():
                tmp.unlink()
    return done, refused


class _Refused(Exception):
    """A client file ``apply_in_place`` does not rewrite; the message says why."""


def _target(path: Path, top: Path, taken: dict[Path, str]) -> tuple[Path, int]:
    """The real file a rewrite of ``path`` replaces (a symlink's target) and its mode.

    Raises:
        _Refused: A link out of the client (``top``), a file with several hard links, or one
            another client file already rewrites (a link to it).
        OSError: The file cannot be read.
    """
    try:
        real = path.resolve(strict=True)
    except RuntimeError:  # a symlink loop (Python < 3.13)
        raise _Refused("a symlink loop") from None
    if not real.is_relative_to(top):
        raise _Refused(f"a link to {real}, outside the client")
    info = real.stat()
    if info.st_nlink > 1:
        raise _Refused(
            f"has {info.st_nlink} hard links: an atomic rewrite would leave the other names "
            "unfixed; fix it by hand"
        )
    if real in taken:
        raise _Refused(f"the same file as {taken[real]}, rewritten once")
    return real, info.st_mode


def require_directory(root: Path | None, spec: str) -> Path:
    """``fix --apply`` needs files on disk."""
    if root is None:
        raise UsageError(
            f"--apply needs a directory client; {spec} is a release (use --out for patches)"
        )
    return root
