"""Reads a host's HTTP surface from its source: the server app's routes (with the conditions
that register them), their request and response bodies, and the server's command-line flags."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from driftcheck.http.conditions import condition
from driftcheck.http.flags import FlagReader
from driftcheck.http.hostcode import HostCode, literal_str
from driftcheck.http.models import ModelReader
from driftcheck.http.responses import ResponseReader
from driftcheck.http.routes import RawRoute, RouteReader
from driftcheck.http.surface import CliFlag, HttpSurface, Route

if TYPE_CHECKING:
    from driftcheck.host.api import HostAPI


def read_surface(api: HostAPI) -> HttpSurface:
    """Routes, their body models and the server's flags of one host release."""
    code = HostCode(api)
    reader = RouteReader(code)
    raw = reader.read()
    builder = reader.builders.get(reader.main_app or "")
    flags = FlagReader(code).read(_args_read(builder.node) if builder else set())
    models = ModelReader(code)
    responses = ResponseReader(code, models)
    routes: list[Route] = []
    for r in raw:
        route = _route(code, r, flags, models, responses)
        if route not in routes:
            routes.append(route)
    routes.sort(key=lambda r: (r.path, r.method))
    return HttpSurface(tuple(routes), dict(sorted(models.models.items())), flags)


def _route(
    code: HostCode,
    r: RawRoute,
    flags: dict[str, CliFlag],
    models: ModelReader,
    responses: ResponseReader,
) -> Route:
    unique = list({(g.module, g.text, g.negated): g for g in r.guards}.values())
    conds = [condition(code, g.module, g.test, g.negated, flags) for g in unique]
    handler = r.reg.handler
    request = None
    shapes: tuple = ()
    if handler is not None and isinstance(handler.node, ast.FunctionDef | ast.AsyncFunctionDef):
        args = handler.node.args
        for param in (*args.posonlyargs, *args.args, *args.kwonlyargs):
            cls = models.model_of(handler.module, param.annotation)
            if cls is not None:
                models.read(cls)
                request = cls.qualname
                break
        shapes = responses.shapes(handler, r.reg.call)
    return Route(
        method=r.method,
        path=r.path,
        handler=handler.qualname if handler else "",
        file=r.reg.file,
        line=r.reg.line,
        request=request,
        responses=shapes,
        condition=" and ".join(c.text for c in conds) or None,
        flags=tuple(dict.fromkeys(f for c in conds for f in c.flags)),
        env=tuple(dict.fromkeys(e for c in conds for e in c.env)),
    )


def _args_read(builder: ast.AST) -> set[str]:
    """Attributes the app builder reads from its parameters (``args.root_path``)."""
    params = {a.arg for a in ast.walk(builder) if isinstance(a, ast.arg)}
    out: set[str] = set()
    for node in ast.walk(builder):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id in params:
                out.add(node.attr)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "getattr" and len(node.args) >= 2:
                name = literal_str(node.args[1])
                if name:
                    out.add(name)
    return out
