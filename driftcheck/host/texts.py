"""Every source file of a host release, read on demand: the passes over all of a host's files
(raise-guards, call sites, signature probes, the HTTP surface) share one list of the release's
files and read each text from the release when they come to it, keeping none. A release's texts
held as strings cost more than all else a cold scan keeps (vLLM 0.33: 68 MB, as much again for
the baseline); reading a member of the archive again costs what decompressing a kept compressed
copy did (0.4 s for all of vLLM 0.33), without the compression. ``kept=True`` holds the texts
instead (for texts that do not come from a tree).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping


class SourceTexts(Mapping[str, str]):
    """Relative path -> text of a host's files, read through ``read`` on each access (or kept,
    for texts given as pairs); iterated in path order."""

    def __init__(
        self,
        texts: Iterator[tuple[str, str]] | None = None,
        *,
        read: Callable[[str], str] | None = None,
        files: list[str] | None = None,
    ) -> None:
        self._read = read
        self._kept: dict[str, str] = dict(texts or ())
        self._files: dict[str, None] = dict.fromkeys(sorted(files or ()))
        self._unreadable: set[str] = set()

    def __getitem__(self, rel: str) -> str:
        if rel in self._kept:
            return self._kept[rel]
        if rel not in self._files or rel in self._unreadable or self._read is None:
            raise KeyError(rel)
        try:
            return self._read(rel)
        except Exception:  # noqa: BLE001 - an unreadable member narrows the passes only
            self._unreadable.add(rel)
            raise KeyError(rel) from None

    def __contains__(self, rel: object) -> bool:
        return rel in self._kept or (rel in self._files and rel not in self._unreadable)

    def __iter__(self) -> Iterator[str]:
        yield from self._kept
        yield from (r for r in self._files if r not in self._kept and r not in self._unreadable)

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
