"""Codemods for the client's use of the host's server over HTTP.

* ``add-launch-flag``: append a flag to the argv list literal that starts the server
  (``["vllm", "serve", m]`` -> ``["vllm", "serve", m, "--flag"]``), in the list's own layout.
* ``rename-launch-flag``: the flag written at the finding, ``"--old"`` -> ``"--new"`` (``"--old=v"``
  keeps its value).
* ``rename-payload-key``: the string key written at the finding (``{"old": v}``,
  ``body["old"] = v``) -> ``"new"``, in the same quotes.
"""

from __future__ import annotations

import libcst as cst
from libcst.metadata import PositionProvider

from driftcheck.findings import Finding
from driftcheck.fixes.base import Decline, Located, params, run


def _text(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.SimpleString):
        try:
            value = node.evaluated_value
        except (SyntaxError, ValueError):  # a literal Python would refuse (a NUL byte, say)
            return None
        return value if isinstance(value, str) else None
    return None


def _quoted(like: cst.SimpleString, text: str) -> cst.SimpleString:
    """``text`` as a string literal with ``like``'s prefix and quotes."""
    quote = like.quote
    if quote in text or "\\" in text:
        raise Decline(f"{text!r} cannot be written in the same quotes")
    return cst.SimpleString(f"{like.prefix}{quote}{text}{quote}")


def _append(lst: cst.List, value: cst.BaseExpression) -> cst.List:
    """``lst`` with ``value`` at the end, in its layout: one item per line stays so (the last
    line's comment stays on its item), a trailing comma stays."""
    items = list(lst.elements)
    if not items:
        return lst.with_changes(elements=[cst.Element(value=value)])
    last = items[-1]
    closing = lst.rbracket.whitespace_before
    if isinstance(last.comma, cst.Comma) and isinstance(closing, cst.ParenthesizedWhitespace):
        before = items[-2].comma if len(items) > 1 else None
        prev = (
            before.whitespace_after
            if isinstance(before, cst.Comma)  # an item before the last always has its comma
            else lst.lbracket.whitespace_after
        )
        indent = (
            prev.last_line if isinstance(prev, cst.ParenthesizedWhitespace) else closing.last_line
        )
        between = cst.ParenthesizedWhitespace(
            first_line=closing.first_line, empty_lines=[], indent=True, last_line=indent
        )
        items[-1] = last.with_changes(comma=last.comma.with_changes(whitespace_after=between))
        items.append(cst.Element(value=value, comma=cst.Comma()))
        rbracket = lst.rbracket.with_changes(
            whitespace_before=closing.with_changes(first_line=cst.TrailingWhitespace())
        )
        return lst.with_changes(elements=items, rbracket=rbracket)
    if isinstance(last.comma, cst.Comma):
        items.append(cst.Element(value=value, comma=last.comma))
        items[-2] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        return lst.with_changes(elements=items)
    items[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    items.append(cst.Element(value=value))
    return lst.with_changes(elements=items)


class _LaunchList(Located):
    def __init__(self, findings: list[Finding]) -> None:
        super().__init__(findings)
        #: Every flag to add at one list (several findings can point at the same command).
        self.flags: dict[tuple[int, int], list[str]] = {}
        for f in findings:
            flag = params(f).get("flag")
            at = self.flags.setdefault((f.fix_at[0], f.fix_at[1] - 1), [])
            if flag and flag not in at:
                at.append(flag)

    def leave_List(self, original_node: cst.List, updated_node: cst.List) -> cst.List:
        finding = self.target_of(original_node)
        if finding is None:
            return updated_node
        pos = self.get_metadata(PositionProvider, original_node).start
        texts = [_text(e.value) for e in updated_node.elements]
        like = next(
            (e.value for e in updated_node.elements if isinstance(e.value, cst.SimpleString)),
            cst.SimpleString('"x"'),
        )
        for flag in self.flags.get((pos.line, pos.column), [params(finding)["flag"]]):
            if flag in texts or any(t and t.startswith(flag + "=") for t in texts):
                raise Decline(f"{flag} is already passed")
            updated_node = _append(updated_node, _quoted(like, flag))
        return updated_node


def add_launch_flag(code: str, findings: list[Finding]) -> str:
    """Add the flag a route now needs to the command line that starts the server."""
    return run(_LaunchList(findings), code)


def rename_launch_flag(code: str, findings: list[Finding]) -> str:
    """Pass the flag that replaced a removed or deprecated one (``"--old=v"`` keeps its
    value)."""
    return run(_StringAt(findings, prefix="="), code)


class _StringAt(Located):
    """The string literal at the finding, when it is the old text (or, with ``prefix``, the
    old text followed by it and more)."""

    def __init__(self, findings: list[Finding], prefix: str | None = None) -> None:
        super().__init__(findings)
        self.prefix = prefix

    def leave_SimpleString(
        self, original_node: cst.SimpleString, updated_node: cst.SimpleString
    ) -> cst.SimpleString:
        pos = self.get_metadata(PositionProvider, original_node).start
        finding = self.targets.get((pos.line, pos.column))
        if finding is None:
            return updated_node
        p = params(finding)
        text = _text(updated_node) or ""
        rest = text[len(p["old"]) :] if text.startswith(p["old"]) else None
        if rest is None or (rest and not (self.prefix and rest.startswith(self.prefix))):
            raise Decline(f"the string at the finding is not {p['old']!r}")
        self.done.add((pos.line, pos.column))
        return _quoted(updated_node, p["new"] + rest)


def rename_payload_key(code: str, findings: list[Finding]) -> str:
    """Send a request field under the name the host's model now takes it by."""
    return run(_StringAt(findings), code)
