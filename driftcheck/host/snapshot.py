"""On-disk snapshots of a host release: what analysis read, so a warm scan opens no archive.

A snapshot is keyed by name, version and the archive's SHA-256. It holds the release's file
list and metadata, the text of every module a scan visited, and the host-wide facts that need a
pass over all files (raise-guards, top-level definitions). It grows as clients reach new
modules: a miss reads the archive once and the snapshot is saved again.
"""

from __future__ import annotations

import json
import os
import pickle
from collections.abc import Callable
from pathlib import Path

from packaging.utils import canonicalize_name

from driftcheck.cache import cache_root, code_digest, code_suffix, locked
from driftcheck.host.walk import gc_paused
from driftcheck.sources.metadata import DistMetadata
from driftcheck.sources.trees import SourceTree, sdist_package_dir

FORMAT = 2
#: How much of a snapshot's text is written at a time (characters).
_SLICE = 1 << 20
#: How an sdist's files are laid out (2: the folder that holds its packages, ``lib/`` too, is
#: stripped). Older snapshots are read again only where that folder is still there.
LAYOUT = 2


def _unstripped(files: list[str]) -> bool:
    """True when a file list still has a ``src/`` or ``lib/`` folder that holds the packages."""
    return bool(sdist_package_dir(dict.fromkeys(files, b"")))


def snapshot_path(name: str, version: str, sha256: str) -> Path:
    """Where the snapshot of one release archive lives."""
    return cache_root() / "snapshots" / canonicalize_name(name) / f"{version}-{sha256[:16]}.json"


class SnapshotTree(SourceTree):
    """A source tree served from a snapshot, opening the real archive only on a miss."""

    def __init__(self, path: Path, opener: Callable[[], SourceTree], label: str) -> None:
        super().__init__()
        self.path = path
        self.label = label
        self._opener = opener
        self._real: SourceTree | None = None
        self.dirty = False
        self.data: dict = {}
        if path.exists():
            try:
                data = json.loads(path.read_text())
                if data.get("format") == FORMAT:
                    self.data = data
            except (OSError, ValueError):
                self.data = {}
        if self.data and self.data.get("layout") != LAYOUT:
            if _unstripped(self.data["files"]):
                self.data = {}  # an sdist read before its lib/ folder was found: read it again
            else:
                self.data["layout"] = LAYOUT  # kept when the snapshot is next saved
        if self.data and self.data.get("facts_code") != code_digest():
            # Facts are mined by driftcheck's code: another version of it mines them afresh.
            self.data["facts"] = {}
            self.data["facts_code"] = code_digest()
            self.dirty = True
        if not self.data:
            real = self.real
            md = real.metadata
            self.data = {
                "format": FORMAT,
                "layout": LAYOUT,
                "files": real.files(),
                "top_level": real.top_level_packages(),
                "metadata": None if md is None else [md.name, md.version, md.requires],
                "texts": {},
                "facts": {},
                "facts_code": code_digest(),
            }
            self.skipped = list(real.skipped)
            self.dirty = True
        self.archive_reads = 0

    @property
    def real(self) -> SourceTree:
        """The archive's own tree (opened on first need)."""
        if self._real is None:
            self._real = self._opener()
        return self._real

    def files(self) -> list[str]:
        return list(self.data["files"])

    def top_level_packages(self) -> list[str]:
        return list(self.data["top_level"])

    def _read_metadata(self) -> DistMetadata | None:
        md = self.data.get("metadata")
        return None if md is None else DistMetadata(name=md[0], version=md[1], requires=list(md[2]))

    def read_bytes(self, rel: str) -> bytes:
        return self.read_text(rel).encode()

    def read_text(self, rel: str) -> str:
        texts = self.data["texts"]
        if rel not in texts:
            texts[rel] = self.real.read_text(rel)
            self.archive_reads += 1
            self.dirty = True
        return texts[rel]

    def fact(self, key: str, compute: Callable[[], object]) -> object:
        """A host-wide fact, computed once per release and kept in the snapshot."""
        facts = self.data["facts"]
        if key not in facts:
            facts[key] = compute()
            self.dirty = True
        return facts[key]

    @property
    def modules_path(self) -> Path:
        """The visited griffe modules, pickled (keyed by griffe's version too)."""
        return self.path.with_suffix(f".griffe-{_griffe_version()}{code_suffix()}")

    def load_modules(self) -> dict | None:
        """The griffe modules a previous scan visited, or None (a bad entry is a miss)."""
        try:
            # Unpickling builds a large graph of objects at once: a cyclic-GC pass in the
            # middle of it only walks what it is building.
            with self.modules_path.open("rb") as f, gc_paused():
                modules = pickle.load(f)
            return modules if isinstance(modules, dict) else None
        except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, TypeError):
            return None

    def save(self, modules: dict | None = None) -> None:
        """Write the snapshot (and the visited modules) atomically if they changed."""
        if not self.dirty:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Both are written as they are made, never held whole: the snapshot's text a slice at a
        # time, the modules' pickle frame by frame (a cold scan of transformers held both,
        # 23 MB, at its peak, which came while they were written). The cyclic GC is held off
        # while they are: writing makes no garbage, and the pickler's memo (a tuple for each
        # object written) set off collections that walked every visited module again (torch
        # 2.10.0's 1,837 modules pickled in 0.6 to 1.9 s with it, 0.3 s without).
        with locked(self.path.parent / ".snapshots"), gc_paused():
            tmp = self.path.with_suffix(f".{os.getpid()}.part")
            text = json.dumps(self.data)
            with tmp.open("w", encoding="utf-8") as f:
                for at in range(0, len(text), _SLICE):
                    f.write(text[at : at + _SLICE])
            del text
            os.replace(tmp, self.path)
            if modules is not None:
                tmp = self.modules_path.with_suffix(f".{os.getpid()}.part")
                try:
                    with tmp.open("wb") as f:
                        pickle.dump(modules, f, protocol=pickle.HIGHEST_PROTOCOL)
                    os.replace(tmp, self.modules_path)
                except (pickle.PicklingError, RecursionError, TypeError):
                    tmp.unlink(missing_ok=True)
        self.dirty = False


def _griffe_version() -> str:
    from importlib import metadata

    for dist in ("griffelib", "griffe"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return "0"
