"""Every source file of a host release, kept compressed: the passes over all of a host's files
(raise-guards, call sites, signature probes, the HTTP surface) share one read of the release,
but the texts (50 MB for vLLM) do not stay in memory as text for the whole scan.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Mapping

#: zlib's fastest level: Python source shrinks about four times, at a fraction of a second for
#: a large host; each text is decompressed on use (a few milliseconds per pass over all).
LEVEL = 1


class SourceTexts(Mapping[str, str]):
    """Relative path -> text of a host's files; stored compressed, decompressed on each read."""

    def __init__(self, texts: Iterator[tuple[str, str]] | None = None) -> None:
        self._data: dict[str, bytes] = {}
        for rel, text in texts or ():
            self.add(rel, text)

    def add(self, rel: str, text: str) -> None:
        """Keep one file's text."""
        self._data[rel] = zlib.compress(text.encode("utf-8", "surrogatepass"), LEVEL)

    def __getitem__(self, rel: str) -> str:
        return zlib.decompress(self._data[rel]).decode("utf-8", "surrogatepass")

    def __contains__(self, rel: object) -> bool:
        return rel in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def stored_bytes(self) -> int:
        """What the compressed texts take."""
        return sum(len(b) for b in self._data.values())
