"""Releases shipped to Ray nodes that do not share the driftcheck cache.

A release's cache entry (its archive and ``entry.json``) and its host snapshot (the snapshot
and the visited modules the parent's plan left) are read into one bundle of bytes, put in Ray's
object store once, and written into each node's own cache by the first task there that needs
them: a node then reads what the parent built, with neither the index nor a shared folder.
"""

from __future__ import annotations

import os
from pathlib import Path

from driftcheck.cache import cache_root

#: Relative path in the cache → the file's bytes.
Bundle = dict[str, bytes]


def bundle(name: str, version: str) -> Bundle:
    """The cache files of one release (archive entry, snapshot, visited modules); empty when
    the release is not cached."""
    from driftcheck.cache import archive_dir, code_suffix
    from driftcheck.host.snapshot import snapshot_path
    from driftcheck.sources.fetch import cached_sha256

    root = cache_root()
    sha = cached_sha256(name, version)
    if sha is None:
        return {}
    folder = archive_dir(name, version)
    paths = [p for p in folder.iterdir() if p.is_file() and not p.name.endswith(".part")]
    snapshot = snapshot_path(name, version, sha)
    if snapshot.exists():
        # The visited modules pickled by this driftcheck's code (SnapshotTree.modules_path).
        mine = code_suffix()
        paths.append(snapshot)
        paths += [
            p for p in snapshot.parent.glob(f"{snapshot.stem}.griffe-*") if p.name.endswith(mine)
        ]
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in paths}


def unpack(*bundles: Bundle) -> int:
    """Write the bundles' files that this node's cache lacks (atomically); how many."""
    root = cache_root()
    written = 0
    for files in bundles:
        for rel, data in files.items():
            target = root / Path(rel)
            if target.exists():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.{os.getpid()}.part")
            tmp.write_bytes(data)
            os.replace(tmp, target)
            written += 1
    return written
