"""The flags behind a route condition's local name (read from the host's source, over its surface).

The surface ties a route's condition to flags where the condition reads them (``args.x``,
``getattr(args, "x", False)``); a condition that is a local name (``enabled``, assigned from the
flags a line above) it leaves without flags. Here that name is followed to its assignment in the
host function that includes the route's router, through locals it names in turn; the flags are
those the assignment reads directly first, then those of the locals it names.

:func:`built_without_flags` goes the other way: whether a host function that builds its server's
app with literal arguments (``build_app(args, ("render",))``, vLLM's CPU render server) makes the
condition hold with no flag set (``dedicated_mode = "render" in supported_tasks or ...``).
"""

from __future__ import annotations

import ast
from typing import cast

from driftcheck.host.api import HostAPI
from driftcheck.http.hostcode import Def, HostCode, dotted_name, local_imports
from driftcheck.http.surface import HttpSurface, Route

_DEPTH = 3


def flags_behind(api: HostAPI, surface: HttpSurface, route: Route, name: str) -> tuple[str, ...]:
    """The flags the local ``name`` of ``route``'s condition is made from (a snapshot fact)."""
    if not name.isidentifier():
        return ()
    key = f"http-condition-flags:1:{route.method} {route.path}:{name}"
    dests = api.fact(key, lambda: _dests(api, route, name))
    out = []
    for dest in dests:
        flag = surface.flag("--" + dest.replace("_", "-"))
        flag = flag or next((f for f in surface.flags.values() if f.dest == dest), None)
        if flag is not None and flag.name not in out:
            out.append(flag.name)
    return tuple(out)


def _dests(api: HostAPI, route: Route, name: str) -> list[str]:
    assigned = _including(HostCode(api), route, name)
    return _read(assigned, name, 0) if assigned is not None else []


def _including(code: HostCode, route: Route, name: str) -> dict[str, ast.expr] | None:
    """The local assignments of the host function that includes ``route``'s router and binds
    ``name`` (None: none found)."""
    module = route.file.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    tail = ".".join(module.split(".")[-2:])
    for mod in dict.fromkeys([module, *code.modules_containing(tail)]):
        tree = code.parse(mod)
        if tree is None:
            continue
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            text = ast.unparse(func)
            if "include_router" not in text or (mod != module and tail not in text):
                continue
            assigned = _assignments(func)
            if name in assigned:
                return assigned
    return None


def built_without_flags(api: HostAPI, route: Route, function: str) -> tuple[str, int] | None:
    """Where the host function ``function`` builds its app with literal arguments (``build_app(
    args, ("render",))``) under which ``route``'s condition holds with no flag set (``getattr(
    args, "x", False)`` at its default): a server started through that function serves the route
    whatever its flags. None when it does not, or the condition cannot be decided (a snapshot
    fact)."""
    if not route.condition:
        return None
    key = f"http-built-without-flags:1:{route.method} {route.path}:{function}"
    got = api.fact(key, lambda: list(_built(HostCode(api), route, function) or ()))
    return (str(got[0]), int(got[1])) if got else None


def _built(code: HostCode, route: Route, function: str) -> tuple[str, int] | None:
    module, _, name = function.rpartition(".")
    found = code.resolve(module, name) if module else None
    if not isinstance(found, Def) or found.kind not in ("FunctionDef", "AsyncFunctionDef"):
        return None
    condition = ast.parse(cast(str, route.condition), mode="eval").body
    named = {n.id for n in ast.walk(condition) if isinstance(n, ast.Name)}
    local = local_imports(found.node, found.module, code.is_package(found.module))
    for call in ast.walk(found.node):
        if not isinstance(call, ast.Call):
            continue
        callee = code.resolve(found.module, dotted_name(call.func) or "", local)
        if not isinstance(callee, Def) or not isinstance(
            callee.node, (ast.FunctionDef, ast.AsyncFunctionDef)
        ):
            continue
        if "FastAPI(" not in ast.unparse(callee.node):
            continue  # not the function that builds the app
        env = {k: v for k, v in _literal_arguments(callee.node, call).items() if k in named}
        if not env:
            continue
        locals_ = {}
        for n in named - set(env):
            assigned = _including(code, route, n)
            if assigned is not None:
                locals_.update(assigned)
        if _value(condition, env, locals_, 0) is True:
            return code.file(found.module), call.lineno
    return None


