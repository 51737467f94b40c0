"""What every codemod shares: finding the node a finding points at, and declining safely.

A codemod takes one module's code and the findings it should fix there, and returns the new code
or raises :class:`Decline` with the reason (django-upgrade's caution: when unsure, rewrite
nothing and say why).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import ClassVar, TypeVar

import libcst as cst
from libcst.metadata import ParentNodeProvider, PositionProvider, ProviderT

from driftcheck.findings import Finding


class Decline(Exception):
    """The codemod will not rewrite this site; the message says why."""


def params(finding: Finding) -> dict[str, str]:
    """The fix parameters of a finding as a dict."""
    return dict(finding.fix.params) if finding.fix else {}


def code_of(node: cst.CSTNode) -> str:
    """The source text of a node."""
    return cst.Module(body=[]).code_for_node(node)


def new_home(p: dict[str, str]) -> tuple[str, str]:
    """(module, name) where a moved name lives now, from a ``rename-import`` fix's ``old`` and
    ``new``; Decline for a home the fix cannot rewrite to without guessing.

    A home that is the old *module* under a changed spelling (``pkg.helper.f`` -> ``pkg._helper``,
    the module made private; ``pkg.things`` -> ``pkg.Things``, the class the module held) says
    what became of the module, not of the name read off it: importing it under the old name
    would bind the wrong object. A home inside the host's private modules, reached from a public
    one, would tie the client to internals the host may change without notice.
    """
    old, new = p["old"], p["new"]
    module, _, name = new.rpartition(".")
    if not module or not all(part.isidentifier() for part in new.split(".")):
        raise Decline(f"{new!r} is not a name inside a module")
    old_module, _, old_name = old.rpartition(".")
    old_parent, _, old_leaf = old_module.rpartition(".")
    if name != old_name and (
        (module == old_parent and name.strip("_") == old_leaf.strip("_"))
        or (module == old_module and old_name.islower() and name.lower() == old_name)
    ):
        raise Decline(f"{new} is what became of the module, not the new home of {old_name}")
    if _private(new) > _private(old):
        raise Decline(f"{new} is private to the host; use its public replacement by hand")
    return module, name


def _private(dotted: str) -> int:
    return sum(part.startswith("_") and not part.startswith("__") for part in dotted.split("."))


class Located(cst.CSTTransformer):
    """A transformer that knows positions and parents, and which findings it targets."""

    METADATA_DEPENDENCIES: ClassVar[Collection[ProviderT]] = (PositionProvider, ParentNodeProvider)

    def __init__(self, findings: list[Finding]) -> None:
        super().__init__()
        self.targets = {(f.fix_at[0], f.fix_at[1] - 1): f for f in findings}
        self.done: set[tuple[int, int]] = set()

    def target_of(self, node: cst.CSTNode) -> Finding | None:
        """The finding that points exactly at ``node`` (start line and column)."""
        try:
            pos = self.get_metadata(PositionProvider, node)
        except KeyError:
            return None
        key = (pos.start.line, pos.start.column)
        found = self.targets.get(key)
        if found is not None:
            self.done.add(key)
        return found

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The parent of an original node."""
        try:
            return self.get_metadata(ParentNodeProvider, node)
        except KeyError:
            return None


def run(transformer: Located, code: str) -> str:
    """Apply a transformer to code; decline when it touched nothing."""
    wrapper = cst.MetadataWrapper(cst.parse_module(code))
    new = wrapper.visit(transformer)
    if not transformer.done:
        raise Decline("the code at the finding's position is not the shape this fix handles")
    return new.code


#: The attribute holding the whitespace after an item of a comma-separated list (before its
#: comma or the closing bracket), per libcst node type.
_TAIL = {
    "Arg": "whitespace_after_arg",
    "Param": "whitespace_after_param",
    "ParamSlash": "whitespace_after",
}


def _tail(node: cst.CSTNode) -> str | None:
    return _TAIL.get(type(node).__name__)


_Item = TypeVar("_Item", bound=cst.CSTNode)
_Last = TypeVar("_Last", bound=cst.CSTNode)
_New = TypeVar("_New", bound=cst.CSTNode)


def hand_over(
    prev: cst.CSTNode | None,
    last: _Last,
    new: _New,
    opening: cst.BaseParenthesizableWhitespace | None,
) -> tuple[_Last, _New]:
    """Append ``new`` after ``last`` in a comma-separated list: both rewritten.

    One item per line stays one item per line (indented like the item before, or like the
    first item after the opening bracket), a trailing comma stays, and every comment stays on
    its own item's line: the closing line's whitespace moves to the new item.
    """
    tail_attr = _tail(last)
    last_comma = getattr(last, "comma", None)
    comma = last_comma if isinstance(last_comma, cst.Comma) else None
    trailing = comma is not None
    tail = comma.whitespace_after if comma is not None else getattr(last, tail_attr or "", None)
    prev_comma = getattr(prev, "comma", None)
    sep = prev_comma.whitespace_after if isinstance(prev_comma, cst.Comma) else opening
    if isinstance(sep, cst.ParenthesizedWhitespace) and isinstance(
        tail, cst.ParenthesizedWhitespace
    ):
        between = cst.ParenthesizedWhitespace(
            first_line=tail.first_line, empty_lines=[], indent=sep.indent, last_line=sep.last_line
        )
        closing = tail.with_changes(first_line=cst.TrailingWhitespace())
        if comma is not None:
            last = last.with_changes(comma=comma.with_changes(whitespace_after=between))
            new = new.with_changes(comma=cst.Comma(whitespace_after=closing))
        else:
            changes = {tail_attr: cst.SimpleWhitespace("")} if tail_attr else {}
            last = last.with_changes(comma=cst.Comma(whitespace_after=between), **changes)
            new_tail = _tail(new)
            new = new.with_changes(**({new_tail: closing} if new_tail else {}))
        return last, new
    space = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    if trailing:  # one line with a trailing comma: ``f(a, b,)``
        sep_comma = prev_comma if prev is not None else space
        return last.with_changes(comma=sep_comma), new.with_changes(comma=comma)
    new_tail = _tail(new)
    if tail_attr and new_tail:  # the space before the closing bracket stays before it
        new = new.with_changes(**{new_tail: getattr(last, tail_attr)})
        last = last.with_changes(**{tail_attr: cst.SimpleWhitespace("")})
    return last.with_changes(comma=space), new


