"""Response fields the client reads that the target no longer sends.

``http-response-field``: a field the client reads from a route's response (``r.json()["k"]``,
an attribute of an OpenAI SDK result, ``getattr(res, "k", None)`` where the client raises when it
is missing) that a body the baseline's route sends has, and no body the target's sends has, or
the target's route sends no body at all; or a test that the body is empty (``not r.content``,
``r.status_code == 204``) where the baseline's route sent none and the target's sends one. A
read with a default the client copes with is not
reported; neither is one an ``isinstance`` test rules out for the call's result. Without a
baseline, the target alone: a field no body the target's route sends has.
"""

from __future__ import annotations

from typing import cast

from driftcheck.checks.context import CheckContext, finding
from driftcheck.checks.http import HTTP_RESPONSE_FIELD
from driftcheck.checks.http_common import (
    Sides,
    evidence,
    find_route,
    routes_now,
    sides,
    walk_response,
)
from driftcheck.client.http.reads import EMPTY
from driftcheck.client.http.use import HttpUse
from driftcheck.client.use import Use
from driftcheck.findings import Finding
from driftcheck.http.surface import HttpSurface, Route


def check(use: Use, ctx: CheckContext) -> list[Finding]:
    """Report a read of a response field the target's route no longer sends."""
    if not isinstance(use, HttpUse) or use.kind != "http-read" or use.optional:
        return []
    if not _runs_for(use):
        return []
    s = sides(ctx)
    if s.baseline is None:
        return _alone(use, ctx, s.target)
    before, now = routes_now(s, use.http_method, use.path)
    if before is None or now is None:
        return []  # a removed route is http-route-removed's
    if use.field == (EMPTY,):
        return _became_non_empty(use, ctx, before, now, s)
    was = walk_response(s.baseline, before, use.field)
    if was.status != "present":
        return []
    got = walk_response(s.target, now, use.field)
    if got.status not in ("missing", "empty"):
        return []
    name = ".".join(p for p in use.field if p != "[]")
    if not ctx.once(use.file, f"read {use.symbol}"):
        return []
    target = f"{ctx.target.name} {ctx.target.version}"
    if got.status == "empty":
        message = f"{target}'s {now.method} {now.path} sends no body; the client reads {name}"
    else:
        message = f"{target}'s {now.method} {now.path} no longer sends {name} ({got.note})"
    ev = [
        evidence(ctx.base, was.file or before.file, was.line or before.line, f"sends {name}"),
        evidence(ctx.target, got.file or now.file, got.line or now.line, got.note),
    ]
    return [finding(use, HTTP_RESPONSE_FIELD, symbol=use.symbol, message=message, evidence=ev)]


def _alone(use: HttpUse, ctx: CheckContext, target: HttpSurface) -> list[Finding]:
    """Without a baseline, the target alone: a field no body its route sends has (an empty
    test is not judged: it needs what the route sent before)."""
    now = find_route(target, use.http_method, use.path)
    if now is None or use.field == (EMPTY,):
        return []
    got = walk_response(target, now, use.field)
    if got.status not in ("missing", "empty") or not ctx.once(use.file, f"read {use.symbol}"):
        return []
    name = ".".join(p for p in use.field if p != "[]")
    host = f"{ctx.target.name} {ctx.target.version}"
    if got.status == "empty":
        message = f"{host}'s {now.method} {now.path} sends no body; the client reads {name}"
    else:
        message = f"{host}'s {now.method} {now.path} does not send {name} ({got.note})"
    ev = [evidence(ctx.target, got.file or now.file, got.line or now.line, got.note)]
    return [finding(use, HTTP_RESPONSE_FIELD, symbol=use.symbol, message=message, evidence=ev)]


def _became_non_empty(
    use: HttpUse, ctx: CheckContext, before: Route, now: Route, s: Sides
) -> list[Finding]:
    """The client tests for an empty body; the baseline's route sent none, the target's sends
    one (a model or a dict)."""
    was = walk_response(cast(HttpSurface, s.baseline), before, ("*",))  # before: a baseline
    sends = [r for r in now.responses if r.kind in ("model", "keys")]
    if was.status != "empty" or not sends or any(r.kind == "unknown" for r in now.responses):
        return []
    if not ctx.once(use.file, f"read {use.symbol}"):
        return []
    body = sends[0].model or f"keys {sorted(sends[0].keys)}"
    message = (
        f"{ctx.target.name} {ctx.target.version}'s {now.method} {now.path} now sends a body "
        f"({body}); the client expects none here"
    )
    ev = [
        evidence(ctx.base, was.file or before.file, was.line or before.line, "sends no body"),
        evidence(ctx.target, sends[0].file or now.file, sends[0].line or now.line, f"sends {body}"),
    ]
    return [finding(use, HTTP_RESPONSE_FIELD, symbol=use.symbol, message=message, evidence=ev)]


def _runs_for(use: HttpUse) -> bool:
    """False where an ``isinstance`` test on the result rules this read out for the call's
    SDK class (``if isinstance(res, Completion)`` for a chat completion's result)."""
    if use.narrow is None or not use.returns:
        return True
    names, holds = use.narrow
    matches = any(n in use.returns for n in names)
    return matches == holds
