"""The tar and its pieces: written here (:func:`write_section`), put together again there
(:func:`receive`), one piece per call.

A *section* is a run of tar members with no end-of-archive marker but the last one's, so the
sections can be written apart and concatenated: driftcheck's section is rewritten without
touching the pieces of the host's. Members carry no times, owners or modes of this machine, so
the same files give the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
from pathlib import Path

MiB = 1 << 20
MANIFEST = "manifest.json"


def sha256_of(*paths: Path) -> str:
    """The sha256 of the files' bytes, one after the other."""
    h = hashlib.sha256()
    for path in paths:
        with path.open("rb") as f:
            while chunk := f.read(4 * MiB):
                h.update(chunk)
    return h.hexdigest()


def piece_dir(carry: Path, index: int) -> Path:
    return carry / f"p{index:02d}"


class _Pieces:
    """A byte stream cut into files of at most ``limit`` bytes, ``pNN/carry.NN`` under ``carry``."""

    def __init__(self, carry: Path, first: int, offset: int, limit: int, section: str) -> None:
        self.carry, self.index, self.offset, self.limit = carry, first, offset, limit
        self.section = section
        self.done: list[dict] = []
        self._file = None
        self._hash = hashlib.sha256()
        self._size = 0

    def _open(self) -> None:
        folder = piece_dir(self.carry, self.index)
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        self._path = folder / f"carry.{self.index:02d}"
        self._file = self._path.open("wb")
        self._hash, self._size = hashlib.sha256(), 0

    def _close(self) -> None:
        if self._file is None:
            return
        self._file.close()
        self.done.append(
            {
                "index": self.index,
                "section": self.section,
                "file": f"{self._path.parent.name}/{self._path.name}",
                "offset": self.offset,
                "bytes": self._size,
                "sha256": self._hash.hexdigest(),
            }
        )
        self.offset += self._size
        self.index += 1
        self._file = None

    def write(self, data: bytes) -> None:
        while data:
            if self._file is None:
                self._open()
            room = self.limit - self._size
            part, data = data[:room], data[room:]
            self._file.write(part)
            self._hash.update(part)
            self._size += len(part)
            if self._size == self.limit:
                self._close()

    def finish(self) -> list[dict]:
        self._close()
        return self.done


def write_section(
    carry: Path,
    members: list[tuple[str, Path]],
    *,
    section: str,
    first: int,
    offset: int,
    limit: int,
    last: bool,
) -> list[dict]:
    """Write ``(name in the tar, file)`` members as pieces ``first``, ``first + 1``, ... (the
    section starts at byte ``offset`` of the whole tar); ``last`` ends the archive."""
    out = _Pieces(carry, first, offset, limit, section)
    for arcname, path in members:
        info = tarfile.TarInfo(arcname)
        info.size = path.stat().st_size
        info.mode = 0o644
        out.write(info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape"))
        with path.open("rb") as f:
            while chunk := f.read(4 * MiB):
                out.write(chunk)
        out.write(b"\0" * (-info.size % tarfile.BLOCKSIZE))
    if last:
        out.write(b"\0" * (2 * tarfile.BLOCKSIZE))
    return out.finish()


def write_manifests(carry: Path, manifest: dict) -> None:
    """The manifest beside the pieces and in every piece's folder (each call carries one)."""
    text = json.dumps(manifest, indent=1)
    (carry / MANIFEST).write_text(text)
    for piece in manifest["pieces"]:
        (carry / piece["file"]).parent.joinpath(MANIFEST).write_text(text)
    keep = {carry / p["file"] for p in manifest["pieces"]}
    for folder in carry.glob("p[0-9][0-9]"):
        if not any(k.parent == folder for k in keep):
            shutil.rmtree(folder)


# -- there ---------------------------------------------------------------------------------------


class ReceiveError(Exception):
    """A piece is damaged, or the ones before it are missing."""


def receive(carry: Path, index: int, dest: Path) -> str:
    """Check piece ``index`` (carried in ``carry/pNN``) and append it to ``dest/carry.tar``.

    Safe to repeat: the tar is cut back to where the piece begins first. Returns a line."""
    folder = piece_dir(carry, index)
    manifest = json.loads((folder / MANIFEST).read_text())
    pieces = manifest["pieces"]
    piece = pieces[index]
    src = carry / piece["file"]
    if src.stat().st_size != piece["bytes"] or sha256_of(src) != piece["sha256"]:
        raise ReceiveError(f"piece {index} arrived damaged (size or sha256 differs): send it again")
    dest.mkdir(parents=True, exist_ok=True)
    tar = dest / "carry.tar"
    have = tar.stat().st_size if tar.exists() else 0
    if have < piece["offset"]:
        first = next(p["index"] for p in pieces if p["offset"] + p["bytes"] > have)
        raise ReceiveError(
            f"{tar} holds {have} bytes, piece {index} starts at {piece['offset']}: "
            f"{f'pieces {first}..{index - 1} are' if first < index - 1 else f'piece {first} is'} "
            "missing (was the machine given back?); "
            f"send them again from 'receive {first}'"
        )
    with tar.open("r+b" if tar.exists() else "wb") as f:
        f.truncate(piece["offset"])
        f.seek(piece["offset"])
        with src.open("rb") as g:
            shutil.copyfileobj(g, f, 4 * MiB)
    (dest / MANIFEST).write_text(json.dumps(manifest, indent=1))
    total = manifest["whole"]["bytes"]
    now = piece["offset"] + piece["bytes"]
    return (
        f"piece {index} of {len(pieces) - 1} ok ({piece['bytes'] / MiB:.1f} MiB, sha256 checked); "
        f"{tar} now {now / MiB:.1f} of {total / MiB:.1f} MiB"
        + ("; complete: run 'install'" if now == total else "")
    )
