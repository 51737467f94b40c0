"""What a host lookup returns: a found object with its canonical path, UNKNOWN (cannot be
decided statically), or None (certainly absent)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import griffe

from driftcheck.host.values import Served


class Unknown:
    """A lookup that cannot be decided statically (dynamic ``__getattr__``, external base)."""

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = Unknown()


@dataclass
class Found:
    """A resolved host object and its canonical path."""

    obj: griffe.Object
    path: str

    @property
    def kind(self) -> str:
        """``module``, ``class``, ``function`` or ``attribute``."""
        return self.obj.kind.value

    @property
    def file(self) -> str:
        """Path of the defining file, relative to the host's root."""
        fp = self.obj.filepath
        return Path(fp).as_posix() if not isinstance(fp, list) else Path(fp[0]).as_posix()

    @property
    def line(self) -> int:
        """Line of the definition (1 for a module)."""
        return int(self.obj.lineno or 1)


Lookup = Found | Unknown | Served | None


def canonical(expr: object) -> str | None:
    """The dotted path a griffe expression names (its canonical path), or None."""
    if expr is None:
        return None
    path = getattr(expr, "canonical_path", None)
    if isinstance(path, str):
        return path
    if isinstance(expr, str):
        return expr
    return None
