"""Every source file of a host release, read on demand: the passes over all of a host's files
(raise-guards, call sites, signature probes, the HTTP surface) share one list of the release's
files and keep none of its texts in memory. A release's texts held as strings cost more than
all else a cold scan keeps (vLLM 0.33: 68 MB, as much again for the baseline), and reading a
member of the archive again on each pass costs its decompression (0.15 s a pass over vLLM
0.16's 18 M characters, a fifth of speculators 0.3.0's cold scan for its nine passes).

So each text is read from the release once: the first pass writes it, as UTF-8, to an unnamed
temporary file beside the release's archive (the ``spill`` folder), and the later passes read
it back from there (a tenth of the decompression's cost). The file lives in the operating
system's file cache, reclaimable, not in the scan's memory; it is gone when the scan's
:class:`SourceTexts` is (or the process ends). Where no folder is given, or the file cannot be
written, each pass reads the text from the release again.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO


class SourceTexts(Mapping[str, str]):
    """Relative path -> text of a host's files, read through ``read`` once and then from the
    spill file (or kept, for texts given as pairs); iterated in path order."""

    def __init__(
        self,
        texts: Iterator[tuple[str, str]] | None = None,
        *,
        read: Callable[[str], str] | None = None,
        files: list[str] | None = None,
        spill: Path | None = None,
    ) -> None:
        self._read = read
        self._kept: dict[str, str] = dict(texts or ())
        self._files: dict[str, None] = dict.fromkeys(sorted(files or ()))
        self._unreadable: set[str] = set()
        self._spill_dir = spill
        self._spill: IO[bytes] | None = None
        self._at: dict[str, tuple[int, int]] = {}  # rel -> (offset, bytes) in the spill file
        self._end = 0
        self._lock = threading.Lock()

    def __getitem__(self, rel: str) -> str:
        if rel in self._kept:
            return self._kept[rel]
        if rel not in self._files or rel in self._unreadable or self._read is None:
            raise KeyError(rel)
        spilled = self._read_back(rel)
        if spilled is not None:
            return spilled
        try:
            text = self._read(rel)
        except Exception:  # noqa: BLE001 - an unreadable member narrows the passes only
            self._unreadable.add(rel)
            raise KeyError(rel) from None
        self._write(rel, text)
        return text

    def _spill_file(self) -> IO[bytes] | None:
        """The spill file, opened on the first text read (None: none can be written)."""
        if self._spill is None and self._spill_dir is not None:
            try:
                self._spill = tempfile.TemporaryFile(
                    prefix="driftcheck-texts-", dir=self._spill_dir
                )
            except OSError:
                self._spill_dir = None  # read from the release on every pass
        return self._spill

    def _write(self, rel: str, text: str) -> None:
        """Append a text read from the release to the spill file (nothing when none)."""
        with self._lock:
            spill = self._spill_file()
            if spill is None or rel in self._at:
                return
            try:
                data = text.encode("utf-8", "surrogatepass")
                spill.seek(self._end)
                spill.write(data)
            except (OSError, UnicodeEncodeError):
                self._close()
                return
            self._at[rel] = (self._end, len(data))
            self._end += len(data)

    def _read_back(self, rel: str) -> str | None:
        """A text from the spill file; None when it was not spilled or cannot be read back."""
        with self._lock:
            at = self._at.get(rel)
            if at is None or self._spill is None:
                return None
            try:
                self._spill.seek(at[0])
                data = self._spill.read(at[1])
            except OSError:
                data = b""
            if len(data) != at[1]:
                self._close()
                return None
        return data.decode("utf-8", "surrogatepass")

    def _close(self) -> None:
        """Give the spill file up: the passes read from the release again."""
        if self._spill is not None:
            try:
                self._spill.close()
            except OSError:
                pass
        self._spill, self._spill_dir = None, None
        self._at.clear()

    def __contains__(self, rel: object) -> bool:
        return rel in self._kept or (rel in self._files and rel not in self._unreadable)

    def __iter__(self) -> Iterator[str]:
        if not self._files:
            yield from self._kept
            return
        yield from (r for r in self._files if r in self._kept or r not in self._unreadable)

    def __len__(self) -> int:
        return len(set(self._kept) | (set(self._files) - self._unreadable))

    def items(self) -> Iterator[tuple[str, str]]:  # type: ignore[override]
        """Each readable file with its text (an unreadable one is left out)."""
        for rel in list(self):
            try:
                yield rel, self[rel]
            except KeyError:
                continue

    def values(self) -> Iterator[str]:  # type: ignore[override]
        """Each readable file's text."""
        for _rel, text in self.items():
            yield text

    def spilled_bytes(self) -> int:
        """What the spill file holds (bytes; 0 when there is none)."""
        return self._end if self._spill is not None else 0
