"""The lines of the client's analysed files, split on demand from their texts: a whole package's
lines kept as lists (a string per line) would cost several times its text, for the few lines
that findings quote."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from driftcheck.client.texts import Kept, keep, text_of


class FileLines(Mapping[str, list[str]]):
    """Relative path -> the file's lines (``str.splitlines``), read-only; each file's text is
    held once (shared with the client's texts, in the form :func:`~driftcheck.client.texts.keep`
    gives) and split when asked (the last file is kept)."""

    def __init__(self) -> None:
        self._texts: dict[str, Kept] = {}
        self._last: tuple[str, list[str]] | None = None

    def add(self, rel: str, text: Kept) -> None:
        """Keep one file's text (its lines are what ``text.splitlines()`` gives); bytes are a
        kept form (:func:`~driftcheck.client.texts.keep`), shared as they are."""
        self._texts[rel] = keep(text)
        if self._last is not None and self._last[0] == rel:
            self._last = None

    def __getitem__(self, rel: str) -> list[str]:
        if self._last is not None and self._last[0] == rel:
            return self._last[1]
        lines = text_of(self._texts[rel]).splitlines()
        self._last = (rel, lines)
        return lines

    def text(self, rel: str) -> str:
        """One file's whole text (no split)."""
        return text_of(self._texts[rel])

    def __contains__(self, rel: object) -> bool:
        return rel in self._texts

    def __iter__(self) -> Iterator[str]:
        return iter(self._texts)

    def __len__(self) -> int:
        return len(self._texts)
