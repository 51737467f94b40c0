"""The values a module ``__getattr__`` is interpreted with (see :mod:`driftcheck.host.served`):
constants, host modules and objects, the module's own namespace, functions, unknown; the walk's
state and its outcomes; and the small pure helpers the interpreter shares."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, cast


class HostAPI(Protocol):
    """What reading a host's source needs (:class:`driftcheck.host.api.HostAPI` has it)."""

    tree: Any

    def fact(self, key: str, compute: Callable[[], object]) -> Any: ...
    def module_text(self, dotted: str) -> str | None: ...
    def module(self, dotted: str) -> Any: ...
    def owns(self, dotted: str) -> bool: ...
    def resolve(self, path: str, _seen: frozenset[str] = ..., imported: int = ...) -> Any: ...
    def member(
        self, owner: Any, name: str, _seen: frozenset[str] = ..., namespace_only: bool = ...
    ) -> Any: ...
    def exports(self, module: str) -> Any: ...
    def stub(self, dotted: str) -> Any: ...
    def stub_file(self, dotted: str) -> str | None: ...
    def _ast(self, modpath: str, text: str) -> ast.Module | None: ...


PRESENT, DEPRECATED, REMOVED, ABSENT, UNDECIDED = (
    "present",
    "deprecated",
    "removed",
    "absent",
    "unknown",
)
MAX_PATHS = 48
MAX_DEPTH = 4


@dataclass(frozen=True)
class Served:
    """What a module's ``__getattr__`` does for one name."""

    status: str
    path: str
    message: str = ""
    file: str = ""
    line: int = 0
    returns: str | None = None  # the host object served, when the body names it

    def __repr__(self) -> str:
        return f"Served({self.status}, {self.path})"


class Unknown:
    def __repr__(self) -> str:
        return "?"


UNK: Any = Unknown()


@dataclass(frozen=True)
class Mod:
    """A host module (a value inside the interpreted body)."""

    path: str


@dataclass(frozen=True)
class Obj:
    """A host object by its dotted path."""

    path: str


@dataclass(frozen=True)
class Namespace:
    """The module's own globals (``globals()``, ``sys.modules[__name__].__dict__``)."""

    module: str


@dataclass(frozen=True)
class Ref:
    """A name another host module binds, read when used (``from .x import TABLE``)."""

    module: str
    name: str


@dataclass(frozen=True)
class Fn:
    """A function defined in the host, with the module it lives in and its closure."""

    node: ast.FunctionDef | ast.AsyncFunctionDef
    module: str
    closure: tuple[tuple[str, Any], ...] = ()


class KeyMiss(Exception):
    """``TABLE[name]`` for a name the table lacks (a ``KeyError`` at run time)."""


class Abort(Exception):
    """Too many paths, too deep: the outcome is unknown."""


@dataclass
class Trace:
    env: dict[str, Any]
    warnings: list[tuple[str, int]] = field(default_factory=list)
    picked: bool = False  # passed a test that singles out the name


@dataclass(frozen=True)
class End:
    status: str
    message: str = ""
    line: int = 0
    returns: str | None = None


NO_DEFAULT = object()


class Sentinel:
    """A fresh ``object()``."""


@dataclass(frozen=True)
class Raised:
    end: End


def combined(old: Any, new: Any) -> Any:
    """``old += new`` / ``old |= new`` on concrete tables."""
    if old is UNK or new is UNK:
        return UNK
    if isinstance(old, tuple | list) and isinstance(new, tuple | list):
        return tuple(old) + tuple(new)
    if isinstance(old, dict) and isinstance(new, dict):
        return {**old, **new}
    if isinstance(old, frozenset | set) and isinstance(new, tuple | list | frozenset | set):
        return frozenset(old) | frozenset(new)
    return UNK


