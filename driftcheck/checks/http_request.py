"""Request bodies the target's model for the route no longer takes as the client sends them.

``http-request-field``: a key the client sends (``json=`` payloads, the OpenAI SDK's body
keywords and ``extra_body``; ``data=``/``content=`` given ``json.dumps(body)``; the keys of its
nested objects, against the models the fields on the way name) that the baseline's request
model has and the target's does not:
an error where the target model forbids extra fields (the request is rejected), else a warning
(the server ignores it). Where the target keeps the field under another wire name (its alias
changed), the finding says so and the fix renames the key. A field the target model requires
that the baseline did not, and that a payload whose keys are all known does not send, is an
error. Without a baseline, the target's model alone: a key a model that forbids extra fields
does not take, and a required field a complete payload lacks (both rejected).
"""

from __future__ import annotations

from dataclasses import replace

from driftcheck.checks.context import CheckContext, finding, side
from driftcheck.checks.http import HTTP_REQUEST_FIELD
from driftcheck.checks.http_common import (
    evidence,
    find_route,
    keys_on,
    request_model,
    routes_now,
    sent_field,
    sides,
)
from driftcheck.client.http.use import HttpUse
from driftcheck.client.use import Use
from driftcheck.findings import Finding, Fix
from driftcheck.http.surface import BodyModel, HttpSurface, ModelField
from driftcheck.kinds import FixSafety, Severity


def check(use: Use, ctx: CheckContext) -> list[Finding]:
    """Report payload keys the target's request model dropped or renamed, and fields it now
    requires."""
    if not isinstance(use, HttpUse) or use.kind != "http-request":
        return []
    s = sides(ctx)
    if s.baseline is None:
        return _alone(use, ctx, s.target)
    before, now = routes_now(s, use.http_method, use.path)
    if before is None or now is None:
        return []
    bm, tm = request_model(s.baseline, before), request_model(s.target, now)
    if bm is None or tm is None:
        return []
    sent, uncertain = keys_on(use.payload, side(ctx.target))
    out = [f for key, span in sent.items() if (f := _dropped(use, ctx, key, span, bm, tm))]
    if use.payload_complete and not uncertain:
        out += _required(use, ctx, set(sent), bm, tm)
    return out + _nested(use, ctx, set(sent), bm, tm, s.baseline, s.target)


def _nested(
    use: HttpUse,
    ctx: CheckContext,
    sent: set[str],
    bm: BodyModel,
    tm: BodyModel,
    base: HttpSurface,
    target: HttpSurface,
) -> list[Finding]:
    """The keys of the body's nested objects, checked against the models the two releases'
    fields on the way type them (a key under a top key that is not certainly sent, or under a
    field whose model either release leaves untyped, is not judged)."""
    on = side(ctx.target)
    out = []
    for path, op in use.nested:
        if op.op != "+" or path[0] not in sent:
            continue
        if op.gate is not None and op.gate.holds(on) is not True:
            continue
        inner_b, inner_t = _inner_model(base, bm, path), _inner_model(target, tm, path)
        if inner_b is None or inner_t is None:
            continue
        label = ".".join(p for p in (*path, op.key) if p != "[]")
        f = _dropped(use, ctx, op.key, op.span, inner_b, inner_t, label)
        if f is not None:
            out.append(f)
    return out


def _inner_model(surface: HttpSurface, model: BodyModel, path: tuple[str, ...]) -> BodyModel | None:
    """The model a path of keys from a body model leads to (``[]``: a list's items)."""
    current: BodyModel | None = model
    for part in path:
        if current is None:
            return None
        if part == "[]":
            continue
        f = sent_field(current, part)
        current = surface.model(f.model) if f is not None and f.model else None
    return current


def _alone(use: HttpUse, ctx: CheckContext, target: HttpSurface) -> list[Finding]:
    """Without a baseline, the target alone: on a route it serves whose model forbids extra
    fields, a key the model does not take, and a required field a complete payload lacks
    (both rejected); a key an ignoring model drops is not judged (it may be another server's)."""
    now = find_route(target, use.http_method, use.path)
    tm = request_model(target, now) if now is not None else None
    if tm is None:
        return []
    sent, uncertain = keys_on(use.payload, side(ctx.target))
    out: list[Finding] = []
    if tm.extra == "forbid":
        out += [
            f
            for key, span in sent.items()
            if sent_field(tm, key) is None and (f := _now_forbidden(use, ctx, key, span, None, tm))
        ]
    if use.payload_complete and not uncertain:
        out += _required(use, ctx, set(sent), None, tm)
    return out


