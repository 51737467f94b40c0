"""Codemods that change what happens around a host call.

* ``follow-up-call``: ``x = recv.m(a)`` -> ``recv.m(a)`` then ``x = recv.s(None)`` (also a bare
  call, a ``return`` and an ``if`` test): a call protocol the host now enforces.
* ``unwrap-result``: ``r = f(...)[0]`` -> ``r = f(...)``, also through one variable: the host
  now returns the item itself, not a one-element list.
"""

from __future__ import annotations

from typing import cast

import libcst as cst

from driftcheck.findings import Finding
from driftcheck.fixes.base import (
    Decline,
    Located,
    params,
    run,
)

# -- follow-up call ------------------------------------------------------------------------


class _FollowUp(Located):
    """Hoist ``recv.m(a)`` before its statement and put ``recv.s(args)`` where it was."""

    def __init__(self, findings: list[Finding]) -> None:
        super().__init__(findings)
        self.pending: dict[cst.CSTNode, tuple[cst.Call, cst.Call]] = {}

    def _follow_up(self, call: cst.Call, finding: Finding) -> cst.Call:
        p = params(finding)
        if not isinstance(call.func, cst.Attribute):
            raise Decline("the call has no receiver")
        if _has_call(call.func.value):
            raise Decline("the receiver is computed by a call; it would be evaluated twice")
        args = cast(cst.Call, cst.parse_expression(f"f({p.get('args', '')})")).args
        return cst.Call(func=call.func.with_changes(attr=cst.Name(p["method"])), args=args)

    def _claim(self, stmt: cst.CSTNode, expr: cst.BaseExpression | None) -> None:
        if isinstance(expr, cst.Call):
            finding = self.target_of(expr)
            if finding is not None:
                self.pending[stmt] = (expr, self._follow_up(expr, finding))

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if len(node.body) != 1:
            return
        small = node.body[0]
        if isinstance(small, cst.Expr | cst.Assign | cst.AnnAssign | cst.Return):
            self._claim(node, small.value)

    def visit_If(self, node: cst.If) -> None:
        if not isinstance(self.parent(node), cst.If):  # an elif cannot take a statement before it
            self._claim(node, node.test)

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.BaseStatement | cst.FlattenSentinel:
        if original_node not in self.pending:
            return updated_node
        call, follow = self.pending.pop(original_node)
        small = updated_node.body[0]
        hoisted = cst.SimpleStatementLine(
            body=[cst.Expr(call)],
            leading_lines=updated_node.leading_lines,
            trailing_whitespace=updated_node.trailing_whitespace,  # its comment stays with it
        )
        rest = updated_node.with_changes(
            body=[small.with_changes(value=follow)],
            leading_lines=[],
            trailing_whitespace=cst.TrailingWhitespace(),
        )
        return cst.FlattenSentinel([hoisted, rest])

    def leave_If(
        self, original_node: cst.If, updated_node: cst.If
    ) -> cst.BaseStatement | cst.FlattenSentinel:
        if original_node not in self.pending:
            return updated_node
        call, follow = self.pending.pop(original_node)
        hoisted = cst.SimpleStatementLine(
            body=[cst.Expr(call)], leading_lines=updated_node.leading_lines
        )
        return cst.FlattenSentinel(
            [hoisted, updated_node.with_changes(test=follow, leading_lines=[])]
        )


def follow_up_call(code: str, findings: list[Finding]) -> str:
    """Add the mandatory follow-up call after each finding's call."""
    return run(_FollowUp(findings), code)


# -- unwrap result ---------------------------------------------------------------------------


class _Unwrap(Located):
    """``f(...)[0]`` → ``f(...)``; with ``x = f(...)``, each ``x[0]`` in the same function → ``x``.

    Declines when ``x`` is rebound, used other than as ``x[0]``, written through ``x[0] = …``,
    or never indexed.
    """

    def __init__(self, findings: list[Finding]) -> None:
        super().__init__(findings)
        self.rewrite: set[cst.Subscript] = set()

    def visit_Call(self, node: cst.Call) -> None:
        if self.target_of(node) is None:
            return
        parent = self.parent(node)
        if isinstance(parent, cst.Subscript) and parent.value is node:
            self.rewrite.add(parent)
            return
        if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1):
            raise Decline("the result is neither indexed nor assigned to one name")
        target = parent.targets[0].target
        if not isinstance(target, cst.Name):
            raise Decline("the result is unpacked; unwrap it by hand")
        scope = self._scope(parent)
        uses = _NameUses(target.value)
        scope.visit(uses)
        if uses.bindings != 1:
            raise Decline(f"{target.value} is bound more than once; unwrap it by hand")
        if uses.other:
            raise Decline(f"{target.value} is used other than as {target.value}[0]")
        if not uses.indexed:
            raise Decline(f"{target.value} is never indexed with [0]")
        self.rewrite.update(uses.indexed)

    def _scope(self, node: cst.CSTNode) -> cst.CSTNode:
        cur = self.parent(node)
        while cur is not None and not isinstance(cur, cst.FunctionDef | cst.Module):
            cur = self.parent(cur)
        return cur if cur is not None else node

    def leave_Subscript(
        self, original_node: cst.Subscript, updated_node: cst.Subscript
    ) -> cst.BaseExpression:
        if original_node not in self.rewrite:
            return updated_node
        if not _is_zero_index(updated_node):
            raise Decline("the result is indexed with something other than [0]")
        return updated_node.value


def _is_zero_index(node: cst.Subscript) -> bool:
    sl = node.slice
    return (
        len(sl) == 1
        and isinstance(sl[0].slice, cst.Index)
        and isinstance(sl[0].slice.value, cst.Integer)
        and sl[0].slice.value.value == "0"
    )


class _NameUses(cst.CSTVisitor):
    """How one name is used in a scope: bindings, ``name[0]`` reads, anything else."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.bindings = 0
        self.indexed: list[cst.Subscript] = []
        self.other = False
        self._seen: set[cst.BaseExpression] = set()

    def _is(self, node: cst.CSTNode) -> bool:
        return isinstance(node, cst.Name) and node.value == self.name

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        if self._is(node.target):
            self.bindings += 1
            self._seen.add(node.target)
        elif isinstance(node.target, cst.Subscript) and self._is(node.target.value):
            self.other = True  # x[0] = ... writes through the old container shape
            self._seen.add(node.target.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if self._is(node.target):
            self.bindings += 1

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if self._is(node.value) and node.value not in self._seen:
            self._seen.add(node.value)
            if _is_zero_index(node):
                self.indexed.append(node)
            else:
                self.other = True

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.name and node not in self._seen:
            self.other = True


def unwrap_result(code: str, findings: list[Finding]) -> str:
    """Stop taking element [0] of a result that is now the item itself."""
    return run(_Unwrap(findings), code)


def _has_call(node: cst.CSTNode) -> bool:
    class _Finder(cst.CSTVisitor):
        found = False

        def visit_Call(self, call: cst.Call) -> None:
            _Finder.found = True

    node.visit(_Finder())
    return _Finder.found
