"""Attributes and methods read off a typed host receiver that the target class no longer has.

A method the target class has under another name, with the baseline's parameters and body
(``get_input_embeddings`` -> ``embed_input_ids`` on vLLM's decoder stacks), is a rename the host's
own code shows: the finding's fix is a safe ``rename-attribute`` to the new name.
"""

from __future__ import annotations

import ast

import griffe

from driftcheck.checks.context import CheckContext, finding
from driftcheck.checks.declaration import Check, CheckId
from driftcheck.checks.history import quoted, warned_before
from driftcheck.client.guards import same_expression
from driftcheck.client.use import Use
from driftcheck.findings import Finding, Fix
from driftcheck.host.api import Found, HostAPI
from driftcheck.kinds import FixSafety, Kind, Severity, Witness

ATTRIBUTE_MISSING = CheckId(
    Kind.ATTRIBUTE_MISSING.value,
    Kind.ATTRIBUTE_MISSING,
    Severity.ERROR,
    Witness.MEMBER,
    fixes=(FixSafety.SAFE, FixSafety.MANUAL),
    codemods=("rename-attribute",),
)
#: What this check reports; :mod:`driftcheck.checks.catalog` lists it.
CHECK = Check(__name__, (ATTRIBUTE_MISSING,))


def check(use: Use, ctx: CheckContext) -> list[Finding]:
    """Report ``recv.member`` where ``member`` existed on the receiver's class at baseline only."""
    if not (use.receiver and use.member) or use.kind not in ("attribute", "call"):
        return []
    if ctx.lookup(ctx.target, use) is not None:
        return []
    if any(
        name == use.member and holds and same_expression(expr, use.receiver_expr or "")
        for expr, name, holds in use.guards
    ):
        return []  # ``if hasattr(x, "m"): x.m`` runs only where the member is there
    base = ctx.lookup(ctx.baseline, use) if ctx.baseline else None
    if ctx.baseline is not None and not isinstance(base, Found):
        return []
    if not ctx.once(use.file, f"{use.receiver}.{use.member}@{use.line}"):
        return []
    evidence = [ctx.evidence(ctx.baseline, base)] if ctx.baseline else []
    cls = ctx.target.resolve(use.receiver)
    if isinstance(cls, Found):
        evidence.append(ctx.evidence(ctx.target, cls, note=f"class without {use.member}"))
    short = use.receiver.rsplit(".", 1)[-1]
    via = f" ({use.via})" if use.via else ""
    before = warned_before(ctx.baseline, base)
    told = quoted(ctx.baseline.version, before) if ctx.baseline is not None else ""
    return [
        finding(
            use,
            ATTRIBUTE_MISSING,
            symbol=f"{use.receiver}.{use.member}",
            message=(
                f"{use.receiver_expr or short}.{use.member}: {short} has no attribute "
                f"{use.member!r} in {ctx.target.name} {ctx.target.version}{via}{told}"
            ),
            evidence=tuple(e for e in evidence if e),
            fix=_fix(ctx, use, base, cls, short, before),
        )
    ]


def _fix(ctx: CheckContext, use: Use, base: object, cls: object, short: str, before: str) -> Fix:
    new = (
        _renamed(ctx, use, base, cls)
        if isinstance(base, Found) and isinstance(cls, Found)
        else None
    )
    if new is not None:
        return Fix(
            FixSafety.SAFE,
            f"call {new}() instead: {short}.{new} has {use.member}'s parameters and body",
            "rename-attribute",
            (("new", new), ("old", use.member or "")),
        )
    return Fix(
        FixSafety.MANUAL,
        before[:200] or f"{short}.{use.member} was removed or renamed; use its replacement",
    )


def _renamed(ctx: CheckContext, use: Use, base: Found, cls: Found) -> str | None:
    """The one method of the target class, absent from the baseline class, whose parameters
    and body are the baseline method's (None: no such method, or more than one)."""
    old, then = ctx.baseline, ctx.baseline.resolve(use.receiver or "") if ctx.baseline else None
    if old is None or not isinstance(then, Found) or not isinstance(base.obj, griffe.Function):
        return None
    want = _shape(old, base)
    if want is None:
        return None
    api, names = ctx.target, []
    for klass in api.mro(cls)[0]:
        for name, member in klass.obj.members.items():
            if name in names or name.startswith("__") or getattr(member, "is_alias", False):
                continue
            if not isinstance(member, griffe.Function) or old.defined_in_host_mro(then, name):
                continue
            got = api.defined_in_host_mro(cls, name)
            if got is not None and _shape(api, got) == want:
                names.append(name)
    return names[0] if len(names) == 1 else None


def _shape(api: HostAPI, func: Found) -> str | None:
    """A method's parameters and body without its name and docstring, as text."""
    node = api.def_node(func)
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return None
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return ast.dump(node.args) + "".join(ast.dump(stmt) for stmt in body)
