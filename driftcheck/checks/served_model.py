"""What the client reaches for on the served model that the class the model's config selects does
not have (``scan --model``; see :mod:`driftcheck.host.served_model`).

This is no drift between two releases: the client was written for one model (often the Llama
family) and is run on another, and the host builds a different class for it. Two shapes:

* ``model.model`` where the served class neither defines nor assigns ``model``. With an external
  base (``torch.nn.Module`` serves registered submodules through ``__getattr__``) absence is
  only decided when a submodule of the class has the attribute: the class is a wrapper, and the
  finding names the path that works (``model.language_model.model``); with one such submodule
  its fix is an unsafe ``rename-attribute`` to that path.
* ``supports_x(model)``, a host predicate whose body is ``return isinstance(model, P)``, on the
  served class: False when ``P`` is not on the class's MRO and, for a runtime-checkable
  ``Protocol``, when the class lacks a member of it. An error when the client raises or returns
  on False.
"""

from __future__ import annotations

import ast
from typing import cast

import griffe

from driftcheck.checks.context import CheckContext, finding
from driftcheck.checks.declaration import Check, CheckId
from driftcheck.client.guards import same_expression
from driftcheck.client.use import Use
from driftcheck.findings import Finding, Fix
from driftcheck.host.api import Found, HostAPI
from driftcheck.host.served_model import ServedModel, has_attribute
from driftcheck.kinds import FixSafety, Kind, Severity, Witness

SERVED_MODEL = CheckId(
    Kind.SERVED_MODEL.value,
    Kind.SERVED_MODEL,
    Severity.ERROR,
    Witness.WORKLOAD,
    fixes=(FixSafety.UNSAFE, FixSafety.MANUAL),
    codemods=("rename-attribute",),
)
#: What this check reports; :mod:`driftcheck.checks.catalog` lists it.
CHECK = Check(__name__, (SERVED_MODEL,))

PROTOCOL_BASES = ("typing.Protocol", "typing_extensions.Protocol")


def check(use: Use, ctx: CheckContext) -> list[Finding]:
    """Report uses of the served model that its class cannot serve on the target."""
    served = ctx.served
    if served is None or served.top is None:
        return []
    if use.kind in ("attribute", "call") and use.receiver and use.member:
        if use.receiver in served.classes:
            return _member(use, ctx, served)
    if use.kind == "call" and use.arg_classes:
        return _predicate(use, ctx, served)
    return []


def _member(use: Use, ctx: CheckContext, served: ServedModel) -> list[Finding]:
    api, member = ctx.target, use.member or ""
    cls = api.resolve(use.receiver or "")
    if not isinstance(cls, Found) or has_attribute(api, cls, member):
        return []
    if _guarded_off(use, api, cls):
        return []
    if ctx.baseline is not None:
        base = ctx.baseline.resolve(use.receiver or "")
        if isinstance(base, Found) and ctx.baseline.defined_in_host_mro(base, member):
            return []  # gone since the baseline: attribute-missing reports it
    holders = [
        name
        for key, held in sorted(served.attributes.items())
        if key.rsplit(".", 1)[0] == cls.path
        and (name := key.rsplit(".", 1)[1])
        and _has(api, held, member)
    ]
    if not holders and not api.mro(cls)[1]:
        return []  # an external base may serve it: undecided
    if not ctx.once(use.file, f"served:{use.receiver}.{member}@{use.line}"):
        return []
    short = cls.path.rsplit(".", 1)[-1]
    expr = use.receiver_expr or "model"
    told = served.describe(cls.path)
    if holders:
        paths = " or ".join(f"{expr}.{h}.{member}" for h in holders)
        text = (
            f"{expr}.{member}: {told} has no attribute {member!r} in {api.name} {api.version}; "
            f"it wraps the model that has it: {paths}"
        )
        fix = _through(expr, member, holders)
    else:
        text = f"{expr}.{member}: {told} has no attribute {member!r} in {api.name} {api.version}"
        fix = Fix(FixSafety.MANUAL, f"{short} has no {member}: adapt the code to this model")
    held = [served.attributes.get(f"{cls.path}.{h}") for h in holders]
    evidence = [ctx.evidence(api, cls, note=f"the served class, without {member}")]
    evidence += [ctx.evidence(api, _resolve(api, h), note=f"has {member}") for h in held if h]
    return [
        finding(
            use,
            SERVED_MODEL,
            symbol=f"{use.receiver}.{member}",
            message=text,
            evidence=evidence,
            fix=fix,
        )
    ]


def _through(expr: str, member: str, holders: list[str]) -> Fix:
    """Read ``member`` off the one submodule that has it: an unsafe rename of the client's
    attribute to the path (the host's classes show the path exists; that the wrapped model
    serves the client as the one it expected is for its workload to confirm). Two holders
    leave the choice to a person."""
    if len(holders) != 1:
        paths = " or ".join(f"{expr}.{h}.{member}" for h in holders)
        return Fix(FixSafety.MANUAL, f"read {paths} (the served class is a wrapper)")
    path = f"{holders[0]}.{member}"
    return Fix(
        FixSafety.UNSAFE,
        f"read {expr}.{path} (the served class is a wrapper; its {holders[0]} has {member})",
        "rename-attribute",
        (("new", path), ("old", member)),
    )


def _guarded_off(use: Use, api: HostAPI, cls: Found) -> bool:
    """The use does not run on this class: a ``hasattr`` test on its receiver lets it run only
    where the member exists, or where the class has (or lacks) another attribute it lacks (or
    has)."""
    for expr, name, holds in use.guards:
        if not same_expression(expr, use.receiver_expr or ""):
            continue
        if name == use.member and holds:
            return True
        if name != use.member and has_attribute(api, cls, name) != holds:
            return True
    return False


