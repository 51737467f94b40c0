"""One codemod per fix kind, each driven by the finding and the rule's fix parameters.

* ``follow-up-call``: ``x = recv.m(a)`` → ``recv.m(a)`` then ``x = recv.s(None)`` (also a bare
  call, a ``return`` and an ``if`` test).
* ``rename-import``: move an imported name to the module that now holds it.
* ``rename-attribute``: ``recv.old(...)`` → ``recv.new(...)``.
* ``add-keyword``: pass a keyword with a value the rule supplies (``{arg:NAME}`` stands for the
  code passed as keyword ``NAME`` at that call).
* ``remove-keyword`` / ``rename-keyword``: drop or rename a keyword the host no longer takes.
* ``unwrap-result``: ``r = f(...)[0]`` → ``r = f(...)``, also through one variable.
* ``accept-kwargs``: add ``**kwargs`` to a function that stands in for a host method.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import PositionProvider

from driftcheck.findings import Finding
from driftcheck.fixes.base import (
    Decline,
    Located,
    append_arg,
    argument_code,
    params,
    remove_arg,
    run,
)

Codemod = Callable[[str, list[Finding]], str]


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
        args = cst.parse_expression(f"f({p.get('args', '')})").args  # type: ignore[attr-defined]
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
            body=[cst.Expr(call)], leading_lines=updated_node.leading_lines
        )
        rest = updated_node.with_changes(body=[small.with_changes(value=follow)], leading_lines=[])
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


# -- rename attribute ------------------------------------------------------------------------


class _RenameAttribute(Located):
    """Rename the attribute at the finding (a call's ``recv.old`` starts where the call does)."""

    def leave_Attribute(
        self, original_node: cst.Attribute, updated_node: cst.Attribute
    ) -> cst.Attribute:
        pos = self.get_metadata(PositionProvider, original_node).start
        finding = self.targets.get((pos.line, pos.column))
        if finding is None or updated_node.attr.value != params(finding)["old"]:
            return updated_node
        self.done.add((pos.line, pos.column))
        return updated_node.with_changes(attr=cst.Name(params(finding)["new"]))


def rename_attribute(code: str, findings: list[Finding]) -> str:
    """Rename a method or attribute read off a host receiver."""
    return run(_RenameAttribute(findings), code)


# -- keywords --------------------------------------------------------------------------------

_ARG_REF = re.compile(r"\{arg:(\w+)\}")


class _Keywords(Located):
    def __init__(self, findings: list[Finding], mode: str) -> None:
        super().__init__(findings)
        self.mode = mode

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        finding = self.target_of(original_node)
        if finding is None:
            return updated_node
        p = params(finding)
        if self.mode == "add":
            if argument_code(updated_node, p["keyword"]) is not None:
                raise Decline(f"{p['keyword']} is already passed")
            if any(a.star == "**" for a in updated_node.args):
                raise Decline("the call passes **kwargs; the keyword may already be in them")

            def arg_value(m: re.Match[str]) -> str:
                got = argument_code(updated_node, m.group(1))
                if got is None:
                    raise Decline(f"the call does not pass {m.group(1)} by keyword")
                return got

            value = _ARG_REF.sub(arg_value, p["value"])
            arg = cst.Arg(
                keyword=cst.Name(p["keyword"]),
                value=cst.parse_expression(value),
                equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(""),
                    whitespace_after=cst.SimpleWhitespace(""),
                ),
            )
            return append_arg(updated_node, arg)
        keywords = [v for k, v in sorted(p.items()) if k.startswith("keyword")]
        for kw in keywords:
            if self.mode == "remove":
                updated_node = remove_arg(updated_node, kw)
            else:
                args = [
                    a.with_changes(keyword=cst.Name(p["new"]))
                    if a.keyword and a.keyword.value == kw
                    else a
                    for a in updated_node.args
                ]
                updated_node = updated_node.with_changes(args=args)
        return updated_node


def add_keyword(code: str, findings: list[Finding]) -> str:
    """Pass a keyword (with the rule's value) to each finding's call."""
    return run(_Keywords(findings, "add"), code)


def remove_keyword(code: str, findings: list[Finding]) -> str:
    """Drop keywords the host no longer accepts."""
    return run(_Keywords(findings, "remove"), code)


def rename_keyword(code: str, findings: list[Finding]) -> str:
    """Rename a keyword the host renamed."""
    return run(_Keywords(findings, "rename"), code)


# -- unwrap result ---------------------------------------------------------------------------


