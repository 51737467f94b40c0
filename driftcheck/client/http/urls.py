"""The path a client's URL expression ends in, read statically.

A URL is followed through string literals, f-strings (``f"{base}/v1/x"``), ``+`` chains
(``base_url + "/v1/x"``), ``urljoin(base, "/v1/x")`` and names assigned once (a local or a module
constant). Parts that are not literal stand for the base URL (before the path) or for one path
segment (``f"/v1/models/{name}"`` -> ``/v1/models/{}``). A literal absolute URL that names a host
other than this machine is no URL of the host's server. A URL that ends in a parameter of its
function (``self.base + path``) makes the function a wrapper: the path comes from its callers.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlsplit

from driftcheck.client.index import FunctionInfo, ModuleInfo

#: Hosts that address a server on the client's own machine.
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "0.0.0.0", "::1", "[::1]", ""})
_HOLE = "\0"
_DEPTH = 4


@dataclass(frozen=True)
class UrlPath:
    """What a URL expression says about its path.

    Attributes:
        path: The literal path (``{}`` for a segment that is not literal); None: not known.
        foreign: A literal URL naming another machine (not the host's server).
        param: The function parameter the URL ends in (a wrapper's URL or path argument).
        head: What comes before that parameter (``f"{self.base}/v1{path}"``: a base, then
            ``/v1``): literal pieces, None for a part that is not literal.
    """

    path: str | None = None
    foreign: bool = False
    param: str | None = None
    head: tuple[str | None, ...] = ()


def url_path(
    expr: ast.expr,
    func: FunctionInfo | None,
    module: ModuleInfo,
    head: tuple[str | None, ...] = (),
) -> UrlPath:
    """The path ``expr`` (a URL or a path) ends in; ``head``: what a wrapper puts before it
    (``self.base + path``: the call site's ``expr`` is the path)."""
    if _is_param(expr, func):
        return UrlPath(param=cast(ast.Name, expr).id, head=head)
    tail = _tail_param(expr, func, module)
    if tail is not None and _path_head(tail[1]):
        return UrlPath(param=tail[0], head=(*head, *tail[1]))
    pieces = _pieces(expr, func, module, 0)
    if pieces is None:
        return UrlPath()
    text = "".join(_HOLE if p is None else p for p in (*head, *pieces))
    return _path_of(text)


def _is_param(expr: ast.expr, func: FunctionInfo | None) -> bool:
    return (
        isinstance(expr, ast.Name)
        and func is not None
        and expr.id in func.params
        and expr.id not in func.locals
    )


def _path_head(pieces: list[str | None]) -> bool:
    """Do the pieces before a parameter leave the path to it (a base, ``/v1``), rather than
    make it one segment of a literal path (``/v1/models/{name}``)? Never for another machine."""
    text = "".join(_HOLE if p is None else p for p in pieces)
    if _path_of(text + "/x").foreign:
        return False
    if "://" in text:
        text = "/" + text.split("://", 1)[1].partition("/")[2]
    path = text.lstrip(_HOLE)
    return path in ("", "/") or not path.endswith("/")


def _tail_param(
    expr: ast.expr, func: FunctionInfo | None, module: ModuleInfo
) -> tuple[str, list[str | None]] | None:
    """A URL that ends in a parameter of its function (``self.base + path``,
    ``f"{base}/v1{path}"``, ``urljoin(base, path)``): the parameter and the pieces before it."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add) and _is_param(expr.right, func):
        before = _pieces(expr.left, func, module, 1) or [None]
        return cast(ast.Name, expr.right).id, before
    if isinstance(expr, ast.JoinedStr) and expr.values:
        last = expr.values[-1]
        if (
            isinstance(last, ast.FormattedValue)
            and last.format_spec is None
            and last.conversion == -1
            and _is_param(last.value, func)
        ):
            pieces = _pieces(ast.JoinedStr(values=expr.values[:-1]), func, module, 1) or []
            return cast(ast.Name, last.value).id, pieces
    if isinstance(expr, ast.Call) and len(expr.args) == 2 and _is_param(expr.args[1], func):
        if any(n.endswith("urljoin") for n in module.qualified(expr.func)):
            return cast(ast.Name, expr.args[1]).id, [None]
    return None


def _path_of(text: str) -> UrlPath:
    if "://" in text:
        scheme_end = text.index("://") + 3
        rest = text[scheme_end:]
        netloc, slash, tail = rest.partition("/")
        if _HOLE not in netloc:
            host = urlsplit(text[:scheme_end] + netloc).hostname or ""
            if host not in LOCAL_HOSTS:
                return UrlPath(foreign=True)
        text = slash + tail
    else:
        text = text.lstrip(_HOLE)
    text = re.sub("/{2,}", "/", text.split("?", 1)[0].split("#", 1)[0])
    if not text.startswith("/") or _HOLE in text.split("/", 2)[1]:
        return UrlPath()
    segments = ["{}" if _HOLE in s else s for s in text.split("/")]
    return UrlPath(path="/".join(segments).rstrip("/") or "/")


def _pieces(
    expr: ast.expr, func: FunctionInfo | None, module: ModuleInfo, depth: int
) -> list[str | None] | None:
    """The URL as literal pieces and holes (None), or None when it ends in nothing literal."""
    if depth > _DEPTH:
        return None
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return [expr.value]
    if isinstance(expr, ast.JoinedStr):
        out: list[str | None] = []
        for value in expr.values:
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                out.append(value.value)
            else:
                out.append(None)
        return out
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        left = _pieces(expr.left, func, module, depth + 1) or [None]
        right = _pieces(expr.right, func, module, depth + 1) or [None]
        return [*left, *right]
    if isinstance(expr, ast.Call):
        names = module.qualified(expr.func)
        if any(n.endswith("urljoin") for n in names) and len(expr.args) == 2:
            tail = _pieces(expr.args[1], func, module, depth + 1)
            if tail and isinstance(tail[0], str) and tail[0].startswith("/"):
                return [None, *tail]
            return None
        return None
    if isinstance(expr, ast.Name):
        single = _single_value(expr.id, func, module)
        if single is not None:
            return _pieces(single, func, module, depth + 1)
    return None


def _single_value(name: str, func: FunctionInfo | None, module: ModuleInfo) -> ast.expr | None:
    """The one value a name is assigned (in the function, else at module level)."""
    if func is not None and name in func.locals:
        values = func.locals[name]
    elif func is not None and name in func.params:
        return None
    else:
        values = module.globals.get(name, [])
    values = [v for v in values if not _is_annotation(v)]
    return values[0] if len(values) == 1 else None


def _is_annotation(value: ast.expr) -> bool:
    return isinstance(value, ast.Name) and value.id in ("str", "__unknown__")


def path_matches(client: str, route: str) -> bool:
    """Does a client path (``{}`` for unknown segments) address a route path (``{param}``
    segments, ``{p:path}`` for the rest)?"""
    a, b = client.strip("/").split("/"), route.strip("/").split("/")
    for i, seg in enumerate(b):
        if seg.startswith("{") and seg.endswith(":path}"):
            return len(a) > i
        if i >= len(a):
            return False
        if a[i] == "{}" or (seg.startswith("{") and seg.endswith("}")):
            continue
        if a[i] != seg:
            return False
    return len(a) == len(b)