def _has(api: HostAPI, path: str, name: str) -> bool:
    cls = _resolve(api, path)
    return isinstance(cls, Found) and has_attribute(api, cls, name)


def _resolve(api: HostAPI, path: str) -> Found | None:
    got = api.resolve(path)
    return got if isinstance(got, Found) else None


def _predicate(use: Use, ctx: CheckContext, served: ServedModel) -> list[Finding]:
    if not any(c in served.classes for c in use.arg_classes or ()):
        return []  # no argument is the served model: nothing to decide (and no module parsed)
    api = ctx.target
    func = _resolve(api, use.symbol)
    if func is None or not isinstance(func.obj, griffe.Function):
        return []
    tested = _isinstance_of(api, func)
    if tested is None:
        return []
    index, proto = tested
    classes = use.arg_classes or ()
    arg = classes[index] if index < len(classes) else ""
    if arg not in served.classes:
        return []
    cls = _resolve(api, arg)
    if cls is None:
        return []
    chain, _ = api.mro(cls)
    if any(k.path == proto.path for k in chain):
        return []
    lacking: list[str] = []
    if _is_protocol(api, proto):
        members = _protocol_members(api, proto)
        lacking = [m for m in members if not has_attribute(api, cls, m)]
        if not lacking:
            return []  # structurally it is one
    if not ctx.once(use.file, f"served-predicate:{use.symbol}@{use.line}"):
        return []
    fname, pname = use.symbol.rsplit(".", 1)[-1], proto.path.rsplit(".", 1)[-1]
    why = f" (it lacks {', '.join(lacking)})" if lacking else ""
    then = f": the client then runs `{use.on_false}`" if use.on_false else ""
    text = (
        f"{fname}(...) is False for {served.describe(arg)}: it does not implement {pname} in "
        f"{api.name} {api.version}{why}{then}"
    )
    return [
        finding(
            use,
            SERVED_MODEL,
            symbol=use.symbol,
            message=text,
            severity=Severity.ERROR if use.on_false else Severity.WARNING,
            evidence=[
                ctx.evidence(api, func, note=f"return isinstance(..., {pname})"),
                ctx.evidence(api, cls, note=f"the served class, not a {pname}"),
            ],
            fix=Fix(FixSafety.MANUAL, _predicate_fix(use, ctx, served, cls, proto, lacking)),
        )
    ]


def _predicate_fix(
    use: Use,
    ctx: CheckContext,
    served: ServedModel,
    cls: Found,
    proto: Found,
    lacking: list[str],
) -> str:
    """The exact change: test a wrapped model that is one, or drop a test that only guards."""
    api, pname = ctx.target, proto.path.rsplit(".", 1)[-1]
    short = cls.path.rsplit(".", 1)[-1]
    for key, held in sorted(served.attributes.items()):
        owner, _, name = key.rpartition(".")
        sub = _resolve(api, held) if owner == cls.path else None
        if sub is not None and any(k.path == proto.path for k in api.mro(sub)[0]):
            return (
                f"test the wrapped model instead: {name} ({held.rsplit('.', 1)[-1]}) is a {pname}"
            )
    used = sorted(
        {
            u.member
            for u in ctx.uses
            if u.member in lacking and u.receiver in served.classes and u.member
        }
    )
    if used:
        return (
            f"{short} is not a {pname} and wraps none; the client uses {', '.join(used)} of it: "
            "this model needs host support for that"
        )
    return (
        f"{short} is not a {pname} and wraps none, but the client reaches none of {pname}'s "
        f"members on it: the test only guards; skip it for this model (or drop it)"
    )


def _isinstance_of(api: HostAPI, func: Found) -> tuple[int, Found] | None:
    """(parameter index, class) when the function's body is ``return isinstance(p, C)`` (kept
    in the release's snapshot)."""
    got = api.fact(f"isinstance-of:{func.path}", lambda: _read_isinstance(api, func))
    if not got:
        return None
    klass = api.resolve(str(got[1]))
    return (int(got[0]), klass) if isinstance(klass, Found) else None


def _read_isinstance(api: HostAPI, func: Found) -> list | None:
    node = api.def_node(func)
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return None
    body = [s for s in node.body if not _is_docstring(s)]
    if len(body) != 1 or not isinstance(body[0], ast.Return):
        return None
    call = body[0].value
    if not (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Name)
        and call.func.id == "isinstance"
        and len(call.args) == 2
        and isinstance(call.args[0], ast.Name)
    ):
        return None
    params = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
    if call.args[0].id not in params:
        return None
    klass = api.resolve(f"{func.obj.module.path}.{ast.unparse(call.args[1])}")
    if not isinstance(klass, Found) or not isinstance(klass.obj, griffe.Class):
        return None
    return [params.index(call.args[0].id), klass.path]


def _is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


def _is_protocol(api: HostAPI, cls: Found) -> bool:
    """A ``Protocol``: it, or a class on its host MRO, lists ``Protocol`` among its bases."""
    return any(_lists_protocol(k) for k in api.mro(cls)[0])


def _lists_protocol(cls: Found) -> bool:
    return any(
        str(getattr(b, "canonical_path", b)) in PROTOCOL_BASES
        for b in cast(griffe.Class, cls.obj).bases
    )


def _protocol_members(api: HostAPI, proto: Found) -> list[str]:
    """What ``isinstance`` checks on a runtime protocol: the non-dunder members of the protocol
    classes on its MRO."""
    out: list[str] = []
    for klass in api.mro(proto)[0]:
        if not _lists_protocol(klass):
            continue
        for name in klass.obj.members:
            if not name.startswith("_") and name not in out:
                out.append(name)
    return out
