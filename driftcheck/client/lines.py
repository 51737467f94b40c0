"""The lines of the client's analysed files, split on demand from their texts: a whole package's
lines kept as lists (a string per line) would cost several times its text, for the few lines
that findings quote."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

from driftcheck.client.texts import Kept, keep, text_of


class FileLines(Mapping[str, list[str]]):
    """Relative path -> the file's lines (``str.splitlines``), read-only; each file's text is
    held once (shared with the client's texts, in the form :func:`~driftcheck.client.texts.keep`
    gives) and split when asked (the last file is kept)."""

    def __init__(self) -> None:
        self._texts: dict[str, Kept] = {}
        self._last: tuple[str, list[str]] | None = None
        #: Per file, a bit per hash of each of its words (built on the first search).
        self._words: dict[str, bytes] | None = None

    def add(self, rel: str, text: Kept) -> None:
        """Keep one file's text (its lines are what ``text.splitlines()`` gives); bytes are a
        kept form (:func:`~driftcheck.client.texts.keep`), shared as they are."""
        self._texts[rel] = keep(text)
        self._words = None
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

    def may_hold(self, word: str) -> list[str]:
        """The files that may hold ``word`` as a whole word (``\\bword\\b``): every file that
        does, and a few that do not. A whole package's texts are kept packed
        (:mod:`driftcheck.client.texts`), and a check that searched each of them for each of
        dozens of names unpacked every text each time; the words of each file are read once
        into a small filter instead (a bit per hash, about two bytes a distinct word)."""
        if _WORD.fullmatch(word) is None:  # not one word: the filter cannot tell
            return list(self._texts)
        if self._words is None:
            self._words = {rel: _filter(text_of(kept)) for rel, kept in self._texts.items()}
        out = []
        h = hash(word)
        for rel, bits in self._words.items():
            at = h & (len(bits) * 8 - 1)
            if bits[at >> 3] >> (at & 7) & 1:
                out.append(rel)
        return out


#: A word as ``\b`` bounds it: a maximal run of word characters.
_WORD = re.compile(r"\w+")


def _filter(text: str) -> bytes:
    """A bit set at ``hash(word)`` (modulo its size, a power of two, 16 bits a distinct word)
    for each word of ``text``."""
    words = set(_WORD.findall(text))
    size = 64
    while size < 16 * len(words):
        size *= 2
    bits = bytearray(size // 8)
    mask = size - 1
    for w in words:
        at = hash(w) & mask
        bits[at >> 3] |= 1 << (at & 7)
    return bytes(bits)
