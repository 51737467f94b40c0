"""What a host lookup returns: a found object with its canonical path, UNKNOWN (cannot be
decided statically), or None (certainly absent)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePath

import griffe

from driftcheck.host.attributes import InferredType
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
        if isinstance(fp, list):
            fp = fp[0]
        # griffe's own path as it is (a new Path of it cost transformers' scan a second)
        return fp.as_posix() if isinstance(fp, PurePath) else Path(fp).as_posix()

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


def annotation_paths(annotation: object) -> list[str]:
    """Candidate class paths named by an annotation, None and containers stripped."""
    if annotation is None:
        return []
    if isinstance(annotation, str):
        return [annotation.strip("'\"")]
    if isinstance(annotation, InferredType):
        return [annotation.path] if annotation.path else []
    if isinstance(annotation, griffe.ExprBinOp) and annotation.operator == "|":
        parts = annotation_paths(annotation.left) + annotation_paths(annotation.right)
        return [p for p in parts if p not in ("None", "builtins.None")]
    if isinstance(annotation, griffe.ExprSubscript):
        head = canonical(annotation.left)
        if head in ("typing.Optional", "typing.Union", "typing_extensions.Optional"):
            inner = annotation.slice
            elems = inner.elements if isinstance(inner, griffe.ExprTuple) else [inner]
            out: list[str] = []
            for e in elems:
                out.extend(annotation_paths(e))
            return [p for p in out if p not in ("None", "builtins.None")]
        return []
    if isinstance(annotation, griffe.ExprName | griffe.ExprAttribute):
        path = canonical(annotation)
        return [path] if path else []
    return []
