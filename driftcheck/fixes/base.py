"""What every codemod shares: finding the node a finding points at, and declining safely.

A codemod takes one module's code and the findings it should fix there, and returns the new code
or raises :class:`Decline` with the reason (django-upgrade's caution: when unsure, rewrite
nothing and say why).
"""

from __future__ import annotations

import libcst as cst
from libcst.metadata import ParentNodeProvider, PositionProvider

from driftcheck.findings import Finding


class Decline(Exception):
    """The codemod will not rewrite this site; the message says why."""


def params(finding: Finding) -> dict[str, str]:
    """The fix parameters of a finding as a dict."""
    return dict(finding.fix.params) if finding.fix else {}


class Located(cst.CSTTransformer):
    """A transformer that knows positions and parents, and which findings it targets."""

    METADATA_DEPENDENCIES = (PositionProvider, ParentNodeProvider)

    def __init__(self, findings: list[Finding]) -> None:
        super().__init__()
        self.targets = {(f.line, f.column - 1): f for f in findings}
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


def append_arg(call: cst.Call, arg: cst.Arg) -> cst.Call:
    """Add a keyword argument at the end, keeping the call's comma and line style."""
    args = list(call.args)
    if not args:
        return call.with_changes(args=[arg])
    last = args[-1]
    trailing = not isinstance(last.comma, cst.MaybeSentinel)
    if trailing:
        # Multi-line call with a trailing comma: the new argument takes the same comma and the
        # old last argument takes the comma style of the ones before it.
        sep = args[-2].comma if len(args) > 1 else last.comma
        args[-1] = last.with_changes(comma=sep)
        args.append(arg.with_changes(comma=last.comma))
    else:
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        args.append(arg)
    return call.with_changes(args=args)


def remove_arg(call: cst.Call, keyword: str) -> cst.Call:
    """Drop a keyword argument, keeping the commas consistent."""
    args = list(call.args)
    idx = next((i for i, a in enumerate(args) if a.keyword and a.keyword.value == keyword), None)
    if idx is None:
        raise Decline(f"no keyword {keyword!r} in this call")
    removed = args.pop(idx)
    if idx == len(args) and args:
        args[-1] = args[-1].with_changes(comma=removed.comma)
    return call.with_changes(args=args)


def argument_code(call: cst.Call, name: str) -> str | None:
    """Source of the argument passed as keyword ``name`` (None when not passed by keyword)."""
    for a in call.args:
        if a.keyword is not None and a.keyword.value == name:
            return cst.Module(body=[]).code_for_node(a.value)
    return None
