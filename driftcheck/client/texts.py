"""The client's texts, each kept in its smallest form.

Python stores a string at one, two or four bytes a character, whichever its widest character
needs: one emoji in a docstring makes a whole file take four bytes a character (transformers
5.24.0: 1,269 of its files, 20 M characters, 82 MB as strings, 21 MB as UTF-8). A text with a
character past Latin-1 is kept as its UTF-8 bytes and decoded when read; the others stay strings.
The client's texts, the lines findings quote (:mod:`driftcheck.client.lines`) and each parsed
module's :class:`~driftcheck.client.names.Source` share the one kept form.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, MutableMapping

#: A text as kept: the string itself, or its UTF-8 bytes.
Kept = str | bytes

_EMPTY_STR = sys.getsizeof("")


def keep(text: str | bytes) -> Kept:
    """``text`` in its smallest form (bytes are taken as already kept)."""
    if type(text) is not str or text.isascii():
        return text
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: the string is the only exact form
        return text
    return data if len(data) < sys.getsizeof(text) - _EMPTY_STR else text


def text_of(kept: Kept) -> str:
    """The string a kept form stands for."""
    return kept if isinstance(kept, str) else kept.decode("utf-8")


class Texts(MutableMapping[str, str]):
    """Relative path -> text, each text kept by :func:`keep`."""

    def __init__(self) -> None:
        self._kept: dict[str, Kept] = {}

    def __getitem__(self, rel: str) -> str:
        return text_of(self._kept[rel])

    def __setitem__(self, rel: str, text: str) -> None:
        self._kept[rel] = keep(text)

    def __delitem__(self, rel: str) -> None:
        del self._kept[rel]

    def __contains__(self, rel: object) -> bool:
        return rel in self._kept

    def __iter__(self) -> Iterator[str]:
        return iter(self._kept)

    def __len__(self) -> int:
        return len(self._kept)

    def __repr__(self) -> str:
        return f"Texts({len(self._kept)} files)"

    def kept(self, rel: str) -> Kept:
        """The text of ``rel`` as kept (to share it, not to copy it)."""
        return self._kept[rel]

    def move(self, rel: str, other: Texts) -> None:
        """Move the text of ``rel`` into ``other`` as it is kept."""
        other._kept[rel] = self._kept.pop(rel)

    def utf8(self, rel: str) -> bytes:
        """The text of ``rel`` as UTF-8 (what a digest of it reads)."""
        kept = self._kept[rel]
        return kept if isinstance(kept, bytes) else kept.encode("utf-8")
