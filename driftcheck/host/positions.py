"""Positional arguments bound on two releases: which parameter each one lands on.

A client that passes arguments by position hands the i-th one to the i-th positional
parameter. When a parameter is inserted, removed or reordered in the middle of a signature, or
becomes keyword-only, the same call hands its values to other parameters, or raises. A
parameter renamed in place (same position, the old name gone, the new one new) and a renamed
positional-only parameter are the same slot, not a rebinding.
"""

from __future__ import annotations

from dataclasses import dataclass

from driftcheck.host.annotations import normalise_annotation
from driftcheck.host.signature import Param, Signature

POSITIONAL = ("positional_only", "positional_or_keyword")


@dataclass(frozen=True)
class Rebinding:
    """Positional argument ``index`` (0-based): the parameter it bound at baseline and now."""

    index: int
    before: Param
    #: The parameter it binds on the target (None: no positional slot is left for it).
    after: Param | None
    #: ``shift`` (another parameter), ``keyword-only`` (its parameter can no longer be passed
    #: by position: TypeError), ``var-positional`` (swallowed by ``*args``), ``gone``.
    how: str

    @property
    def same_type(self) -> bool | None:
        """Whether the two parameters are annotated alike (None: one is not annotated)."""
        if self.after is None:
            return None
        a = normalise_annotation(self.before.annotation)
        b = normalise_annotation(self.after.annotation)
        if a is None or b is None:
            return None
        return a == b


def slots(sig: Signature, *, positional_deprecated: bool = False) -> list[Param]:
    """The parameters positional arguments fill, in order (with ``positional_deprecated``,
    keyword-only ones too: a decorator on the function still takes them by position)."""
    kinds = (*POSITIONAL, "keyword_only") if positional_deprecated else POSITIONAL
    return [p for p in sig.params if p.kind in kinds]


def rebindings(
    before: Signature,
    after: Signature,
    positional: int,
    *,
    before_deprecated: bool = False,
    after_deprecated: bool = False,
) -> list[Rebinding]:
    """How the first ``positional`` arguments of a call bind differently on ``after``."""
    old_slots = slots(before, positional_deprecated=before_deprecated)
    new_slots = slots(after, positional_deprecated=after_deprecated)
    out: list[Rebinding] = []
    for i in range(positional):
        if i >= len(old_slots):
            break  # ``*args`` at baseline (or already too many): nothing to compare
        old = old_slots[i]
        new = new_slots[i] if i < len(new_slots) else None
        if new is None:
            if after.accepts_var_positional:
                out.append(Rebinding(i, old, None, "var-positional"))
            else:
                same = after.param(old.name)
                how = "keyword-only" if same is not None and same.kind == "keyword_only" else "gone"
                out.append(Rebinding(i, old, same, how))
            continue
        if new.name == old.name:
            continue
        if old.kind == new.kind == "positional_only":
            continue  # a positional-only parameter renamed: callers cannot tell
        if after.param(old.name) is None and before.param(new.name) is None:
            continue  # renamed in place: the same slot under a new name
        out.append(Rebinding(i, old, new, "shift"))
    return out
