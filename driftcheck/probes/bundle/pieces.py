"""A bundle on disk: its manifest, the tar it carries cut into pieces of a chosen size
(:func:`write_pieces`), and the checks and the joined stream on the other side
(:func:`verify`, :func:`joined`). Standard library only (see the package's docstring).
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, cast

from driftcheck.errors import UsageError

MiB = 1 << 20
MANIFEST = "manifest.json"
README = "README.txt"
FORMAT = 1
#: The tar's name; piece N is ``bundle.tar.NNN``.
TAR = "bundle.tar"
_CHUNK = 4 * MiB


class BundleError(UsageError):
    """A bundle cannot be written, checked or installed; the message says which file and why."""


def sha256_of(path: Path) -> str:
    """The sha256 of a file's bytes."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def parse_size(text: str) -> int:
    """``54M``, ``1.5G``, ``800K`` or a number of bytes; M and G are MiB and GiB (as ``split -b``)."""
    units = {"K": 1 << 10, "M": MiB, "G": 1 << 30}
    raw = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = units.get(raw[-1:], 1)
    number = raw[:-1] if raw[-1:] in units else raw
    try:
        size = int(float(number) * scale)
    except ValueError:
        raise BundleError(
            f"piece size {text!r}: write it as 54M, 1G or a number of bytes"
        ) from None
    if size < 64 << 10:
        raise BundleError(f"piece size {text!r}: at least 64K")
    return size


class _PieceWriter:
    """A write-only stream (all tarfile's stream mode needs) cut into files of at most
    ``limit`` bytes, each hashed as written."""

    def __init__(self, folder: Path, limit: int) -> None:
        self.folder, self.limit = folder, limit
        self.pieces: list[dict] = []
        self.whole = hashlib.sha256()
        self._file: io.BufferedWriter | None = None
        self._hash = hashlib.sha256()
        self._size = 0

    def write(self, data: bytes) -> int:
        done = 0
        while done < len(data):
            if self._file is None:
                self._file = (self.folder / f"{TAR}.{len(self.pieces):03d}").open("wb")
                self._hash, self._size = hashlib.sha256(), 0
            part = data[done : done + self.limit - self._size]
            self._file.write(part)
            self._hash.update(part)
            self.whole.update(part)
            self._size += len(part)
            done += len(part)
            if self._size == self.limit:
                self.close()
        return done

    def close(self) -> None:
        """End the piece being written (the next write starts another)."""
        if self._file is None:
            return
        self._file.close()
        name = f"{TAR}.{len(self.pieces):03d}"
        self.pieces.append({"file": name, "bytes": self._size, "sha256": self._hash.hexdigest()})
        self._file = None


def write_pieces(folder: Path, members: list[tuple[str, Path]], limit: int) -> dict:
    """Write ``(name in the tar, file or folder)`` members as one tar cut into pieces of at
    most ``limit`` bytes in ``folder``. Members carry no owner, time or mode of this machine,
    so the same files give the same pieces. Returns the manifest's ``pieces`` and ``whole``."""
    out = _PieceWriter(folder, limit)
    # tarfile's stream mode calls write() alone: the piece writer is enough of a file.
    with tarfile.open(fileobj=cast("IO[bytes]", out), mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for arcname, path in members:
            for file, name in _files(path, arcname):
                info = tarfile.TarInfo(name)
                info.size = file.stat().st_size
                info.mode = 0o644
                with file.open("rb") as f:
                    tar.addfile(info, f)
    out.close()
    total = sum(p["bytes"] for p in out.pieces)
    return {"pieces": out.pieces, "whole": {"bytes": total, "sha256": out.whole.hexdigest()}}


def _files(path: Path, arcname: str) -> Iterator[tuple[Path, str]]:
    if path.is_dir():
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            yield file, f"{arcname}/{file.relative_to(path).as_posix()}"
    else:
        yield path, arcname


# -- the other side --------------------------------------------------------------------------


def read_manifest(folder: Path) -> dict:
    """The bundle's manifest.

    Raises:
        BundleError: No manifest, or not one this driftcheck reads.
    """
    path = folder / MANIFEST
    if not folder.is_dir():
        raise BundleError(f"--from-bundle {folder}: no such folder")
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise BundleError(f"{path}: missing (is {folder} a bundle written by --bundle?)") from None
    except (OSError, ValueError) as exc:
        raise BundleError(f"{path}: cannot be read ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BundleError(
            f"{path}: bundle format {manifest.get('format') if isinstance(manifest, dict) else '?'}"
            f", this driftcheck reads format {FORMAT}"
        )
    return manifest


def check_file(folder: Path, entry: dict, what: str) -> str:
    """Check one listed file (size, then sha256); returns its sha256.

    Raises:
        BundleError: The file is missing, short or damaged; the message names it.
    """
    path = folder / entry["file"]
    if not path.is_file():
        raise BundleError(f"{what} {entry['file']} is missing from {folder}: copy it there")
    size = path.stat().st_size
    if size != entry["bytes"]:
        raise BundleError(
            f"{what} {entry['file']} has {size} of its {entry['bytes']} bytes: copy it again"
        )
    digest = sha256_of(path)
    if digest != entry["sha256"]:
        raise BundleError(
            f"{what} {entry['file']} is damaged (its sha256 differs from {MANIFEST}'s): "
            "copy it again"
        )
    return digest


def verify(folder: Path, manifest: dict) -> None:
    """Check every piece, the whole they make and the bootstrap wheel against the manifest.

    Raises:
        BundleError: The first file that is missing or damaged, named.
    """
    whole = hashlib.sha256()
    for piece in manifest["pieces"]:
        check_file(folder, piece, "piece")
        with (folder / piece["file"]).open("rb") as f:
            while chunk := f.read(_CHUNK):
                whole.update(chunk)
    if whole.hexdigest() != manifest["whole"]["sha256"]:
        raise BundleError(f"the pieces in {folder} do not make the bundle {MANIFEST} describes")
    if manifest.get("bootstrap"):
        check_file(folder, manifest["bootstrap"], "driftcheck's wheel")


class _Joined:
    """The pieces read one after the other, as one read-only stream (all tarfile's stream mode
    needs)."""

    def __init__(self, paths: list[Path]) -> None:
        self._paths = list(paths)
        self._file: io.BufferedReader | None = None

    def read(self, size: int = -1) -> bytes:
        while True:
            if self._file is None:
                if not self._paths:
                    return b""
                self._file = self._paths.pop(0).open("rb")
            data = self._file.read(size)
            if data:
                return data
            self._file.close()
            self._file = None

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def extract(folder: Path, manifest: dict, dest: Path) -> None:
    """Unpack the joined pieces into ``dest`` without writing the joined tar (the bundle may be
    large): members stay inside ``dest`` (tarfile's ``data`` filter where Python has it)."""
    dest.mkdir(parents=True, exist_ok=True)
    stream = _Joined([folder / p["file"] for p in manifest["pieces"]])
    # tarfile's stream mode calls read() alone: the joined pieces are enough of a file.
    with tarfile.open(fileobj=cast("IO[bytes]", stream), mode="r|") as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
        else:  # Python < 3.10.12: no filters; the names were written by write_pieces
            for member in tar:
                if member.name.startswith(("/", "..")) or "/../" in member.name:
                    raise BundleError(f"a member of the bundle leaves its folder: {member.name}")
                tar.extract(member, dest)
