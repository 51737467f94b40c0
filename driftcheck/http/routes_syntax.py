"""The pieces of FastAPI / Starlette code the route reader recognises, and what it records:
registrations, includes and the guards on the way to them."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import cast

from driftcheck.http.hostcode import Def, dotted_name, keyword, literal_str

HTTP_METHODS = ("get", "post", "put", "delete", "patch", "head", "options")
APP_CLASSES = ("FastAPI", "Starlette")
ROUTER_CLASSES = ("APIRouter", "Router")


@dataclass(frozen=True)
class Guard:
    """A test that must hold (or, ``negated``, fail) on the way to a registration."""

    module: str
    text: str
    negated: bool
    test: ast.expr = field(compare=False, hash=False)


@dataclass(frozen=True)
class Registration:
    """One route registered on a router or app object."""

    target: str
    method: str
    path: str
    handler: Def | None
    guards: tuple[Guard, ...]
    file: str
    line: int
    #: The decorator or ``add_api_route`` call (for ``response_model=`` / ``responses=``).
    call: ast.Call | None = None


@dataclass(frozen=True)
class Include:
    parent: str
    child: str
    prefix: str
    guards: tuple[Guard, ...]


@dataclass(frozen=True)
class RawRoute:
    """A route of the server's app before its bodies are read."""

    method: str
    path: str
    reg: Registration
    guards: tuple[Guard, ...]


def creates_app(func: ast.AST) -> bool:
    return any(cls in APP_CLASSES for _, cls, _ in assigned_objects(func))


def assigned_objects(func: ast.AST) -> list[tuple[str, str, ast.Call]]:
    """``name = FastAPI(...)`` / ``name = APIRouter(...)`` inside a function (not nested ones)."""
    out: list[tuple[str, str, ast.Call]] = []
    todo = list(ast.iter_child_nodes(func))
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            cls = class_called(node.value)
            if cls:
                out.extend((t.id, cls, node.value) for t in node.targets if isinstance(t, ast.Name))
        todo.extend(ast.iter_child_nodes(node))
    return out


def class_called(call: ast.Call) -> str | None:
    name = dotted(call.func)
    last = name.rsplit(".", 1)[-1] if name else None
    return last if last in (*APP_CLASSES, *ROUTER_CLASSES) else None


def decorator_methods(attr: str, dec: ast.Call) -> list[str]:
    if attr in HTTP_METHODS:
        return [attr.upper()]
    if attr in ("api_route", "route"):
        return listed_methods(dec) or ["GET"]
    if attr == "websocket":
        return ["WEBSOCKET"]
    return []


def listed_methods(call: ast.Call) -> list[str]:
    value = keyword(call, "methods")
    if isinstance(value, ast.List | ast.Tuple | ast.Set):
        return [m.upper() for e in value.elts if (m := literal_str(e))]
    return []


def registers_on_decorator(func: ast.AST) -> bool:
    """A route handler itself (decorated with ``@router.<method>``): its body registers nothing."""
    for dec in cast(ast.FunctionDef, func).decorator_list:  # called on function definitions
        if isinstance(dec, ast.Call) and isinstance(dec.func, ast.Attribute):
            if dec.func.attr in (*HTTP_METHODS, "api_route", "route", "websocket"):
                return True
    return False


def ends(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], ast.Return | ast.Raise)


def dotted(expr: ast.AST | None) -> str | None:
    return None if expr is None else dotted_name(expr)
