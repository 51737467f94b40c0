"""Annotations as text: canonical forms, union members, containers, and how a return
annotation changed between two releases."""

from __future__ import annotations

import re

from driftcheck.host.signature import Param

# -- return shapes ---------------------------------------------------------------------------

_CONTAINERS = {
    "list",
    "List",
    "tuple",
    "Tuple",
    "Sequence",
    "set",
    "Set",
    "dict",
    "Dict",
    "Iterable",
}


def same_type(old: Param, new: Param) -> bool:
    """Whether a value passed as ``old`` fits ``new`` as written: the same annotation (an
    unannotated pair says nothing, so it is not the same)."""
    a, b = normalise_annotation(old.annotation), normalise_annotation(new.annotation)
    return a is not None and a == b


def normalise_annotation(text: str | None) -> str | None:
    """Canonical text of an annotation: ``Optional[X]`` → ``X | None``, no spaces."""
    if text is None:
        return None
    text = text.replace(" ", "").strip("'\"")
    m = re.fullmatch(r"(?:typing\.)?Optional\[(.*)\]", text)
    if m:
        text = f"{m.group(1)}|None"
    m = re.fullmatch(r"(?:typing\.)?Union\[(.*)\]", text)
    if m:
        text = "|".join(_split_top(m.group(1), ","))
    return text


def _split_top(text: str, sep: str) -> list[str]:
    """Split at top-level ``sep`` (brackets respected)."""
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "["
        depth -= ch == "]"
        if ch == sep and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return [x for x in out if x]


def union_members(text: str) -> set[str]:
    """Top-level members of a ``|`` union (brackets respected)."""
    members, depth, cur = set(), 0, ""
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "|" and depth == 0:
            members.add(cur)
            cur = ""
        else:
            cur += ch
    members.add(cur)
    return {m.strip() for m in members if m.strip()}


def accepts_none(annotation: str | None) -> bool:
    """Does the annotation admit ``None`` (``X | None``, ``Optional[X]``, ``None``)?"""
    text = (annotation or "").replace(" ", "")
    return "None" in union_members(text) or text.startswith("Optional[")


def container_item(text: str) -> str | None:
    """For ``list[X]`` and friends, ``X``; else None."""
    m = re.fullmatch(r"(?:typing\.)?(\w+)\[(.*)\]", text)
    if m and m.group(1) in _CONTAINERS:
        return m.group(2)
    return None


def return_change(baseline: str | None, target: str | None) -> str | None:
    """How a return annotation changed in a way callers feel; None when compatible or unknown.

    One of ``became-none``, ``gained-none``, ``container-to-item``, ``item-to-container``.
    """
    old, new = normalise_annotation(baseline), normalise_annotation(target)
    if not old or not new or old == new:
        return None
    if new in ("Any", "typing.Any", "object"):
        return None  # no shape claim: a rule must say what changed
    if new == "None" and old != "None":
        return "became-none"
    old_m, new_m = union_members(old), union_members(new)
    if "None" in new_m and "None" not in old_m and old != "None":
        return "gained-none"
    old_core = "|".join(sorted(old_m - {"None"})) or old
    new_core = "|".join(sorted(new_m - {"None"})) or new
    if ("None" in old_m) == ("None" in new_m):
        old, new = old_core, new_core
    old_item, new_item = container_item(old), container_item(new)
    if (
        old_item is not None
        and new_item is None
        and (new == old_item or new in union_members(old_item))
    ):
        return "container-to-item"
    if (
        new_item is not None
        and old_item is None
        and (old == new_item or old in union_members(new_item))
    ):
        return "item-to-container"
    return None