def appended(
    items: Sequence[cst.CSTNode],
    new: cst.CSTNode,
    opening: cst.BaseParenthesizableWhitespace | None,
) -> list[cst.CSTNode]:
    """``items`` with ``new`` at the end, in the list's own layout (see :func:`hand_over`)."""
    if not items:
        return [new]
    prev = items[-2] if len(items) > 1 else None
    last, new = hand_over(prev, items[-1], new, opening)
    return [*items[:-1], last, new]


def without(items: Sequence[_Item], idx: int) -> list[_Item]:
    """``items`` without item ``idx``, the list's layout and the kept items' comments intact."""
    out = list(items)
    removed = out.pop(idx)
    if idx < len(out) or not out:
        return out
    last = out[-1]
    rem_comma = getattr(removed, "comma", None)
    last_comma = getattr(last, "comma", None)
    if isinstance(rem_comma, cst.Comma):
        # Trailing-comma style: the new last item keeps its own comma and comment, and takes
        # the removed item's way to the closing bracket.
        if (
            isinstance(last_comma, cst.Comma)
            and isinstance(last_comma.whitespace_after, cst.ParenthesizedWhitespace)
            and isinstance(rem_comma.whitespace_after, cst.ParenthesizedWhitespace)
        ):
            ws = last_comma.whitespace_after.with_changes(
                indent=rem_comma.whitespace_after.indent,
                last_line=rem_comma.whitespace_after.last_line,
                empty_lines=rem_comma.whitespace_after.empty_lines,
            )
            out[-1] = last.with_changes(comma=last_comma.with_changes(whitespace_after=ws))
        else:
            out[-1] = last.with_changes(comma=rem_comma)
        return out
    tail_attr = _tail(last)
    rem_tail = getattr(removed, tail_attr or "", None)
    if (
        tail_attr
        and isinstance(last_comma, cst.Comma)
        and isinstance(last_comma.whitespace_after, cst.ParenthesizedWhitespace)
        and isinstance(rem_tail, cst.ParenthesizedWhitespace)
    ):
        # No trailing comma, one item per line: keep the new last item's comment on its line.
        ws = last_comma.whitespace_after.with_changes(
            indent=rem_tail.indent, last_line=rem_tail.last_line, empty_lines=rem_tail.empty_lines
        )
        out[-1] = last.with_changes(comma=cst.MaybeSentinel.DEFAULT, **{tail_attr: ws})
        return out
    changes = {tail_attr: rem_tail} if tail_attr and rem_tail is not None else {}
    out[-1] = last.with_changes(comma=cst.MaybeSentinel.DEFAULT, **changes)
    return out


def append_arg(call: cst.Call, arg: cst.Arg) -> cst.Call:
    """Add a keyword argument at the end, keeping the call's comma and line style (a bare
    generator, ``f(x for x in y)``, gets its own parentheses: it may stand alone only)."""
    args = [
        a.with_changes(value=a.value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]))
        if isinstance(a.value, cst.GeneratorExp) and not a.value.lpar
        else a
        for a in call.args
    ]
    return call.with_changes(args=appended(args, arg, call.whitespace_before_args))


def remove_arg(call: cst.Call, keyword: str) -> cst.Call:
    """Drop a keyword argument, keeping the commas, the layout and the comments of the rest."""
    idx = next(
        (i for i, a in enumerate(call.args) if a.keyword and a.keyword.value == keyword), None
    )
    if idx is None:
        raise Decline(f"no keyword {keyword!r} in this call")
    args = without(call.args, idx)
    if not args:
        opening = call.whitespace_before_args
        removed = call.args[idx]
        closing = (
            removed.comma.whitespace_after
            if isinstance(removed.comma, cst.Comma)
            else removed.whitespace_after_arg
        )
        if isinstance(opening, cst.ParenthesizedWhitespace) and opening.first_line.comment:
            # ``f(  # why`` keeps its comment: the closing bracket stays on its own line.
            kept = (
                {"indent": closing.indent, "last_line": closing.last_line}
                if isinstance(closing, cst.ParenthesizedWhitespace)
                else {"indent": True, "last_line": cst.SimpleWhitespace("")}
            )
            opening = opening.with_changes(empty_lines=[], **kept)
        else:
            opening = cst.SimpleWhitespace("")
        return call.with_changes(args=[], whitespace_before_args=opening)
    return call.with_changes(args=args)


def argument_code(call: cst.Call, name: str) -> str | None:
    """Source of the argument passed as keyword ``name`` (None when not passed by keyword)."""
    for a in call.args:
        if a.keyword is not None and a.keyword.value == name:
            return cst.Module(body=[]).code_for_node(a.value)
    return None
