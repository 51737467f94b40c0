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
from collections.abc import Callable, Sequence

import libcst as cst
from libcst.metadata import PositionProvider

from driftcheck.findings import Finding
from driftcheck.fixes.base import (
    Decline,
    Located,
    append_arg,
    argument_code,
    hand_over,
    params,
    remove_arg,
    run,
    without,
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
        if _has_call(call.func.value):
            raise Decline("the receiver is computed by a call; it would be evaluated twice")
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


# -- rename attribute ------------------------------------------------------------------------


class _RenameAttribute(Located):
    """Rename the attribute at the finding: the outermost one starting there (a call's
    ``recv.old`` starts where the call does, and so does every attribute of its chain)."""

    def leave_Attribute(
        self, original_node: cst.Attribute, updated_node: cst.Attribute
    ) -> cst.Attribute:
        parent = self.parent(original_node)
        if isinstance(parent, cst.Attribute) and parent.value is original_node:
            return updated_node
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
_PLAIN_REF = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


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
                if not _PLAIN_REF.fullmatch(got):
                    raise Decline(
                        f"{m.group(1)} is passed as an expression, not a plain name; reusing it could change its meaning or run it twice"
                    )
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
                if argument_code(updated_node, kw) is None:
                    raise Decline(f"{kw} is not passed")
                if argument_code(updated_node, p["new"]) is not None:
                    raise Decline(f"{p['new']} is already passed")
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
        self._seen: set[cst.Name] = set()

    def _is(self, node: cst.CSTNode) -> bool:
        return isinstance(node, cst.Name) and node.value == self.name

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        if self._is(node.target):
            self.bindings += 1
            self._seen.add(node.target)  # type: ignore[arg-type]
        elif isinstance(node.target, cst.Subscript) and self._is(node.target.value):
            self.other = True  # x[0] = ... writes through the old container shape
            self._seen.add(node.target.value)  # type: ignore[arg-type]

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if self._is(node.target):
            self.bindings += 1

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if self._is(node.value) and node.value not in self._seen:
            self._seen.add(node.value)  # type: ignore[arg-type]
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


# -- imports ---------------------------------------------------------------------------------


class _MoveImport(Located):
    """Rewrites a from-import where it stands: inside its function or its try/except guard,
    with its comments and its layout. Names that move while others stay are imported on the
    next line; an import of the new module already written nearby takes them instead."""

    def __init__(self, findings: list[Finding]) -> None:
        super().__init__(findings)
        self.after: dict[cst.CSTNode, list[cst.ImportFrom]] = {}
        self.created: list[cst.ImportFrom] = []

    def leave_ImportFrom(
        self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom
    ) -> cst.ImportFrom:
        if isinstance(original_node.names, cst.ImportStar):
            return updated_node
        moves: list[tuple[int, str, str, str | None]] = []
        for i, alias in enumerate(original_node.names):
            finding = self.target_of(alias.name)
            if finding is None:
                continue
            p = params(finding)
            module, _, name = p["new"].rpartition(".")
            old_name = _code(alias.name)
            if old_name != p["old"].rpartition(".")[2]:
                raise Decline("the imported name does not match the finding")
            if not module or not name.isidentifier():
                raise Decline(f"{p['new']!r} is not a name inside a module")
            asname = (
                alias.asname.name.value  # type: ignore[attr-defined]
                if alias.asname
                else (None if name == old_name else old_name)
            )
            moves.append((i, module, name, asname))
        if not moves:
            return updated_node
        modules = list(dict.fromkeys(m for _, m, _, _ in moves))
        if len(moves) == len(original_node.names) and len(modules) == 1:
            names = [_alias_as(updated_node.names[i], name, asname) for i, _, name, asname in moves]  # type: ignore[index]
            new = updated_node.with_changes(
                module=cst.parse_expression(modules[0]), relative=[], names=names
            )
            self.created.append(new)
            return new
        line = self.parent(original_node)
        if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
            raise Decline("the import shares its line with other statements")
        kept = list(updated_node.names)  # type: ignore[arg-type]
        for i, *_ in reversed(moves):
            kept = without(kept, i)
        self.after[line] = [
            cst.ImportFrom(
                module=cst.parse_expression(module),
                names=_one_line(
                    [_new_alias(name, asname) for _, m, name, asname in moves if m == module]
                ),
            )
            for module in modules
        ]
        return updated_node.with_changes(names=kept)

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine | cst.FlattenSentinel[cst.SimpleStatementLine]:
        extra = self.after.pop(original_node, None)
        if not extra:
            return updated_node
        self.created.extend(extra)
        return cst.FlattenSentinel(
            [updated_node, *(cst.SimpleStatementLine(body=[imp]) for imp in extra)]
        )

    def leave_IndentedBlock(
        self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        return updated_node.with_changes(body=self._merged(list(updated_node.body)))

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        return updated_node.with_changes(body=self._merged(list(updated_node.body)))

    def _merged(self, body: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        """Fold a rewritten import into an import of the same module written just before it
        (or right after it), on one line; its blank lines and comments above stay."""
        mine = {id(imp) for imp in self.created}
        i = 0
        while i < len(body):
            stmt = body[i]
            imp = _lone_import(stmt)
            if imp is None or id(imp) not in mine or stmt.trailing_whitespace.comment:  # type: ignore[attr-defined]
                i += 1
                continue
            module = _code(imp.module)  # type: ignore[arg-type]
            target = next(
                (
                    j
                    for j in [*range(i - 1, -1, -1), i + 1]
                    if j < len(body)
                    and (other := _lone_import(body[j])) is not None
                    and id(other) not in mine
                    and not other.relative
                    and other.module is not None
                    and _code(other.module) == module
                    and not other.lpar
                    and not isinstance(other.names, cst.ImportStar)
                ),
                None,
            )
            if target is None:
                i += 1
                continue
            sibling = _lone_import(body[target])
            assert sibling is not None and not isinstance(sibling.names, cst.ImportStar)
            have = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in sibling.names]
            add = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in imp.names]  # type: ignore[union-attr]
            names = have + add
            if [_code(a) for a in have] == sorted(_code(a) for a in have):
                names.sort(key=_code)
            merged = sibling.with_changes(names=_one_line(names))
            body[target] = body[target].with_changes(body=[merged])  # type: ignore[attr-defined]
            self.created.append(merged)
            mine.add(id(merged))
            if i + 1 < len(body):
                nxt = body[i + 1]
                body[i + 1] = nxt.with_changes(
                    leading_lines=[*stmt.leading_lines, *nxt.leading_lines]
                )
            del body[i]
        return body


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def _lone_import(stmt: cst.CSTNode) -> cst.ImportFrom | None:
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        only = stmt.body[0]
        return only if isinstance(only, cst.ImportFrom) else None
    return None


def _alias_as(alias: cst.ImportAlias, name: str, asname: str | None) -> cst.ImportAlias:
    if alias.asname is not None or asname is None:
        return alias.with_changes(name=cst.Name(name))
    return alias.with_changes(name=cst.Name(name), asname=cst.AsName(name=cst.Name(asname)))


def _new_alias(name: str, asname: str | None) -> cst.ImportAlias:
    return cst.ImportAlias(
        name=cst.Name(name), asname=cst.AsName(name=cst.Name(asname)) if asname else None
    )


def _one_line(aliases: list[cst.ImportAlias]) -> list[cst.ImportAlias]:
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    return [
        a.with_changes(comma=comma if k < len(aliases) - 1 else cst.MaybeSentinel.DEFAULT)
        for k, a in enumerate(aliases)
    ]


def rename_import(code: str, findings: list[Finding]) -> str:
    """Import moved names from their new module, rewriting the import where it is written."""
    transformer = _MoveImport(findings)
    module = cst.MetadataWrapper(cst.parse_module(code)).visit(transformer)
    if not transformer.done:
        raise Decline("the finding does not point at a from-import")
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
        if any(
            p.name.value == "_kwargs" for p in (*ps.posonly_params, *ps.params, *ps.kwonly_params)
        ):
            raise Decline("a parameter is already named _kwargs")
        new = cst.Param(name=cst.Name("_kwargs"), star="**")
        # Everything written before "**": positional-only parameters, "/", parameters, "*args"
        # or "*", keyword-only parameters. The new one goes after the last of them.
        written: list[tuple[str, int | None, cst.CSTNode]] = []
        for group in ("posonly_params", "posonly_ind", "params", "star_arg", "kwonly_params"):
            value = getattr(ps, group)
            if isinstance(value, Sequence):
                written += [(group, i, item) for i, item in enumerate(value)]
            elif isinstance(value, cst.Param | cst.ParamSlash | cst.ParamStar):
                written.append((group, None, value))
        if written:
            group, idx, last = written[-1]
            prev = written[-2][2] if len(written) > 1 else None
            last, new = hand_over(prev, last, new, original_node.whitespace_before_params)
            if idx is None:
                ps = ps.with_changes(**{group: last})
            else:
                items = list(getattr(ps, group))
                items[idx] = last
                ps = ps.with_changes(**{group: items})
        return updated_node.with_changes(params=ps.with_changes(star_kwarg=new))


def accept_kwargs(code: str, findings: list[Finding]) -> str:
    """Let a stand-in function accept the extra keyword arguments the host may pass."""
    return run(_AcceptKwargs(findings), code)


def _has_call(node: cst.CSTNode) -> bool:
    class _Finder(cst.CSTVisitor):
        found = False

        def visit_Call(self, call: cst.Call) -> None:
            _Finder.found = True

    node.visit(_Finder())
    return _Finder.found


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
