"""Every source file of a host release, read once: the passes over all of a host's files
(raise-guards, call sites, signature probes, the HTTP surface) share one read of the release
and one copy of its texts. With ``compressed`` (off by default) the texts are kept compressed
and decompressed on each read: a quarter of the memory (vLLM 0.33: 14 MB for 50 MB), for a
decompression per file per pass, which makes a cold scan a third slower.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Mapping

#: zlib's fastest level: Python source shrinks about four times, at a fraction of a second for
#: a large host; each text is decompressed on use (a few milliseconds per pass over all).
LEVEL = 1


class SourceTexts(Mapping[str, str]):
    """Relative path -> text of a host's files (optionally stored compressed)."""

    def __init__(
        self, texts: Iterator[tuple[str, str]] | None = None, *, compressed: bool = False
    ) -> None:
        self.compressed = compressed
        self._data: dict[str, bytes | str] = {}
        for rel, text in texts or ():
            self.add(rel, text)

    def add(self, rel: str, text: str) -> None:
        """Keep one file's text."""
        if self.compressed:
            self._data[rel] = zlib.compress(text.encode("utf-8", "surrogatepass"), LEVEL)
        else:
            self._data[rel] = text

    def __getitem__(self, rel: str) -> str:
        data = self._data[rel]
        if isinstance(data, str):
            return data
        return zlib.decompress(data).decode("utf-8", "surrogatepass")

    def __contains__(self, rel: object) -> bool:
        return rel in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def stored_bytes(self) -> int:
        """What the texts take (characters when not compressed)."""
        return sum(len(b) for b in self._data.values())