def mutated(value: Any, method: str, args: list) -> Any:
    """A module-level table after ``TABLE.update(...)``, ``.add``, ``.append`` ..."""
    if value is UNK or UNK in args:
        return UNK
    if isinstance(value, dict) and method == "update" and len(args) == 1:
        return {**value, **args[0]} if isinstance(args[0], dict) else UNK
    if isinstance(value, dict) and method == "pop" and args:
        return {k: v for k, v in value.items() if k != args[0]}
    if isinstance(value, tuple | list) and method in ("append", "extend", "remove"):
        if method == "append" and len(args) == 1:
            return (*value, args[0])
        if method == "extend" and len(args) == 1 and isinstance(args[0], tuple | list):
            return (*value, *args[0])
        if method == "remove" and len(args) == 1:
            out = list(value)
            if args[0] in out:
                out.remove(args[0])
            return tuple(out)
    if isinstance(value, frozenset | set) and method in ("add", "update", "discard"):
        if method == "add" and len(args) == 1:
            return frozenset(value) | {args[0]}
        if method == "update" and len(args) == 1 and isinstance(args[0], tuple | frozenset):
            return frozenset(value) | frozenset(args[0])
        if method == "discard" and len(args) == 1:
            return frozenset(value) - {args[0]}
    return value if method in ("sort", "reverse", "copy") else UNK


def merge(ends: list[End]) -> End:
    statuses = {e.status for e in ends}
    if len(statuses) == 1:
        return ends[0]
    if statuses == {ABSENT, REMOVED}:
        return End(UNDECIDED)
    return End(UNDECIDED)


def catches_lookup(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(dotted(n) in ("KeyError", "LookupError", "Exception") for n in names)


def picks(test: ast.expr, path: Trace) -> bool:
    """Whether passing ``test`` singles the name out (``==``, ``in``: not ``!=``/``not in``)."""
    for node in ast.walk(test):
        if isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.Eq | ast.In):
            return True
        if isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.IsNot):
            return True  # ``x = TABLE.get(name); if x is not None``
    return False


def pick(path: Trace, picks: bool) -> Trace:
    if picks:
        path.picked = True
    return path


def fork(path: Trace, picks: bool) -> Trace:
    return Trace(dict(path.env), list(path.warnings), path.picked or picks)


def bind(env: dict[str, Any], target: ast.expr, value: Any) -> None:
    if isinstance(target, ast.Name):
        env[target.id] = value
    elif isinstance(target, ast.Tuple | ast.List):
        for i, elt in enumerate(target.elts):
            item = value[i] if isinstance(value, tuple) and i < len(value) else UNK
            bind(env, elt, item)


def params_env(fn: Fn, args: list, kwargs: dict | None = None) -> dict[str, Any]:
    env = dict(fn.closure)
    params = [*fn.node.args.posonlyargs, *fn.node.args.args]
    for i, param in enumerate(params):
        env[param.arg] = args[i] if i < len(args) else (kwargs or {}).get(param.arg, UNK)
    return env


def returns_inner(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    inner = {s.name for s in node.body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)}
    return any(
        isinstance(s, ast.Return) and isinstance(s.value, ast.Name) and s.value.id in inner
        for s in node.body
    )


def dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = dotted(node.value)
        return f"{head}.{node.attr}" if head else ""
    return ""


def text_of(node: ast.expr) -> str:
    """The literal text of a message we cannot evaluate whole (unknown parts as ``...``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        # An f-string's literal pieces are str constants.
        return "".join(
            cast(str, p.value) if isinstance(p, ast.Constant) else "..." for p in node.values
        )
    parts = [
        n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]
    return " ".join(parts)


def module_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """Module-level statements in order, through ``if``/``try``/``with`` blocks."""
    out: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, ast.If):
            if dotted(stmt.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
                out.extend(module_statements(stmt.orelse))
                continue
            out.extend(module_statements(stmt.body))
            out.extend(module_statements(stmt.orelse))
        elif isinstance(stmt, ast.Try):
            out.extend(module_statements(stmt.body))
            for handler in stmt.handlers:
                out.extend(module_statements(handler.body))
            out.extend(module_statements(stmt.orelse + stmt.finalbody))
        elif isinstance(stmt, ast.With):
            out.extend(module_statements(stmt.body))
        else:
            out.append(stmt)
    return out


def absolute(module: str, target: str | None, level: int, api: HostAPI) -> str | None:
    """The absolute module ``from <level dots><target> import`` names inside ``module``."""
    if level == 0:
        return target
    package = module if api.tree.is_package(module) else module.rsplit(".", 1)[0]
    parts = package.split(".")
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    if not parts:
        return None
    return ".".join([*parts, target]) if target else ".".join(parts)
