"""Codemods for the arguments a host call or a stand-in function takes.

* ``add-keyword``: pass a keyword with a value the rule supplies (``{arg:NAME}`` stands for the
  code passed as keyword ``NAME`` at that call).
* ``remove-keyword`` / ``rename-keyword``: drop or rename a keyword the host no longer takes.
* ``positional-to-keyword``: pass positional arguments from one on by keyword, with the names
  they bound to at baseline.
* ``accept-kwargs``: add ``**kwargs`` to a function that stands in for a host method.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import libcst as cst

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
)

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
        keywords = [(k, v) for k, v in sorted(p.items()) if k.startswith("keyword")]
        for key, kw in keywords:
            if self.mode == "remove":
                updated_node = remove_arg(updated_node, kw)
            else:
                # ``keyword``/``new``, ``keyword1``/``new1``, ...: one pair per renamed keyword
                new = p.get("new" + key[len("keyword") :], p.get("new", ""))
                if argument_code(updated_node, kw) is None:
                    raise Decline(f"{kw} is not passed")
                if argument_code(updated_node, new) is not None:
                    raise Decline(f"{new} is already passed")
                args = [
                    a.with_changes(keyword=cst.Name(new))
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


# -- positional to keyword -------------------------------------------------------------------


class _ByKeyword(Located):
    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        finding = self.target_of(original_node)
        if finding is None:
            return updated_node
        p = params(finding)
        first, names = int(p["from"]), p["names"].split(",")
        if any(a.star for a in updated_node.args):
            raise Decline("the call spreads *args or **kwargs")
        positional = [a for a in updated_node.args if a.keyword is None]
        if len(positional) != first + len(names):
            raise Decline("the call no longer passes the arguments the finding counted")
        taken = {a.keyword.value for a in updated_node.args if a.keyword is not None}
        if taken & set(names):
            raise Decline(f"{', '.join(sorted(taken & set(names)))} already passed by keyword")
        out, i = [], 0
        for arg in updated_node.args:
            if arg.keyword is None:
                if i >= first:
                    if isinstance(arg.value, cst.GeneratorExp) and not arg.value.lpar:
                        arg = arg.with_changes(  # ``f(x for x in y)`` -> ``f(k=(x for x in y))``
                            value=arg.value.with_changes(
                                lpar=[cst.LeftParen()], rpar=[cst.RightParen()]
                            )
                        )
                    arg = arg.with_changes(
                        keyword=cst.Name(names[i - first]),
                        equal=cst.AssignEqual(
                            whitespace_before=cst.SimpleWhitespace(""),
                            whitespace_after=cst.SimpleWhitespace(""),
                        ),
                    )
                i += 1
            out.append(arg)
        return updated_node.with_changes(args=out)


def positional_to_keyword(code: str, findings: list[Finding]) -> str:
    """Pass the positional arguments a host now binds differently by keyword."""
    return run(_ByKeyword(findings), code)


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
