"""Reads a host's HTTP surface from its source: the server app's routes (with the conditions
that register them), their request and response bodies, and the server's command-line flags."""

from __future__ import annotations

import ast
import gc
from typing import TYPE_CHECKING

from driftcheck.host.walk import gc_paused
from driftcheck.http.conditions import condition
from driftcheck.http.flags import FlagReader
from driftcheck.http.hostcode import HostCode, literal_str
from driftcheck.http.models import ModelReader
from driftcheck.http.responses import ResponseReader
from driftcheck.http.routes import NEEDLES, RawRoute, RouteReader
from driftcheck.http.surface_model import CliFlag, HttpSurface, Route

if TYPE_CHECKING:
    from driftcheck.host.api import HostAPI


def read_surface(api: HostAPI) -> HttpSurface:
    """Routes, their body models and the server's flags of one host release.

    The cyclic GC is off meanwhile: the reader parses module after module and drops each tree
    (freed by its reference counts, no cycles), and a collection in the middle of a parse moves
    the tree being read to an older generation, which then triggers full collections over the
    whole scan's objects (a cold trl scan took a quarter more CPU)."""
    gc.collect()  # what the scan left in cycles before, freed for the read to reuse
    with gc_paused():
        return _read_surface(api)


def _read_surface(api: HostAPI) -> HttpSurface:
    code = HostCode(api, ahead=(*NEEDLES, "add_argument"))  # the route and flag readers' needles
    reader = RouteReader(code)
    raw = reader.read()
    builder = reader.builders.get(reader.main_app or "")
    reads: set[str] = set()
    for func in ([builder] if builder else []) + reader.followed:
        reads |= _args_read(func.node)
    for r in raw:
        for g in r.guards:
            reads |= _args_read(g.test)
    flag_reader = FlagReader(code)
    flags = flag_reader.read(reads)
    models = ModelReader(code)
    responses = ResponseReader(code, models)
    routes: list[Route] = []
    for r in raw:
        route = _route(code, r, flags, models, responses)
        if route not in routes:
            routes.append(route)
    routes.sort(key=lambda r: (r.path, r.method))
    app = reader.main_app if reader.main_app in reader.builders else None
    return HttpSurface(
        tuple(routes),
        dict(sorted(models.models.items())),
        flags,
        app=app,
        parsers=tuple(flag_reader.parsers),
    )


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
        condition=_joined([c.text for c in conds]),
        flags=tuple(dict.fromkeys(f for c in conds for f in c.flags)),
        env=tuple(dict.fromkeys(e for c in conds for e in c.env)),
    )


def _args_read(builder: ast.AST) -> set[str]:
    """Attributes a function reads from its parameters or from ``<x>.args`` (``args.root_path``,
    ``app.state.args.x``, ``getattr(args, "x", None)``)."""
    params = {a.arg for a in ast.walk(builder) if isinstance(a, ast.arg)}
    out: set[str] = set()
    for node in ast.walk(builder):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id in params or node.value.id == "args":
                out.add(node.attr)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute):
            if node.value.attr == "args":
                out.add(node.attr)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "getattr" and len(node.args) >= 2:
                name = literal_str(node.args[1])
                if name:
                    out.add(name)
    return out


def _joined(texts: list[str]) -> str | None:
    """The conjunction of a route's guards (a lone one without its parentheses)."""
    if len(texts) == 1 and texts[0].startswith("(") and texts[0].endswith(")"):
        return texts[0][1:-1]
    return " and ".join(texts) or None