def _literal_arguments(func: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call) -> dict:
    """Parameter -> value for the call's arguments that are literals (``("render",)``)."""
    params = [a.arg for a in (*func.args.posonlyargs, *func.args.args)]
    out: dict[str, object] = {}
    for i, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred) or i >= len(params):
            break
        value = _literal(arg)
        if value is not _UNKNOWN:
            out[params[i]] = value
    for kw in call.keywords:
        value = _literal(kw.value) if kw.arg else _UNKNOWN
        if kw.arg and value is not _UNKNOWN:
            out[kw.arg] = value
    return out


_UNKNOWN = object()


def _literal(expr: ast.expr) -> object:
    try:
        return ast.literal_eval(expr)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return _UNKNOWN


def _value(expr: ast.expr, env: dict, assigned: dict[str, ast.expr], depth: int) -> object:
    """``expr`` evaluated with ``env`` and no flag set (``getattr(args, "x", d)``: ``d``), or
    _UNKNOWN; ``and``/``or`` as Python's truth, unknown parts kept unknown."""
    if depth > _DEPTH * 3:
        return _UNKNOWN
    if isinstance(expr, ast.Constant):
        return expr.value
    if isinstance(expr, ast.Name):
        if expr.id in env:
            return env[expr.id]
        if expr.id in assigned:
            return _value(assigned[expr.id], env, assigned, depth + 1)
        return _UNKNOWN
    if isinstance(expr, ast.Tuple | ast.List):
        items = [_value(e, env, assigned, depth + 1) for e in expr.elts]
        return _UNKNOWN if _UNKNOWN in items else tuple(items)
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
        got = _value(expr.operand, env, assigned, depth + 1)
        return _UNKNOWN if got is _UNKNOWN else not got
    if isinstance(expr, ast.BoolOp):
        parts = [_value(v, env, assigned, depth + 1) for v in expr.values]
        decisive = isinstance(expr.op, ast.Or)  # a true part decides an ``or``, a false one ``and``
        if any(p is not _UNKNOWN and bool(p) is decisive for p in parts):
            return decisive
        return _UNKNOWN if _UNKNOWN in parts else not decisive
    if (
        isinstance(expr, ast.Compare)
        and len(expr.ops) == 1
        and isinstance(expr.ops[0], ast.In | ast.NotIn)
    ):
        left = _value(expr.left, env, assigned, depth + 1)
        right = _value(expr.comparators[0], env, assigned, depth + 1)
        if left is _UNKNOWN or right is _UNKNOWN:
            return _UNKNOWN
        try:
            inside = left in right  # type: ignore[operator]
        except TypeError:
            return _UNKNOWN
        return inside if isinstance(expr.ops[0], ast.In) else not inside
    if (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Name)
        and expr.func.id == "getattr"
        and len(expr.args) == 3
    ):
        return _literal(expr.args[2])  # a flag left unset: its default
    return _UNKNOWN


def _assignments(func: ast.AST) -> dict[str, ast.expr]:
    out: dict[str, ast.expr] = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                out.setdefault(target.id, node.value)
    return out


def _read(assigned: dict[str, ast.expr], name: str, depth: int) -> list[str]:
    """The ``args`` attributes the value of ``name`` reads: its own first, then its locals'."""
    if depth > _DEPTH:
        return []
    value = assigned[name]
    own: list[str] = []
    nested: list[str] = []
    for node in ast.walk(value):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "getattr" and len(node.args) >= 2:
                arg = node.args[1]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    own.append(arg.value)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "args":
                own.append(node.attr)
        elif isinstance(node, ast.Name) and node.id in assigned and node.id != name:
            nested += _read(assigned, node.id, depth + 1)
    return list(dict.fromkeys([*own, *nested]))
