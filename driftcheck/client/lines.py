"""The lines of the client's analysed files, split on demand from their texts: a whole package's
lines kept as lists (a string per line) would cost several times its text, for the few lines
that findings quote."""

from __future__ import annotations

import ast
import re
from array import array
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
        #: Per parsed file, where its top-level statements lie (see :meth:`statements`).
        self._statements: dict[str, array] = {}

    def add(self, rel: str, text: Kept) -> None:
        """Keep one file's text (its lines are what ``text.splitlines()`` gives); bytes are a
        kept form (:func:`~driftcheck.client.texts.keep`), shared as they are."""
        self._texts[rel] = keep(text)
        self._words = None
        self._statements.pop(rel, None)
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

    def note_statements(self, rel: str, tree: ast.Module) -> None:
        """Keep where the top-level statements of a file's syntax tree lie (its text's tree),
        for a reader that parses only some of them again (a few bytes a statement)."""
        if rel not in self._texts:
            return
        out = array("i")
        for stmt in tree.body:
            decorators = getattr(stmt, "decorator_list", None) or ()
            first = min([stmt.lineno, *(d.lineno for d in decorators)])
            last = stmt.end_lineno or stmt.lineno
            if out and first <= out[-2]:  # on the line the statement before ends on (``;``)
                out[-2] = max(out[-2], last)
                out[-1] += 1
            else:
                out.extend((first, last, 1))
        self._statements[rel] = out

    def statements(self, rel: str) -> list[tuple[int, int, int]] | None:
        """The top-level statements of a file, as runs of lines no other run shares: (first
        line, last line, how many statements), the first line a decorator's where the first
        statement has one; None where the file's tree was not noted."""
        got = self._statements.get(rel)
        if got is None:
            return None
        return [(got[i], got[i + 1], got[i + 2]) for i in range(0, len(got), 3)]

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
        into a small filter instead (three bits a word, two to four bytes a distinct word: one
        bit let 62 files of transformers' 1,500 through for a class name 3.5 files hold, three
        let about 3 through)."""
        if _WORD.fullmatch(word) is None:  # not one word: the filter cannot tell
            return list(self._texts)
        if self._words is None:
            self._words = {rel: _filter(text_of(kept)) for rel, kept in self._texts.items()}
        out = []
        h = hash(word.encode("utf-8", "surrogatepass"))  # the filter holds words' UTF-8 bytes
        one, two, three = h, h >> _SLICE, h >> 2 * _SLICE
        for rel, bits in self._words.items():
            mask = len(bits) * 8 - 1
            a, b, c = one & mask, two & mask, three & mask
            if bits[a >> 3] >> (a & 7) & bits[b >> 3] >> (b & 7) & bits[c >> 3] >> (c & 7) & 1:
                out.append(rel)
        return out


#: A word as ``\b`` bounds it: a maximal run of word characters.
_WORD = re.compile(r"\w+")


def _filter(text: str) -> bytes:
    """Three bits set for each word of ``text`` (its UTF-8 bytes), at three slices of its
    ``hash()`` (modulo the filter's size, a power of two, 16 to 32 bits a distinct word)."""
    words = words_of(text)
    size = 64
    while size < 16 * len(words):
        size *= 2
    bits = bytearray(size // 8)
    mask = size - 1
    for h in map(hash, words):
        at = h & mask
        bits[at >> 3] |= 1 << (at & 7)
        at = (h >> _SLICE) & mask
        bits[at >> 3] |= 1 << (at & 7)
        at = (h >> 2 * _SLICE) & mask
        bits[at >> 3] |= 1 << (at & 7)
    return bytes(bits)


#: Each byte to itself, but the ASCII bytes that are no word character, to a space.
_SPACED = bytes(
    c if c >= 128 or chr(c).isalnum() or c == ord("_") else ord(" ") for c in range(256)
)


def words_of(text: str) -> set[bytes]:
    """The words of ``text`` as ``_WORD`` finds them, in UTF-8: the text's bytes are split at
    every ASCII byte that is no word character (one pass of ``bytes.translate``, twice as fast
    as the pattern over a whole package), and the few pieces holding other characters are split
    by the pattern (a piece's ends are no word characters, so its words are the text's)."""
    pieces = set(text.encode("utf-8", "surrogatepass").translate(_SPACED).split())
    if text.isascii():
        return pieces
    other = [p for p in pieces if not p.isascii()]
    pieces.difference_update(other)
    for piece in other:
        for word in _WORD.findall(piece.decode("utf-8", "surrogatepass")):
            pieces.add(word.encode("utf-8", "surrogatepass"))
    return pieces


#: The bits between the slices of a hash the filter reads (three of 21 bits in a 64-bit hash;
#: a filter of more than 2**21 bits reads slices that overlap, never a bit a word did not set).
_SLICE = 21
