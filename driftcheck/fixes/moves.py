"""Codemods that move a value the host no longer takes at one place to where it reads it now.

* ``keyword-to-call``: ``x = f(a, k=v)`` -> ``x = f(a)`` then the rule's ``call`` with ``{result}``
  standing for ``x`` and ``{value}`` for ``v`` (e.g. ``{result}.params.update({}, {value})``): the
  host dropped the keyword and now reads the value from an object the result holds, which its
  own code sets with a method call after construction.
"""

from __future__ import annotations

import re

import libcst as cst

from driftcheck.findings import Finding
from driftcheck.fixes.base import Decline, Located, argument_code, params, remove_arg, run

#: A value that may be read after the call instead of at it: a name, a dotted attribute read
#: or a literal (nothing that calls, indexes or computes).
_MOVABLE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*|-?\d+|None|True|False|'[^']*'|\"[^\"]*\"")


class _KeywordToCall(Located):
    """Drop ``keyword`` from each targeted call and put the rule's call after its statement."""

    def __init__(self, findings: list[Finding]) -> None:
        super().__init__(findings)
        self.after: dict[cst.SimpleStatementLine, str] = {}
        self.calls: dict[cst.Call, str] = {}

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if len(node.body) != 1 or not isinstance(node.body[0], cst.Assign | cst.AnnAssign):
            return
        small = node.body[0]
        call = small.value
        if not isinstance(call, cst.Call):
            return
        finding = self.target_of(call)
        if finding is None:
            return
        p = params(finding)
        target = small.targets[0].target if isinstance(small, cst.Assign) else small.target
        if isinstance(small, cst.Assign) and len(small.targets) != 1:
            raise Decline("the result is bound to several names")
        if not isinstance(target, cst.Name):
            raise Decline("the result is not bound to a plain name")
        value = argument_code(call, p["keyword"])
        if value is None:
            raise Decline(f"{p['keyword']} is not passed by keyword")
        if not _MOVABLE.fullmatch(value.strip()):
            raise Decline(
                f"{p['keyword']} is passed as an expression; reading it after the call could change it"
            )
        for needed in p.get("requires", "").split(","):
            got = argument_code(call, needed.strip()) if needed.strip() else ""
            if got is None or got.strip() == "None":
                raise Decline(f"the call does not pass {needed.strip()}, which the value moves to")
        statement = p["call"].replace("{result}", target.value).replace("{value}", value.strip())
        self.calls[call] = p["keyword"]
        self.after[node] = statement

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        keyword = self.calls.get(original_node)
        return updated_node if keyword is None else remove_arg(updated_node, keyword)

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.BaseStatement | cst.FlattenSentinel:
        statement = self.after.get(original_node)
        if statement is None:
            return updated_node
        return cst.FlattenSentinel([updated_node, cst.parse_statement(statement + "\n")])


def keyword_to_call(code: str, findings: list[Finding]) -> str:
    """Move each finding's keyword value into the follow-up call the rule names."""
    return run(_KeywordToCall(findings), code)
