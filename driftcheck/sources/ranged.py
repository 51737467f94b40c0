"""Fetch only what analysis needs from a large wheel, with HTTP range requests.

pip answers where a release's wheel lives without downloading it
(``pip install --dry-run --report``; the user's index configuration applies). When the file host
answers range requests (HTTP 206), the zip's central directory and then only the Python sources
and ``.dist-info`` members are read, in a few coalesced ranges fetched in parallel, and written
into a small "slim" zip in the cache. Anything unexpected returns None and the caller falls back
to a whole ``pip download``; a full disk does not (it is said at once).
"""

from __future__ import annotations

import errno
import io
import json
import os
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

MIN_RANGED_BYTES = 8 << 20  # smaller wheels are downloaded whole
GAP = 512 << 10  # ranges closer than this are fetched together
KEEP = (".py", ".pyi")
COMPILED = (".so", ".pyd")  # kept as empty entries: the module exists, its names are unread

TIMEOUT = 30


@dataclass
class WheelLocation:
    """Where pip would download a release from."""

    url: str
    sha256: str | None
    filename: str


def locate(name: str, version: str) -> WheelLocation | None:
    """Ask pip (dry run, no download) for the wheel's address and hash."""
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed"]
    cmd += ["--only-binary=:all:", "--disable-pip-version-check", "--quiet", "--report", "-"]
    try:
        proc = subprocess.run(
            [*cmd, f"{name}=={version}"],
            capture_output=True,
            text=True,
            check=False,
            stdin=subprocess.DEVNULL,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        from driftcheck.cache import pip_disk_full

        full = pip_disk_full(proc.stderr + proc.stdout, Path(tempfile.gettempdir()))
        if full is not None:
            raise full  # a whole download would fill the same disk
        return None
    try:
        report = json.loads(proc.stdout)
        item = report["install"][0]
        info = item["download_info"]
        url = info["url"]
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    if not url.startswith(("https://", "http://")) or not url.split("#")[0].endswith(".whl"):
        return None
    sha = (info.get("archive_info") or {}).get("hashes", {}).get("sha256")
    return WheelLocation(
        url=url.split("#")[0], sha256=sha, filename=url.split("#")[0].rsplit("/", 1)[-1]
    )


class RangeReader(io.RawIOBase):
    """A seekable read-only file over HTTP range requests, with prefetched spans."""

    def __init__(self, url: str, size: int) -> None:
        self.url = url
        self.size = size
        self.pos = 0
        self.spans: list[tuple[int, bytes]] = []
        self.transferred = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self.pos, 2: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def fetch(self, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` from the server (raises on anything but 206)."""
        req = urllib.request.Request(self.url, headers={"Range": f"bytes={start}-{end - 1}"})
        with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
            if resp.status != 206:
                raise OSError(f"no range support (HTTP {resp.status})")
            data = resp.read()
        self.transferred += len(data)
        return data

    def prefetch(self, ranges: list[tuple[int, int]], workers: int = 4) -> None:
        """Fetch coalesced ranges in parallel and keep them for later reads."""
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for (start, _), data in zip(
                ranges, pool.map(lambda r: self.fetch(*r), ranges), strict=True
            ):
                self.spans.append((start, data))
        self.spans.sort()

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            n = self.size - self.pos
        n = min(n, self.size - self.pos)
        if n <= 0:
            return b""
        for start, data in self.spans:
            if start <= self.pos and self.pos + n <= start + len(data):
                out = data[self.pos - start : self.pos - start + n]
                self.pos += n
                return out
        data = self.fetch(self.pos, self.pos + n)
        self.spans.append((self.pos, data))
        self.pos += len(data)
        return data

    def readinto(self, buffer: bytearray) -> int:  # type: ignore[override]  # io passes a bytearray or memoryview
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _content_length(url: str) -> int | None:
    req = urllib.request.Request(url, method="HEAD")
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
            if resp.headers.get("Accept-Ranges", "").lower() != "bytes":
                return None
            return int(resp.headers.get("Content-Length") or 0) or None
    except (OSError, ValueError, urllib.error.URLError):
        return None


def _wanted(info: zipfile.ZipInfo) -> bool:
    top = info.filename.split("/", 1)[0]
    return info.filename.endswith(KEEP + COMPILED) or (
        top.endswith(".dist-info") and not info.filename.endswith("RECORD")
    )


def _coalesce(members: list[zipfile.ZipInfo]) -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = []
    for info in sorted(members, key=lambda i: i.header_offset):
        # Local header: 30 bytes + name + extra (which may differ from the central copy).
        start = info.header_offset
        end = start + 30 + len(info.filename.encode()) + 1024 + info.compress_size
        if ranges and start - ranges[-1][1] <= GAP:
            ranges[-1] = (ranges[-1][0], max(ranges[-1][1], end))
        else:
            ranges.append((start, end))
    return ranges


def fetch_slim(name: str, version: str, folder: Path) -> tuple[Path, dict] | None:
    """Write ``<wheel>.slim.zip`` (sources and metadata only) into ``folder``, or return None."""
    if os.environ.get("DRIFTCHECK_NO_RANGED"):
        return None
    where = locate(name, version)
    if where is None:
        return None
    size = _content_length(where.url)
    if size is None:
        return None
    if size < MIN_RANGED_BYTES:
        return _whole(where, folder, size)
    reader = RangeReader(where.url, size)
    try:
        tail = min(size, 1 << 20)
        reader.prefetch([(size - tail, size)], workers=1)
        with zipfile.ZipFile(reader) as zf:
            members = [i for i in zf.infolist() if _wanted(i) and not i.is_dir()]
            sources = [i for i in members if not i.filename.endswith(COMPILED)]
            ranges = [(s, min(e, size)) for s, e in _coalesce(sources)]
            reader.prefetch(ranges)
            target = folder / (where.filename + ".slim.zip")
            tmp = folder / (target.name + ".part")
            with zipfile.ZipFile(
                tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1
            ) as out:
                for info in members:
                    if info.filename.endswith(COMPILED):
                        out.writestr(info.filename, b"")
                    else:
                        out.writestr(info.filename, zf.read(info))  # zipfile checks each CRC
            os.replace(tmp, target)
    except (OSError, zipfile.BadZipFile, ValueError, EOFError, urllib.error.URLError) as exc:
        _unless_disk_full(exc, folder)
        return None
    return target, {
        "mode": "ranged",
        "wheel": where.filename,
        "wheel_sha256": where.sha256,
        "wheel_bytes": size,
        "bytes_transferred": reader.transferred,
        "members": len(members),
    }


def _unless_disk_full(exc: BaseException, folder: Path) -> None:
    """Raise the full-disk error for ENOSPC: falling back to a whole download would only fill
    the same disk (every other failure falls back)."""
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        from driftcheck.cache import disk_full

        raise disk_full(folder) from None


def _whole(where: WheelLocation, folder: Path, size: int) -> tuple[Path, dict] | None:
    """Download a small wheel whole from where pip would, checking pip's recorded hash."""
    import hashlib

    target = folder / where.filename
    tmp = folder / (where.filename + ".part")
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(where.url, timeout=TIMEOUT) as resp, tmp.open("wb") as out:
            while chunk := resp.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
        if where.sha256 and digest.hexdigest() != where.sha256:
            tmp.unlink(missing_ok=True)
            return None
        os.replace(tmp, target)
    except (OSError, urllib.error.URLError) as exc:
        tmp.unlink(missing_ok=True)
        _unless_disk_full(exc, folder)
        return None
    return target, {
        "mode": "whole",
        "wheel": where.filename,
        "wheel_sha256": where.sha256,
        "wheel_bytes": size,
        "bytes_transferred": size,
    }