class _Unwrap(Located):
    """``f(...)[0]`` → ``f(...)``; with ``x = f(...)``, each ``x[0]`` in the function → ``x``."""

    def __init__(self, findings: list[Finding]) -> None:
        super().__init__(findings)
        self.names: set[str] = set()

    def visit_Assign(self, node: cst.Assign) -> None:
        if isinstance(node.value, cst.Call) and self.target_of(node.value) is not None:
            if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
                self.names.add(node.targets[0].target.value)
            else:
                raise Decline("the result is unpacked; unwrap it by hand")

    def leave_Subscript(
        self, original_node: cst.Subscript, updated_node: cst.Subscript
    ) -> cst.BaseExpression:
        value = original_node.value
        direct = isinstance(value, cst.Call) and self.target_of(value) is not None
        through = isinstance(value, cst.Name) and value.value in self.names
        if not (direct or through):
            return updated_node
        sl = updated_node.slice
        if len(sl) == 1 and isinstance(sl[0].slice, cst.Index):
            idx = sl[0].slice.value
            if isinstance(idx, cst.Integer) and idx.value == "0":
                return updated_node.value
        raise Decline("the result is indexed with something other than [0]")


def unwrap_result(code: str, findings: list[Finding]) -> str:
    """Stop taking element [0] of a result that is now the item itself."""
    return run(_Unwrap(findings), code)


# -- imports ---------------------------------------------------------------------------------


class _MoveImport(Located):
    def __init__(self, findings: list[Finding], context: CodemodContext) -> None:
        super().__init__(findings)
        self.context = context

    def leave_ImportFrom(
        self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom
    ) -> cst.ImportFrom | cst.RemovalSentinel:
        if isinstance(original_node.names, cst.ImportStar):
            return updated_node
        keep: list[cst.ImportAlias] = []
        moved = False
        for alias in original_node.names:
            finding = self.target_of(alias.name)
            if finding is None:
                keep.append(alias)
                continue
            p = params(finding)
            module, _, name = p["new"].rpartition(".")
            old_name = cst.Module(body=[]).code_for_node(alias.name)
            if old_name != p["old"].rpartition(".")[2]:
                raise Decline("the imported name does not match the finding")
            asname = (
                alias.asname.name.value
                if alias.asname
                else (None if name == old_name else old_name)
            )
            AddImportsVisitor.add_needed_import(self.context, module, name, asname)
            moved = True
        if not moved:
            return updated_node
        if not keep:
            return cst.RemoveFromParent()
        keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated_node.with_changes(names=keep)


def rename_import(code: str, findings: list[Finding]) -> str:
    """Import moved names from their new module (libcst's AddImportsVisitor adds the import)."""
    context = CodemodContext()
    transformer = _MoveImport(findings, context)
    wrapper = cst.MetadataWrapper(cst.parse_module(code))
    module = wrapper.visit(transformer)
    if not transformer.done:
        raise Decline("the finding does not point at a from-import")
    module = AddImportsVisitor(context).transform_module(module)
    return module.code


# -- accept **kwargs -------------------------------------------------------------------------


class _AcceptKwargs(Located):
    def leave_FunctionDef(
        self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef
    ) -> cst.FunctionDef:
        if self.target_of(original_node.name) is None:
            return updated_node
        ps = updated_node.params
        if ps.star_kwarg is not None:
            raise Decline("the function already takes **kwargs")
        new = cst.Param(name=cst.Name("_kwargs"), star="**")
        # The whitespace before ")" belongs to the last parameter: hand it to the new one.
        if isinstance(ps.star_arg, cst.Param) and not ps.kwonly_params:
            group, items = "star_arg", [ps.star_arg]
        else:
            group = next(
                (g for g in ("kwonly_params", "params", "posonly_params") if getattr(ps, g)), ""
            )
            items = list(getattr(ps, group)) if group else []
        if items:
            last = items[-1]
            had_comma = not isinstance(last.comma, cst.MaybeSentinel)
            new = new.with_changes(
                whitespace_after_param=last.whitespace_after_param,
                comma=last.comma if had_comma else cst.MaybeSentinel.DEFAULT,
            )
            if had_comma:
                # Trailing-comma style: the new parameter goes on its own line like the others.
                sep = items[-2].comma if len(items) > 1 else last.comma
                items[-1] = last.with_changes(comma=sep)
            else:
                items[-1] = last.with_changes(
                    comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
                    whitespace_after_param=cst.SimpleWhitespace(""),
                )
            ps = ps.with_changes(**{group: items[0] if group == "star_arg" else items})
        return updated_node.with_changes(params=ps.with_changes(star_kwarg=new))


def accept_kwargs(code: str, findings: list[Finding]) -> str:
    """Let a stand-in function accept the extra keyword arguments the host may pass."""
    return run(_AcceptKwargs(findings), code)


CODEMODS: dict[str, Codemod] = {
    "follow-up-call": follow_up_call,
    "rename-import": rename_import,
    "rename-attribute": rename_attribute,
    "add-keyword": add_keyword,
    "remove-keyword": remove_keyword,
    "rename-keyword": rename_keyword,
    "unwrap-result": unwrap_result,
    "accept-kwargs": accept_kwargs,
}
