"""The flags behind a route condition's local name (read from the host's source, over its surface).

The surface ties a route's condition to flags where the condition reads them (``args.x``,
``getattr(args, "x", False)``); a condition that is a local name (``enabled``, assigned from the
flags a line above) it leaves without flags. Here that name is followed to its assignment in the
host function that includes the route's router, through locals it names in turn; the flags are
those the assignment reads directly first, then those of the locals it names.
"""

from __future__ import annotations

import ast

from driftcheck.host.api import HostAPI
from driftcheck.http.hostcode import HostCode
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
    code = HostCode(api)
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
                return _read(assigned, name, 0)
    return []


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