def _dropped(
    use: HttpUse,
    ctx: CheckContext,
    key: str,
    span: tuple[int, int, int, int] | None,
    bm: BodyModel,
    tm: BodyModel,
    label: str | None = None,
) -> Finding | None:
    """A key the baseline's model takes and the target's does not (``label``: the key's path
    from the body, for a nested one)."""
    if sent_field(tm, key) is not None:
        return None
    had = sent_field(bm, key)
    if had is None:
        if tm.extra == "forbid" and bm.extra != "forbid":
            return _now_forbidden(use, ctx, key, span, bm, tm, label)
        return None  # the baseline did not take it either: not a drift
    shown = label or key
    at = f" (the body's {label})" if label else ""
    if not ctx.once(use.file, f"{use.line} key {shown}"):
        return None
    ev = [
        evidence(ctx.base, had.file or bm.file, had.line or bm.line, f"{bm.qualname}.{had.name}"),
        evidence(ctx.target, tm.file, tm.line, f"{tm.qualname}: no {key}"),
    ]
    kept = tm.fields.get(had.name)
    target = f"{ctx.target.name} {ctx.target.version}"
    if kept is not None and kept.wire_name != key:
        ev[1] = evidence(
            ctx.target, kept.file or tm.file, kept.line or tm.line, f"as {kept.wire_name}"
        )
        message = f"{target} takes {shown!r} of {use.symbol} as {kept.wire_name!r} ({tm.qualname})"
        fix = Fix(
            FixSafety.SAFE,
            f"send {kept.wire_name!r} instead of {key!r}",
            codemod="rename-payload-key",
            params=(("old", key), ("new", kept.wire_name)),
        )
        severity = None if tm.extra == "forbid" else Severity.WARNING
        return _at(
            finding(
                use,
                HTTP_REQUEST_FIELD,
                symbol=f"{use.symbol} {shown}",
                message=message,
                evidence=ev,
                fix=fix,
                severity=severity,
                at=span,
            ),
            span,
        )
    if tm.extra == "forbid":
        message = f"{target}'s {tm.qualname} forbids extra fields and no longer has {key!r}{at}: the request is rejected"
        severity = None
    else:
        message = f"{target}'s {tm.qualname} no longer has {key!r}{at}: the server ignores it"
        severity = Severity.WARNING
    return _at(
        finding(
            use,
            HTTP_REQUEST_FIELD,
            symbol=f"{use.symbol} {shown}",
            message=message,
            evidence=ev,
            severity=severity,
            at=span,
        ),
        span,
    )


def _now_forbidden(
    use: HttpUse,
    ctx: CheckContext,
    key: str,
    span: tuple[int, int, int, int] | None,
    bm: BodyModel | None,
    tm: BodyModel,
    label: str | None = None,
) -> Finding | None:
    """A key neither model has, that the baseline ignored and the target rejects (without a
    baseline, that the target rejects)."""
    shown = label or key
    at = f" (the body's {label})" if label else ""
    if not ctx.once(use.file, f"{use.line} key {shown}"):
        return None
    ev = [evidence(ctx.target, tm.file, tm.line, f"{tm.qualname}: extra=forbid")]
    host = f"{ctx.target.name} {ctx.target.version}"
    message = f"{host}'s {tm.qualname} forbids extra fields and has no {key!r}{at}"
    if bm is not None:
        ev.insert(
            0, evidence(ctx.base, bm.file, bm.line, f"{bm.qualname}: extra={bm.extra or 'ignore'}")
        )
        message = (
            f"{host}'s {tm.qualname} now forbids extra fields and has no {key!r}{at} "
            "(the baseline ignored it)"
        )
    message += ": the request is rejected"
    return _at(
        finding(
            use,
            HTTP_REQUEST_FIELD,
            symbol=f"{use.symbol} {shown}",
            message=message,
            evidence=ev,
            at=span,
        ),
        span,
    )


def _required(
    use: HttpUse, ctx: CheckContext, sent: set[str], bm: BodyModel | None, tm: BodyModel
) -> list[Finding]:
    """Fields the target requires that a complete payload does not send (and the baseline, if
    any, did not require)."""
    out = []
    for f in tm.fields.values():
        if not f.required or f.wire_name in sent or f.name in sent:
            continue
        old: ModelField | None = bm.fields.get(f.name) if bm is not None else None
        if old is not None and old.required:
            continue
        if not ctx.once(use.file, f"{use.line} required {f.wire_name}"):
            continue
        was = "optional" if old is not None else "absent"
        ev = [evidence(ctx.target, f.file or tm.file, f.line or tm.line, f"{f.name} required")]
        at_base = ""
        if bm is not None:
            at_base = f" ({was} at baseline)"
            ev.insert(
                0,
                evidence(
                    ctx.base,
                    (old.file if old else "") or bm.file,
                    (old.line if old else 0) or bm.line,
                    f"{f.name} {was}",
                ),
            )
        message = (
            f"{ctx.target.name} {ctx.target.version}'s {tm.qualname} requires {f.wire_name!r}"
            f"{at_base}; {use.symbol} does not send it"
        )
        out.append(
            finding(
                use,
                HTTP_REQUEST_FIELD,
                symbol=f"{use.symbol} {f.wire_name}",
                message=message,
                evidence=ev,
            )
        )
    return out


def _at(f: Finding, span: tuple[int, int, int, int] | None) -> Finding:
    """A key's finding is fixed where the key is written."""
    return replace(f, anchor=None) if span is not None else f
