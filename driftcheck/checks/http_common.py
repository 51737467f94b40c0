"""What the HTTP checks share: the two releases' HTTP surfaces, the route a client use
addresses, the keys a payload sends on one release, and paths through response bodies."""

from __future__ import annotations

import os
from dataclasses import dataclass

from driftcheck.checks.context import CheckContext, side
from driftcheck.client.http.urls import path_matches
from driftcheck.findings import Evidence
from driftcheck.gates import Side
from driftcheck.host.api import HostAPI
from driftcheck.host.signature import KeyOp
from driftcheck.http.surface import BodyModel, HttpSurface, ModelField, Route, http_surface

Span = tuple[int, int, int, int]


@dataclass(frozen=True)
class Sides:
    """The target's and the baseline's surfaces (the baseline's None without one)."""

    target: HttpSurface
    baseline: HttpSurface | None
    target_api: HostAPI
    baseline_api: HostAPI | None


def sides(ctx: CheckContext) -> Sides:
    """Both releases' HTTP surfaces (read once per release: a snapshot fact). A release whose
    surface cannot be read has none: nothing is reported against it."""
    base = _surface(ctx.baseline) if ctx.baseline is not None else None
    return Sides(_surface(ctx.target), base, ctx.target, ctx.baseline)


def _surface(api: HostAPI) -> HttpSurface:
    try:
        return http_surface(api)
    except Exception:  # a host the reader trips on: no HTTP findings, never a failed scan
        if os.environ.get("DRIFTCHECK_DEBUG", "") not in ("", "0"):
            raise
        return HttpSurface()


def find_route(surface: HttpSurface, method: str, path: str) -> Route | None:
    """The route a client's method and path address (path parameters match any segment)."""
    exact = surface.route(method, path)
    if exact is not None:
        return exact
    return next(
        (r for r in surface.routes if r.method == method.upper() and path_matches(path, r.path)),
        None,
    )


def moved_route(target: HttpSurface, before: Route) -> Route | None:
    """Where the target serves what the baseline served at ``before``: the one route of the
    same method with the same handler, else the same request model, else the same path tail."""
    same = [r for r in target.routes if r.method == before.method]
    short = before.handler.rsplit(".", 1)[-1]
    tail = "/".join(before.path.rstrip("/").split("/")[-2:])
    tests = (
        lambda r: bool(short) and r.handler.rsplit(".", 1)[-1] == short,
        lambda r: before.request is not None and r.request == before.request,
        lambda r: r.path.rstrip("/").endswith("/" + tail),
    )
    for test in tests:
        found = [r for r in same if test(r)]
        if len(found) == 1:
            return found[0]
    return None


def routes_now(s: Sides, method: str, path: str) -> tuple[Route | None, Route | None]:
    """The baseline's route and the target's for a client's request (the target's where the
    route moved, so that its bodies are checked too)."""
    if s.baseline is None:
        return None, None
    before = find_route(s.baseline, method, path)
    if before is None:
        return None, None
    now = find_route(s.target, method, path)
    return before, now if now is not None else moved_route(s.target, before)


def routes_at(surface: HttpSurface, path: str) -> list[Route]:
    """Every route on the client's path, whatever its method."""
    return [r for r in surface.routes if path_matches(path, r.path)]


def evidence(api: HostAPI, file: str, line: int, note: str) -> Evidence:
    """One release's evidence at a host file and line."""
    return Evidence(version=api.version, file=file, line=line, note=note)


def keys_on(ops: tuple[KeyOp, ...], on: Side) -> tuple[dict[str, Span | None], bool]:
    """The payload keys certainly sent on one release (with where each is written), and
    whether a key may be there that is not listed (a gate that cannot be decided)."""
    keys: dict[str, Span | None] = {}
    uncertain = False
    for op in ops:
        holds = op.gate.holds(on) if op.gate is not None else True
        if holds is False:
            continue
        if op.op == "+":
            if holds is None:
                uncertain = True
                continue
            keys[op.key] = op.span
        elif op.op == "-":
            keys.pop(op.key, None)
        elif holds:
            keys.clear()
    return keys, uncertain


def target_side(ctx: CheckContext) -> Side:
    """What a gate asks of the target."""
    return side(ctx.target)


def sent_field(model: BodyModel, key: str) -> ModelField | None:
    """The field a request key fills: its wire name (the alias, where it has one; pydantic
    takes a field with an alias by that alias only, unless the model also takes names:
    :attr:`BodyModel.by_name`)."""
    return model.accepted().get(key)


def request_model(surface: HttpSurface, route: Route) -> BodyModel | None:
    """The body model a route takes."""
    return surface.model(route.request)


@dataclass(frozen=True)
class Walked:
    """Where a response path ends on one release.

    Attributes:
        status: ``present``, ``missing`` (the body is known and has no such field), ``empty``
            (the route sends no body) or ``unknown``.
        file: Host file of the field, or of the model or shape that lacks it.
        line: Its line.
        note: What was found there.
    """

    status: str
    file: str = ""
    line: int = 0
    note: str = ""


def walk_response(surface: HttpSurface, route: Route, field: tuple[str, ...]) -> Walked:
    """Does any body the route sends have ``field`` (a path of keys, ``[]`` for list items)?"""
    shapes = [s for s in route.responses if s.kind != "stream"]
    if not shapes:
        return Walked("unknown")
    if all(s.kind == "empty" for s in shapes):
        s = shapes[0]
        return Walked("empty", s.file or route.file, s.line or route.line, "sends no body")
    misses: list[Walked] = []
    for shape in shapes:
        if shape.kind == "keys":
            if field[0] in shape.keys:
                return Walked("present", shape.file, shape.line)
            misses.append(Walked("missing", shape.file, shape.line, f"keys {sorted(shape.keys)}"))
        elif shape.kind == "model":
            got = _walk_model(surface, surface.model(shape.model), field)
            if got.status != "missing":
                return got
            misses.append(got)
        elif shape.kind != "empty":
            return Walked("unknown")
    return misses[0] if misses else Walked("unknown")


def _walk_model(surface: HttpSurface, model: BodyModel | None, field: tuple[str, ...]) -> Walked:
    for i, part in enumerate(field):
        if model is None:
            return Walked("unknown")
        if part == "[]":
            continue
        f = model.field_named(part)
        if f is None:
            if model.extra == "allow" and not model.fields:
                return Walked("unknown")
            return Walked("missing", model.file, model.line, f"{model.qualname} has no {part}")
        rest = field[i + 1 :]
        if not rest:
            return Walked("present", f.file or model.file, f.line or model.line)
        model = surface.model(f.model)
    return Walked("unknown")
