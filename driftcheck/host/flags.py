"""The value a host flag has on a release, when the release fixes it: read from its source.

A client branches on a host flag (``if envs.VLLM_USE_V1:``); where the release fixes the
flag's value, one arm never runs there. Fixed means the user cannot change it: a module-level
name bound once, to a literal, and stored nowhere else in the host (no ``global``, no
``mod.NAME = ...``, in a module that binds no name through ``globals()`` or ``__dict__``); or
an entry of the table a module's ``__getattr__`` serves
(``"NAME": lambda: True``) whose function returns a literal; or a module, class or function
(always true). An environment variable read with a default is not fixed: the user may set it.
"""

from __future__ import annotations

import ast
import re

from driftcheck.host.api import HostAPI
from driftcheck.host.objects import Found
from driftcheck.host.values import dotted

FORMAT = 1


def flag_value(api: HostAPI, dotted: str) -> bool | None:
    """The truth of host name ``dotted`` on this release, where the release fixes it (None:
    not fixed, or not known)."""
    found = api.resolve(dotted)
    if isinstance(found, Found) and found.kind in ("module", "class", "function"):
        return True
    module, _, name = dotted.rpartition(".")
    if not module or api.module(module) is None:
        return None
    fixed = api.fact(f"flags:{FORMAT}:{module}", lambda: _fixed(api, module))
    if name not in fixed:
        return None
    if stored_elsewhere(api, module, name):
        return None
    return bool(fixed[name])


def _fixed(api: HostAPI, module: str) -> dict[str, bool]:
    """The module's names fixed to a literal, with the literal's truth."""
    text = api.module_text(module)
    if text is None or "globals()" in text or "__dict__" in text:
        return {}  # names it may bind by a computed name
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return {}
    out: dict[str, bool] = {}
    bound: dict[str, int] = {}
    for node in run_nodes(tree):
        for name in _binds(node):
            bound[name] = bound.get(name, 0) + 1
    served = any(
        isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == "__getattr__"
        for s in tree.body
    )
    for stmt in tree.body:
        target, value = assignment(stmt)
        if target is not None and value is not None and _literal(value):
            out[target] = bool(value.value)  # type: ignore[attr-defined]  # a Constant
        if served and isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            table = stmt.value
            if isinstance(table, ast.Dict):
                for key, entry in zip(table.keys, table.values, strict=True):
                    if (
                        isinstance(key, ast.Constant)
                        and isinstance(key.value, str)
                        and isinstance(entry, ast.Lambda)
                        and _literal(entry.body)
                        and key.value not in bound
                    ):
                        out[key.value] = bool(entry.body.value)  # type: ignore[attr-defined]
    return {n: v for n, v in out.items() if bound.get(n, 0) <= 1}


def run_nodes(tree: ast.Module) -> list[ast.AST]:
    """Every node of the module, less the ``if TYPE_CHECKING:`` blocks (they never run)."""
    out: list[ast.AST] = []
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and _type_checking(node.test):
            todo.extend(node.orelse)
            continue
        out.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return out


def _type_checking(test: ast.expr) -> bool:
    return dotted(test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def assignment(stmt: ast.stmt) -> tuple[str | None, ast.expr | None]:
    """``(name, value)`` of ``name = value`` / ``name: T = value`` (None where not one name)."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target = stmt.targets[0]
        return (target.id if isinstance(target, ast.Name) else None), stmt.value
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return stmt.target.id, stmt.value
    return None, None


def _literal(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, (bool, int, str, type(None)))


def _binds(node: ast.AST) -> list[str]:
    """The names a node binds or declares global (each counts as a binding)."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        return [node.id]
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return list(node.names) * 2  # a function that rebinds it: never fixed
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in node.names]
    return []


def stored_elsewhere(api: HostAPI, module: str, name: str) -> bool:
    """Some host file stores ``<something>.name = ...`` or ``setattr(..., "name", ...)``."""

    def mine() -> bool:
        store = re.compile(rf"\.{re.escape(name)}\s*=[^=]|setattr\([^)]*[\"']{re.escape(name)}")
        return any(store.search(text) for text in api.source_texts().values())

    return bool(api.fact(f"flag-stored:{FORMAT}:{module}.{name}", mine))
