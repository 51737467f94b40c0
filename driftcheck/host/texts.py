"""Every source file of a host release, read on demand: the passes over all of a host's files
(raise-guards, call sites, signature probes, the HTTP surface) share one list of the release's
files and read each text from the release when they come to it, keeping none. A release's texts
held as strings cost more than all else a cold scan keeps (vLLM 0.33: 68 MB, as much again for
the baseline); reading a member of the archive again costs what decompressing a kept compressed
copy did (0.4 s for all of vLLM 0.33), without the compression. The first texts read can be
kept up to ``keep`` characters (:data:`KEEP` by default: none). Each release of a scan holds
what it keeps to the scan's end, where a cold scan's peak is: 8 M characters kept per release
were 17 MB of trl 1.16.0's cold peak against vLLM 0.33.0, for a tenth of the CPU of
speculators 0.3.0's scan against vLLM 0.16.0 (a pass reads vLLM 0.33's 43 M characters in 0.2 s).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

#: Characters of a host's texts kept in memory (the first read: a pass goes in path order);
#: past it each text is read from the release on each pass.
KEEP = 0


class SourceTexts(Mapping[str, str]):
    """Relative path -> text of a host's files, read through ``read`` on each access (or kept,
    for texts given as pairs); iterated in path order."""

    def __init__(
        self,
        texts: Iterator[tuple[str, str]] | None = None,
        *,
        read: Callable[[str], str] | None = None,
        files: list[str] | None = None,
        keep: int = KEEP,
    ) -> None:
        self._read = read
        self._kept: dict[str, str] = dict(texts or ())
        self._files: dict[str, None] = dict.fromkeys(sorted(files or ()))
        self._unreadable: set[str] = set()
        self._room = keep

    def __getitem__(self, rel: str) -> str:
        if rel in self._kept:
            return self._kept[rel]
        if rel not in self._files or rel in self._unreadable or self._read is None:
            raise KeyError(rel)
        try:
            text = self._read(rel)
        except Exception:  # noqa: BLE001 - an unreadable member narrows the passes only
            self._unreadable.add(rel)
            raise KeyError(rel) from None
        if len(text) <= self._room:
            self._room -= len(text)
            self._kept[rel] = text
        return text

    def unkept(self, rel: str) -> str:
        """A text as indexing gives it, but not kept: a pass that reads every file once and
        keeps what it needs itself (the HTTP surface reader) leaves the room to the passes that
        read every file again."""
        if rel in self._kept:
            return self._kept[rel]
        room, self._room = self._room, 0
        try:
            return self[rel]
        finally:
            self._room = room

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

    def stored_bytes(self) -> int:
        """What the kept texts take (characters)."""
        return sum(len(t) for t in self._kept.values())
