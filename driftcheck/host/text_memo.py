"""What a pass over all of a host's files learnt from a piece of source text (a function),
kept for the next release of the host: the releases a scan compares share most of their code
verbatim (torch 2.6 and 2.10: most functions, though few whole files), and a result that
depends on the text alone need not be parsed out of it again.

Keyed by a digest of the text, so the memo holds no source, only the small results; and only
for the last two releases read (a scan compares two): starting a third drops the first's.
"""

from __future__ import annotations

from hashlib import blake2b
from typing import Generic, TypeVar

T = TypeVar("T")
_MISSING = object()


def digest(text: str) -> bytes:
    """A key for ``text`` (16 bytes)."""
    return blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class TextMemo(Generic[T]):
    """A map from a text's :func:`digest` to what a pass read from it, for the release being
    read and the one read before it."""

    def __init__(self) -> None:
        self._release: str | None = None
        self._now: dict[bytes, T] = {}
        self._before: dict[bytes, T] = {}

    def reading(self, release: str) -> None:
        """Start (or go on) reading ``release``: the results of the release read before the
        last one are dropped, those of the last one kept until it is read again."""
        if release != self._release:
            self._release, self._before, self._now = release, self._now, {}

    def get(self, key: bytes, default: T) -> T:
        """What was kept for ``key`` (kept for this release too from then on), or ``default``."""
        got = self._now.get(key, _MISSING)
        if got is _MISSING:
            got = self._before.get(key, _MISSING)
            if got is _MISSING:
                return default
            self._now[key] = got  # type: ignore[assignment]  # a T kept before
        return got  # type: ignore[return-value]  # a T kept before

    def put(self, key: bytes, value: T) -> None:
        """Keep ``value`` for ``key``."""
        self._now[key] = value

    def __len__(self) -> int:
        return len(self._now.keys() | self._before.keys())

    def clear(self) -> None:
        """Forget every release."""
        self._release, self._now, self._before = None, {}, {}
