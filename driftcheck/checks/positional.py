"""Positional shifts: a call's positional arguments land on other parameters than at baseline.

Both sides are bound: the client's positional arguments against the baseline's signature and
the target's. A parameter inserted, removed or reordered before them, or made keyword-only,
hands their values to other parameters (often silently) or raises. An argument now bound to a
parameter of another annotation, one the host validates (a ``raise`` on its value), a
keyword-only one or none at all is an error; a silent rebinding between parameters annotated
alike is a warning that says so. A decorator that still takes keyword-only parameters by
position with a warning (scikit-learn's ``_deprecate_positional_args``) counts as taking them.
Renames that do not matter are not reported: a positional-only parameter renamed, a parameter
renamed in place, a parameter appended with a default, a positional ``None`` that both
parameters of its slot (and the old one, where it stays) take as their default, a call whose
signatures are both stubs of compiled code that the host's own code makes unchanged on both
releases (the stubs' order does not say how the compiled code binds). The fix passes the affected arguments
by keyword with the baseline's names, when the target still has every one of them.
"""

from __future__ import annotations

import ast
from dataclasses import replace
from typing import cast

from driftcheck.checks.context import CheckContext, finding, runs, side
from driftcheck.checks.declaration import Check, CheckId
from driftcheck.client.use import Use
from driftcheck.findings import Evidence, Finding, Fix
from driftcheck.host.api import Found, HostAPI
from driftcheck.host.callers import keyword_calls
from driftcheck.host.declared import positional_decorated
from driftcheck.host.param_notes import validated
from driftcheck.host.positions import Rebinding, rebindings
from driftcheck.host.signature import CallShape, Signature, bind
from driftcheck.kinds import FixSafety, Kind, Severity, Witness

POSITIONAL_SHIFT = CheckId(
    "positional-shift",
    Kind.CALL_SIGNATURE,
    Severity.ERROR,
    Witness.POSITIONS,
    fixes=(FixSafety.SAFE, FixSafety.UNSAFE, FixSafety.MANUAL),
    codemods=("positional-to-keyword",),
)
#: What this check reports; :mod:`driftcheck.checks.catalog` lists it.
CHECK = Check(__name__, (POSITIONAL_SHIFT,))


def widened(api: HostAPI, found: Found, sig: Signature) -> tuple[Signature, bool]:
    """``sig`` as a caller meets it: with keyword-only parameters positional again where a
    decorator still takes them so."""
    body = runs(api, found)
    if body is None or not positional_decorated(api, body):
        return sig, False
    params = [
        replace(p, kind="positional_or_keyword") if p.kind == "keyword_only" else p
        for p in sig.params
    ]
    return replace(sig, params=params), True


def rebound(
    use: Use, ctx: CheckContext
) -> tuple[list[Rebinding], Found | None, Signature | None, Signature | None]:
    """The rebindings of a call, with the target object and both signatures as the caller sees
    them (empty without a baseline, or when the call spreads ``*args``)."""
    if use.kind != "call" or use.shape is None or use.shape.star or ctx.baseline is None:
        return [], None, None, None
    if ctx.replaced_by_client(use):
        return [], None, None, None  # the client's own function takes the call
    target = ctx.lookup(ctx.target, use)
    base = ctx.lookup(ctx.baseline, use)
    if not (isinstance(target, Found) and isinstance(base, Found)):
        return [], None, None, None
    sig_t, sig_b = ctx.target.signature(target), ctx.baseline.signature(base)
    if sig_t is None or sig_b is None:
        return [], None, None, None
    sig_b, _ = widened(ctx.baseline, base, sig_b)
    sig_t, _ = widened(ctx.target, target, sig_t)
    positional = use.shape.on(side(ctx.baseline)).positional
    return rebindings(sig_b, sig_t, positional), target, sig_b, sig_t


def check(use: Use, ctx: CheckContext) -> list[Finding]:
    """Report positional arguments that bind to other parameters on the target."""
    moved, target, sig_b, sig_t = rebound(use, ctx)
    # An argument with no slot left because its parameter is gone is ``call-signature``'s
    # "too many positional arguments": one finding per cause.
    moved = [r for r in moved if r.how != "gone"]
    if not moved or target is None or sig_b is None or sig_t is None:
        return []
    shape = cast(CallShape, use.shape).on(side(ctx.target))  # rebound only binds calls
    moved = [r for r in moved if not _default_both_ways(r, shape, sig_t)]
    if not moved:
        return []
    name = use.member or use.symbol.rsplit(".", 1)[-1]
    if _stub_contradicted(ctx, name, shape, sig_b, sig_t):
        return []
    explains = any(r.how in ("keyword-only", "var-positional") for r in moved)
    if not explains and any(p.code == "too-many-positional" for p in bind(sig_t, shape)):
        return []  # the call fails outright: ``call-signature`` says so, where it lands is moot
    body = runs(ctx.target, target)
    checked = set(validated(ctx.target, body)) if body is not None else set()
    errors = [r for r in moved if _fails(r, checked)]
    parts = [_said(r, ctx, checked) for r in moved]
    severity = Severity.ERROR if errors else Severity.WARNING
    silent = "" if errors else " (silently: the parameters are annotated alike or not at all)"
    first = moved[0].index
    at = shape.positional_spans[first] if first < len(shape.positional_spans) else None
    return [
        finding(
            use,
            POSITIONAL_SHIFT,
            symbol=target.path,
            message=(
                f"{name}(...) binds its positional arguments differently in "
                f"{ctx.target.name} {ctx.target.version}{silent}: " + "; ".join(parts)
            ),
            evidence=(
                Evidence(ctx.base.version, sig_b.file, sig_b.line),
                Evidence(ctx.target.version, sig_t.file, sig_t.line),
            ),
            fix=_fix(moved, shape, sig_b, sig_t),
            severity=severity,
            at=at,
        )
    ]


