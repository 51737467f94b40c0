"""The client's texts, each kept in its smallest form.

Python stores a string at one, two or four bytes a character, whichever its widest character
needs: one emoji in a docstring makes a whole file take four bytes a character (transformers
5.24.0: 1,269 of its files, 20 M characters, 82 MB as strings, 21 MB as UTF-8). A text with a
character past Latin-1 is kept as its UTF-8 bytes and decoded when read; the others stay strings.
The client's texts, the lines findings quote (:mod:`driftcheck.client.lines`) and each parsed
module's :class:`~driftcheck.client.names.Source` share the one kept form.

A text longer than :data:`PACK_ABOVE` is kept compressed (:class:`Packed`): a whole package's
texts are held while every syntax tree is (transformers' 1,442 analysed files: 47 MB, 10 MB
compressed), yet each is read as a whole only a few times (parsed, searched, digested) and
where a finding or a position past ASCII reads its lines. The last few texts unpacked are kept
unpacked: the reads of one file come together.
"""

from __future__ import annotations

import sys
import weakref
import zlib
from collections import OrderedDict, deque
from collections.abc import Iterator, MutableMapping

#: Texts of more characters (or bytes) than this are kept compressed.
PACK_ABOVE = 4096
#: How many unpacked texts are kept (the most recently read).
_RECENT_TEXTS = 4

_EMPTY_STR = sys.getsizeof("")


class Packed:
    """A kept text compressed (zlib's fastest level): the string, or its UTF-8 bytes, it was
    kept as comes back from :meth:`unpacked`.

    A text is compressed only once more than :data:`PENDING_BYTES` of texts kept after it
    wait to be (:func:`_pending`): a small client's texts are never compressed (a warm scan
    of one reads each text once, to digest it), a large one's are as they pile up."""

    __slots__ = ("_data", "_wide", "_ascii", "_raw", "__weakref__")

    def __init__(self, kept: str | bytes) -> None:
        self._wide = isinstance(kept, bytes)
        self._ascii = kept.isascii()
        self._raw: str | bytes | None = kept
        self._data = b""
        _pending(self, len(kept))

    def _pack(self) -> None:
        raw = self._raw
        if raw is None:
            return
        # a kept string may hold a lone surrogate (no other exact form): passed through
        self._data = zlib.compress(
            raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass"), 1
        )
        self._raw = None

    def isascii(self) -> bool:
        """Whether the text is ASCII (known without unpacking it)."""
        return self._ascii

    def unpacked(self) -> str | bytes:
        """The text as it was kept before it was packed."""
        raw = self._raw
        if raw is not None:  # not compressed yet
            return raw
        got = _RECENT.get(id(self))
        if got is not None and got[0] is self:
            _RECENT.move_to_end(id(self))
            return got[1]
        data = zlib.decompress(self._data)
        text = data if self._wide else data.decode("utf-8", "surrogatepass")
        _RECENT[id(self)] = (self, text)
        if len(_RECENT) > _RECENT_TEXTS:
            _RECENT.popitem(last=False)
        return text

    def __reduce__(self) -> tuple:
        """Pickled as the text it stands for (packed again where it is loaded)."""
        return (Packed, (self.unpacked(),))


#: How many characters (or bytes) of kept texts may wait uncompressed, the latest kept.
PENDING_BYTES = 8_000_000
#: The texts waiting to be compressed, oldest first, with their sizes (a text no longer
#: held by anything drops out when its turn comes).
_PENDING: deque[tuple[weakref.ref[Packed], int]] = deque()
_PENDING_SIZE = [0]


def _pending(text: Packed, size: int) -> None:
    """Queue ``text`` to be compressed, and compress the oldest waiting texts past
    :data:`PENDING_BYTES`."""
    _PENDING.append((weakref.ref(text), size))
    _PENDING_SIZE[0] += size
    while _PENDING_SIZE[0] > PENDING_BYTES and _PENDING:
        ref, n = _PENDING.popleft()
        _PENDING_SIZE[0] -= n
        held = ref()
        if held is not None:
            held._pack()


#: The texts unpacked last, by ``id()`` of their :class:`Packed` (held with it).
_RECENT: OrderedDict[int, tuple[Packed, str | bytes]] = OrderedDict()

#: A text as kept: the string itself, its UTF-8 bytes, or either packed.
Kept = str | bytes | Packed


def keep(text: str | bytes | Packed) -> Kept:
    """``text`` in its smallest form (bytes and packed texts are taken as already kept)."""
    if isinstance(text, Packed):
        return text
    kept: str | bytes = text
    if isinstance(text, str) and not text.isascii():
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: the string is the only exact form
            data = b""
        if data and len(data) < sys.getsizeof(text) - _EMPTY_STR:
            kept = data
    return Packed(kept) if len(kept) > PACK_ABOVE else kept


def unpack(kept: Kept) -> str | bytes:
    """A kept text as a string or its UTF-8 bytes (whichever it was kept as)."""
    return kept.unpacked() if isinstance(kept, Packed) else kept


def text_of(kept: Kept) -> str:
    """The string a kept form stands for."""
    text = unpack(kept)
    return text if isinstance(text, str) else text.decode("utf-8")


def utf8_of(kept: Kept) -> bytes:
    """The UTF-8 of a kept text (what a digest of it reads)."""
    text = unpack(kept)
    return text if isinstance(text, bytes) else text.encode("utf-8")


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
        return utf8_of(self._kept[rel])