def _default_both_ways(r: Rebinding, shape: CallShape, sig_t: Signature) -> bool:
    """A positional ``None`` that is the default of the parameter it filled at baseline, of
    the one it fills now, and of the old one where the target still has it: the call is the
    call without it on both releases, so nothing changes."""
    literals = shape.positional_literals
    if r.how != "shift" or r.after is None or r.index >= len(literals):
        return False
    if literals[r.index] != "None":
        return False
    old_now = sig_t.param(r.before.name)
    return (
        r.before.default == "None"
        and r.after.default == "None"
        and (old_now is None or old_now.default == "None" or old_now.kind == "var_keyword")
    )


def _stub_contradicted(
    ctx: CheckContext, name: str, shape: CallShape, sig_b: Signature, sig_t: Signature
) -> bool:
    """Both signatures come from stubs (``.pyi``: the code is compiled, its binding is not
    read), and the host's own code makes the client's call, unchanged, on both releases: the
    same literal positionals (``Timestamp(2015, 11, 12)``), of the client's kinds, no keywords.
    The host would not keep a call whose arguments its new order rebinds: the stubs'
    reordering does not describe how the compiled code binds them."""
    if not (sig_b.file.endswith(".pyi") and sig_t.file.endswith(".pyi")) or shape.keywords:
        return False
    kinds = [_kind(v) for v in shape.positional_literals]
    if len(kinds) != shape.positional or None in kinds:
        return False
    assert ctx.baseline is not None  # rebound only compares two releases
    alike = [_alike_calls(api, name, kinds) for api in (ctx.baseline, ctx.target)]
    return bool(alike[0] & alike[1])


def _alike_calls(api: HostAPI, name: str, kinds: list[type | None]) -> set[tuple[str, ...]]:
    """The positional sources of the host's own calls of ``name`` made of literals of
    ``kinds`` alone."""
    return {
        c.positional
        for c in keyword_calls(api, name)
        if not c.keywords
        and not c.open
        and len(c.positional) == len(kinds)
        and [_kind(p) for p in c.positional] == kinds
    }


def _kind(text: str | None) -> type | None:
    """The type of a literal's source text (None: not a literal)."""
    if text is None:
        return None
    try:
        return type(ast.literal_eval(text))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _fails(r: Rebinding, checked: set[str]) -> bool:
    if r.how != "shift" or r.after is None:
        return True
    if r.after.kind not in ("positional_only", "positional_or_keyword"):
        return True
    return r.same_type is False or r.after.name in checked


def _said(r: Rebinding, ctx: CheckContext, checked: set[str]) -> str:
    old, new = ctx.base.version, ctx.target.version
    head = f"argument {r.index + 1} bound to {r.before.name} in {old}"
    if r.how == "keyword-only":
        return f"{head}; {r.before.name} is keyword-only in {new} (TypeError)"
    if r.how == "var-positional":
        return f"{head}; it goes into *args in {new}"
    if r.how == "gone" or r.after is None:
        return f"{head}; {new} has no positional parameter left for it"
    why = ""
    if r.same_type is False:
        why = f" ({r.before.annotation} -> {r.after.annotation})"
    elif r.after.name in checked:
        why = f" (which {new} checks, raising on a value it rejects)"
    return f"{head}, binds to {r.after.name} in {new}{why}"


def _fix(moved: list[Rebinding], shape: CallShape, sig_b: Signature, sig_t: Signature) -> Fix:
    first, positional = moved[0].index, shape.positional
    old_slots = [p for p in sig_b.params if p.kind in ("positional_only", "positional_or_keyword")]
    names = [old_slots[i].name for i in range(first, min(positional, len(old_slots)))]
    ok = len(names) == positional - first and all(
        (q := sig_t.param(n)) is not None and q.kind in ("positional_or_keyword", "keyword_only")
        for n in names
    )
    after = CallShape(positional=first, keywords=(*shape.keywords, *names))
    still = [p.detail for p in bind(sig_t, after)] if ok else []
    # A name the baseline takes by position only: ``text=`` there lands in its ``**styles``
    # (or fails), so the keyword call is not what the client ran before.
    only = [n for n in names if (p := sig_b.param(n)) is not None and p.kind == "positional_only"]
    keywords = ", ".join(f"{n}=" for n in names)
    params = (("from", str(first)), ("names", ",".join(names)))
    if ok and not still and only:
        where = next((p.name for p in sig_b.params if p.kind == "var_keyword"), "")
        return Fix(
            FixSafety.UNSAFE,
            f"pass them by keyword: {keywords} (not the same call on the baseline, where "
            f"{only[0]} is positional-only and {only[0]}= "
            + (f"lands in **{where})" if where else "is a TypeError)"),
            codemod="positional-to-keyword",
            params=params,
        )
    if ok and not still:
        return Fix(
            FixSafety.SAFE,
            f"pass them by keyword with the names they had: {keywords}",
            codemod="positional-to-keyword",
            params=params,
        )
    order = ", ".join(p.name for p in sig_t.params)
    return Fix(
        FixSafety.MANUAL,
        f"the parameters are now ({order}): pass each argument to the one it meant",
    )
