"""A module ``__getattr__`` read as data: what it does for one name, without running it.

The body is interpreted for one concrete name at a time. Values are constants (strings, tables,
tuples), host modules and objects, the module's own namespace, or unknown. Conditions on the
name (``name == "x"``, ``name in TABLE``, ``f"{module}:{name}" in MOVED``, ``TABLE.get(name)``)
are decided; a condition that cannot be decided forks the walk, and the outcome is kept only
when every path agrees. Tables are read where the host defines them: literals in the module,
module constants, names imported from another host module, dicts built with ``**``.

Outcomes: *present* (returned silently), *deprecated* (returned after a warning, with the
warning's text), *removed* (raised under a test that picks this name out, with the message),
*absent* (the catch-all raise), *unknown*. Calls to other host functions are followed a few
levels deep: a helper that warns, a factory that returns the real ``__getattr__`` (pydantic's
``__getattr__ = getattr_migration(__name__)``).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol


class HostAPI(Protocol):
    """What reading a host's source needs (:class:`driftcheck.host.api.HostAPI` has it)."""

    tree: Any

    def fact(self, key: str, compute: Callable[[], object]) -> object: ...
    def module_text(self, dotted: str) -> str | None: ...
    def module(self, dotted: str) -> Any: ...
    def owns(self, dotted: str) -> bool: ...
    def resolve(self, path: str) -> Any: ...
    def exports(self, module: str) -> Any: ...
    def _ast(self, modpath: str, text: str) -> ast.Module | None: ...


PRESENT, DEPRECATED, REMOVED, ABSENT, UNDECIDED = (
    "present",
    "deprecated",
    "removed",
    "absent",
    "unknown",
)
_MAX_PATHS = 48
_MAX_DEPTH = 4


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


class _Unknown:
    def __repr__(self) -> str:
        return "?"


UNK: Any = _Unknown()


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
class _Ref:
    """A name another host module binds, read when used (``from .x import TABLE``)."""

    module: str
    name: str


@dataclass(frozen=True)
class Fn:
    """A function defined in the host, with the module it lives in and its closure."""

    node: ast.FunctionDef | ast.AsyncFunctionDef
    module: str
    closure: tuple[tuple[str, Any], ...] = ()


class _KeyMiss(Exception):
    """``TABLE[name]`` for a name the table lacks (a ``KeyError`` at run time)."""


class _Abort(Exception):
    """Too many paths, too deep: the outcome is unknown."""


@dataclass
class _Path:
    env: dict[str, Any]
    warnings: list[tuple[str, int]] = field(default_factory=list)
    picked: bool = False  # passed a test that singles out the name


@dataclass(frozen=True)
class _End:
    status: str
    message: str = ""
    line: int = 0
    returns: str | None = None


def serve(api: HostAPI, module: str, name: str) -> Served:
    """What ``module.__getattr__(name)`` does, read from the host's source."""
    key = f"served:{module}:{name}"
    row = api.fact(key, lambda: _serve_row(api, module, name))
    status, message, file, line, returns = row  # type: ignore[misc]
    return Served(status, f"{module}.{name}", message, file, line, returns)


def _serve_row(api: HostAPI, module: str, name: str) -> list:
    interp = _Interpreter(api, module)
    fn = interp.getattr_function()
    if fn is None:
        return [UNDECIDED, "", "", 0, None]
    try:
        end = interp.call(fn, [name], 0)
    except (_Abort, RecursionError):
        end = _End(UNDECIDED)
    file = interp.file_of(fn.module) if isinstance(fn, Fn) else ""
    return [end.status, end.message, file, end.line, end.returns]


class _Interpreter:
    def __init__(self, api: HostAPI, module: str) -> None:
        self.api = api
        self.module = module
        self.paths = 0

    # -- finding the function ----------------------------------------------------------------
    def getattr_function(self) -> Fn | None:
        value = self.global_value(self.module, "__getattr__", 0)
        if isinstance(value, Fn):
            return value
        return None

    def file_of(self, module: str) -> str:
        return self.api.tree.module_file(module) or ""

    def tree(self, module: str) -> ast.Module | None:
        text = self.api.module_text(module)
        return self.api._ast(module, text) if text is not None else None

    def global_value(self, module: str, name: str, depth: int) -> Any:
        """The value a module-level name holds once the module has run (read in order)."""
        env = self.module_env(module)
        if name in env:
            value = env[name]
            if isinstance(value, _Ref):
                if depth > _MAX_DEPTH:
                    return UNK
                return self.global_value(value.module, value.name, depth + 1)
            return value
        if self.api.owns(module) and self.api.module(f"{module}.{name}") is not None:
            return Mod(f"{module}.{name}")
        return UNK

    def module_env(self, module: str) -> dict[str, Any]:
        """Every module-level binding, evaluated statement by statement (cached per module)."""
        cache = self.api.__dict__.setdefault("_served_envs", {})
        if module in cache:
            return cache[module]
        env: dict[str, Any] = {}
        cache[module] = env  # a cycle sees what is bound so far
        tree = self.tree(module) if self.api.owns(module) else None
        if tree is None:
            return env
        path = _Path(env)
        for stmt in _module_statements(tree.body):
            try:
                self.module_statement(stmt, path, module)
            except (_Abort, RecursionError, _KeyMiss):
                continue
        return env

    def module_statement(self, stmt: ast.stmt, path: _Path, module: str) -> None:
        env = path.env
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            env[stmt.name] = Fn(stmt, module)
        elif isinstance(stmt, ast.ClassDef):
            env[stmt.name] = Obj(f"{module}.{stmt.name}")
        elif isinstance(stmt, ast.Assign):
            value = self.expr(stmt.value, path, module, 1)
            for target in stmt.targets:
                if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                    table = env.get(target.value.id)
                    key = self.expr(target.slice, path, module, 1)
                    env[target.value.id] = (
                        {**table, key: value} if isinstance(table, dict) and key is not UNK else UNK
                    )
                else:
                    _bind(env, target, value)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            _bind(env, stmt.target, self.expr(stmt.value, path, module, 1))
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            old, new = env.get(stmt.target.id, UNK), self.expr(stmt.value, path, module, 1)
            env[stmt.target.id] = _combined(old, new)
        elif isinstance(stmt, ast.Delete):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    env.pop(target.id, None)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            func = stmt.value.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                name = func.value.id
                if name in env:
                    args = [self.expr(a, path, module, 1) for a in stmt.value.args]
                    env[name] = _mutated(env[name], func.attr, args)
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                local = alias.asname or alias.name.split(".")[0]
                env[local] = Mod(alias.name if alias.asname else local)
        elif isinstance(stmt, ast.ImportFrom):
            source = _absolute(module, stmt.module, stmt.level, self.api)
            for alias in stmt.names:
                if alias.name == "*":
                    continue
                local = alias.asname or alias.name
                if source is None:
                    env[local] = UNK
                elif not self.api.owns(source):
                    env[local] = Obj(f"{source}.{alias.name}")
                elif self.api.module(f"{source}.{alias.name}") is not None:
                    env[local] = Mod(f"{source}.{alias.name}")
                else:
                    env[local] = _Ref(source, alias.name)

    # -- calls -------------------------------------------------------------------------------
    def call(self, fn: Fn, args: list[Any], depth: int, kwargs: dict | None = None) -> _End:
        if depth > _MAX_DEPTH:
            raise _Abort
        env = dict(fn.closure)
        params = [*fn.node.args.posonlyargs, *fn.node.args.args]
        defaults = fn.node.args.defaults
        for i, param in enumerate(params):
            if i < len(args):
                env[param.arg] = args[i]
            elif kwargs and param.arg in kwargs:
                env[param.arg] = kwargs[param.arg]
            else:
                j = i - (len(params) - len(defaults))
                env[param.arg] = (
                    self.expr(defaults[j], _Path({}), fn.module, depth) if j >= 0 else UNK
                )
        for param in fn.node.args.kwonlyargs:
            env[param.arg] = (kwargs or {}).get(param.arg, UNK)
        try:
            ends = self.block(list(fn.node.body), _Path(env), fn, depth)
        except _KeyMiss:
            return _End(UNDECIDED)
        return _merge(ends)

    def block(self, stmts: list[ast.stmt], path: _Path, fn: Fn, depth: int) -> list[_End]:
        """Run ``stmts``; every way they can end (falling off the end returns None)."""
        i = 0
        while i < len(stmts):
            stmt = stmts[i]
            rest = stmts[i + 1 :]
            if isinstance(stmt, ast.Return):
                value = self.expr(stmt.value, path, fn.module, depth) if stmt.value else None
                return [self.returned(value, path, stmt.lineno)]
            if isinstance(stmt, ast.Raise):
                return [self.raised(stmt, path, fn.module, depth)]
            if isinstance(stmt, ast.If):
                test = self.truth(stmt.test, path, fn.module, depth)
                picks = _picks(stmt.test, path)
                if test is True:
                    return self.block([*stmt.body, *rest], _pick(path, picks), fn, depth)
                if test is False:
                    return self.block([*stmt.orelse, *rest], path, fn, depth)
                self.paths += 1
                if self.paths > _MAX_PATHS:
                    raise _Abort
                left = self.block([*stmt.body, *rest], _fork(path, picks), fn, depth)
                right = self.block([*stmt.orelse, *rest], _fork(path, False), fn, depth)
                return left + right
            if isinstance(stmt, ast.Try):
                handler = next((h for h in stmt.handlers if _catches_lookup(h)), None)
                try:
                    body = [*stmt.body, *stmt.orelse, *stmt.finalbody, *rest]
                    return self.block(body, _fork(path, False), fn, depth)
                except _KeyMiss:
                    if handler is None:
                        raise
                    after = [*handler.body, *stmt.finalbody, *rest]
                    return self.block(after, _fork(path, False), fn, depth)
            if isinstance(stmt, ast.With | ast.AsyncWith):
                stmts = [*stmt.body, *rest]
                i = 0
                continue
            if isinstance(stmt, ast.For | ast.AsyncFor | ast.While | ast.Match):
                if any(isinstance(n, ast.Return | ast.Raise) for n in ast.walk(stmt)):
                    return [_End(UNDECIDED)]
            elif isinstance(stmt, ast.Assign):
                value = self.expr(stmt.value, path, fn.module, depth)
                for target in stmt.targets:
                    _bind(path.env, target, value)
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                _bind(path.env, stmt.target, self.expr(stmt.value, path, fn.module, depth))
            elif isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    if alias.asname:
                        path.env[alias.asname] = Mod(alias.name)
                    else:
                        top = alias.name.split(".")[0]
                        path.env[top] = Mod(top)
            elif isinstance(stmt, ast.ImportFrom):
                source = _absolute(fn.module, stmt.module, stmt.level, self.api)
                for alias in stmt.names:
                    local = alias.asname or alias.name
                    if source is None or not self.api.owns(source):
                        path.env[local] = Mod(f"{source}.{alias.name}") if source else UNK
                    elif self.api.module(f"{source}.{alias.name}") is not None:
                        path.env[local] = Mod(f"{source}.{alias.name}")
                    else:
                        got = self.global_value(source, alias.name, depth + 1)
                        path.env[local] = got if got is not UNK else Obj(f"{source}.{alias.name}")
            elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                path.env[stmt.name] = Fn(stmt, fn.module, tuple(path.env.items()))
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                self.effect(stmt.value, path, fn.module, depth)
            i += 1
        return [self.returned(None, path, 0)]

    def returned(self, value: Any, path: _Path, line: int) -> _End:
        returns = value.path if isinstance(value, Obj | Mod) else None
        if isinstance(value, _Raised):
            return value.end
        if isinstance(value, _End):  # a call whose outcome we followed
            if value.status in (DEPRECATED, PRESENT) and path.warnings:
                message, wline = path.warnings[0]
                return _End(DEPRECATED, message, wline, value.returns)
            return value
        if path.warnings:
            message, wline = path.warnings[0]
            return _End(DEPRECATED, message, wline, returns)
        return _End(PRESENT, "", line, returns)

    def raised(self, stmt: ast.Raise, path: _Path, module: str, depth: int) -> _End:
        message = ""
        exc = stmt.exc
        if isinstance(exc, ast.Call) and exc.args:
            text = self.expr(exc.args[0], path, module, depth)
            message = text if isinstance(text, str) else _text_of(exc.args[0])
        if path.picked:
            return _End(REMOVED, message, stmt.lineno)
        return _End(ABSENT, message, stmt.lineno)

    def effect(self, call: ast.Call, path: _Path, module: str, depth: int) -> None:
        """A call made for its effect: a warning, or a host helper that warns."""
        head = _dotted(call.func)
        if head.rsplit(".", 1)[-1] in ("warn", "warn_explicit") and call.args:
            text = self.expr(call.args[0], path, module, depth)
            message = text if isinstance(text, str) else _text_of(call.args[0])
            path.warnings.append((message, call.lineno))
            return
        fn = self.expr(call.func, path, module, depth)
        if isinstance(fn, Fn) and depth < _MAX_DEPTH:
            args = [self.expr(a, path, module, depth) for a in call.args]
            try:
                inner = self.block(list(fn.node.body), _Path(_params(fn, args)), fn, depth + 1)
            except _KeyMiss:
                return
            for end in inner:
                if end.status == DEPRECATED and end.message:
                    path.warnings.append((end.message, call.lineno))
                    return

    # -- expressions -------------------------------------------------------------------------
    def truth(self, node: ast.expr, path: _Path, module: str, depth: int) -> bool | None:
        value = self.expr(node, path, module, depth)
        if value is UNK or isinstance(value, Fn | Obj | Mod | Namespace):
            return None if value is UNK else True
        try:
            return bool(value)
        except Exception:
            return None

    def expr(self, node: ast.expr | None, path: _Path, module: str, depth: int) -> Any:
        if node is None:
            return None
        try:
            return self._expr(node, path, module, depth)
        except (_Abort, RecursionError, _KeyMiss):
            raise
        except Exception:
            return UNK

    def _expr(self, node: ast.expr, path: _Path, module: str, depth: int) -> Any:
        env = path.env
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in env:
                value = env[node.id]
                if isinstance(value, _Ref):
                    got = self.global_value(value.module, value.name, depth + 1)
                    return got if got is not UNK else Obj(f"{value.module}.{value.name}")
                return value
            if node.id == "__name__":
                return module
            if node.id in ("True", "False", "None"):
                return {"True": True, "False": False, "None": None}[node.id]
            return self.global_value(module, node.id, depth)
        if isinstance(node, ast.JoinedStr):
            parts = []
            for piece in node.values:
                value = (
                    self.expr(piece.value, path, module, depth)
                    if isinstance(piece, ast.FormattedValue)
                    else piece.value  # type: ignore[attr-defined]
                )
                if isinstance(piece, ast.FormattedValue) and piece.conversion == ord("r"):
                    value = repr(value) if isinstance(value, str) else value
                if value is UNK or not isinstance(value, str | int | float):
                    return UNK
                parts.append(str(value))
            return "".join(parts)
        if isinstance(node, ast.Dict):
            out: dict = {}
            for k, v in zip(node.keys, node.values, strict=True):
                if k is None:
                    merged = self.expr(v, path, module, depth)
                    if not isinstance(merged, dict):
                        return UNK
                    out.update(merged)
                else:
                    key = self.expr(k, path, module, depth)
                    if key is UNK:
                        return UNK
                    out[key] = self.expr(v, path, module, depth)
            return out
        if isinstance(node, ast.Set | ast.List | ast.Tuple):
            items = []
            for e in node.elts:
                if isinstance(e, ast.Starred):
                    inner = self.expr(e.value, path, module, depth)
                    if not isinstance(inner, tuple | list | set | frozenset | dict):
                        return UNK
                    items.extend(inner)
                else:
                    items.append(self.expr(e, path, module, depth))
            if isinstance(node, ast.Set):
                return frozenset(i for i in items if i is not UNK) if UNK not in items else UNK
            return tuple(items)
        if isinstance(node, ast.BinOp):
            left = self.expr(node.left, path, module, depth)
            right = self.expr(node.right, path, module, depth)
            if left is UNK or right is UNK:
                return UNK
            if isinstance(node.op, ast.Add):
                return left + right
            if isinstance(node.op, ast.BitOr) and isinstance(left, dict | frozenset):
                return left | right
            if isinstance(node.op, ast.Mod) and isinstance(left, str):
                return left % right
            return UNK
        if isinstance(node, ast.BoolOp):
            values = [self.truth(v, path, module, depth) for v in node.values]
            if isinstance(node.op, ast.And):
                return False if False in values else (None if None in values else True)
            return True if True in values else (None if None in values else False)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            got = self.truth(node.operand, path, module, depth)
            return UNK if got is None else not got
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            return self.compare(node, path, module, depth)
        if isinstance(node, ast.IfExp):
            test = self.truth(node.test, path, module, depth)
            if test is None:
                return UNK
            return self.expr(node.body if test else node.orelse, path, module, depth)
        if isinstance(node, ast.Subscript):
            base = self.expr(node.value, path, module, depth)
            key = self.expr(node.slice, path, module, depth)
            if isinstance(base, dict) and key is not UNK:
                if key not in base:
                    raise _KeyMiss
                path.picked = True  # ``TABLE[name]`` went through: the table lists the name
                return base[key]
            if isinstance(base, Namespace | Obj | Mod):
                return UNK
            if isinstance(base, tuple) and isinstance(key, int):
                return base[key]
            return UNK
        if isinstance(node, ast.DictComp | ast.ListComp | ast.SetComp):
            return self.comprehension(node, path, module, depth)
        if isinstance(node, ast.Attribute):
            return self.attribute(node, path, module, depth)
        if isinstance(node, ast.Call):
            return self.call_expr(node, path, module, depth)
        return UNK

    def comprehension(self, node: ast.expr, path: _Path, module: str, depth: int) -> Any:
        gens = node.generators  # type: ignore[attr-defined]
        if len(gens) != 1:
            return UNK
        gen = gens[0]
        items = self.expr(gen.iter, path, module, depth)
        if not isinstance(items, tuple | list | frozenset | set | dict):
            return UNK
        out: list = []
        for item in items:
            inner = _Path({**path.env}, path.warnings, path.picked)
            _bind(inner.env, gen.target, item)
            if any(self.truth(c, inner, module, depth) is not True for c in gen.ifs):
                continue
            if isinstance(node, ast.DictComp):
                key = self.expr(node.key, inner, module, depth)
                if key is UNK:
                    return UNK
                out.append((key, self.expr(node.value, inner, module, depth)))
            else:
                out.append(self.expr(node.elt, inner, module, depth))  # type: ignore[attr-defined]
        if isinstance(node, ast.DictComp):
            return dict(out)
        return frozenset(out) if isinstance(node, ast.SetComp) else tuple(out)

    def attribute(self, node: ast.Attribute, path: _Path, module: str, depth: int) -> Any:
        if node.attr == "__dict__" and isinstance(node.value, ast.Subscript):
            if _dotted(node.value.value) == "sys.modules":
                target = self.expr(node.value.slice, path, module, depth)
                if isinstance(target, str):
                    return Namespace(target)
        if node.attr == "parent" and _dotted(node.value) == "__spec__":
            return module.rsplit(".", 1)[0] if self.api.tree.is_package(module) else module
        base = self.expr(node.value, path, module, depth)
        if isinstance(base, Mod) and node.attr == "__all__" and self.api.owns(base.path):
            listed = self.api.exports(base.path)
            return tuple(sorted(listed.names)) if listed and listed.complete else UNK
        if isinstance(base, Mod):
            if self.api.owns(base.path):
                got = self.global_value(base.path, node.attr, depth + 1)
                return got if got is not UNK else Obj(f"{base.path}.{node.attr}")
            return Obj(f"{base.path}.{node.attr}")
        if isinstance(base, Obj):
            return Obj(f"{base.path}.{node.attr}")
        if isinstance(base, dict) and node.attr in ("keys", "get", "values", "items"):
            return ("method", node.attr, base)
        if isinstance(base, str) and node.attr in ("startswith", "endswith", "format"):
            return ("method", node.attr, base)
        return UNK

    def call_expr(self, node: ast.Call, path: _Path, module: str, depth: int) -> Any:
        head = _dotted(node.func)
        args = [self.expr(a, path, module, depth) for a in node.args]
        kwargs = {k.arg: self.expr(k.value, path, module, depth) for k in node.keywords if k.arg}
        last = head.rsplit(".", 1)[-1]
        if head in ("globals", "vars") and not args:
            return Namespace(module)
        if head == "object" and not args:
            return _Sentinel()  # ``sentinel = object()``: only itself ``is`` it
        if last in ("import_module", "import_string", "import_object") and args:
            return self.imported(args[0], kwargs.get("package"), module)
        if head == "getattr" and len(args) >= 2 and isinstance(args[1], str):
            return self.getattr_of(args[0], args[1], args[2] if len(args) > 2 else _NO)
        if head in ("set", "frozenset", "tuple", "list", "dict", "sorted") and len(args) == 1:
            inner = args[0]
            if isinstance(inner, tuple | list | frozenset | set | dict):
                return frozenset(inner) if head in ("set", "frozenset") else inner
            return UNK
        if head in ("str", "repr") and len(args) == 1 and isinstance(args[0], str):
            return args[0] if head == "str" else repr(args[0])
        func = self.expr(node.func, path, module, depth)
        if isinstance(func, tuple) and len(func) == 3 and func[0] == "method":
            _, meth, base = func
            if meth == "keys":
                return frozenset(base)
            if meth == "get" and args and args[0] is not UNK:
                return base.get(args[0], args[1] if len(args) > 1 else None)
            if meth in ("startswith", "endswith") and args and isinstance(args[0], str | tuple):
                return getattr(base, meth)(args[0])
            if meth == "format" and UNK not in args and UNK not in kwargs.values():
                return base.format(*args, **kwargs)
            return UNK
        if isinstance(func, Fn):
            end = self.call(func, args, depth + 1, kwargs)
            if end.status == PRESENT and end.returns is None and _returns_inner(func.node):
                return self.returned_function(func, args, kwargs, depth)
            if end.status in (REMOVED, ABSENT):
                return _Raised(end)
            return end
        return UNK

    def returned_function(self, factory: Fn, args: list, kwargs: dict, depth: int) -> Any:
        """The inner function a factory returns, with the factory's arguments as closure."""
        env = _params(factory, args, kwargs)
        for stmt in factory.node.body:
            if isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Name):
                for inner in factory.node.body:
                    if (
                        isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef)
                        and inner.name == stmt.value.id
                    ):
                        return Fn(inner, factory.module, tuple(env.items()))
        return UNK

    def imported(self, spec: Any, package: Any, module: str) -> Any:
        if not isinstance(spec, str):
            return UNK
        if spec.startswith(".") and isinstance(package, str):
            level = len(spec) - len(spec.lstrip("."))
            base = package.split(".")
            base = base[: len(base) - (level - 1)] if level > 1 else base
            spec = ".".join([*base, spec.lstrip(".")]) if spec.strip(".") else ".".join(base)
        dotted = spec.replace(":", ".")
        if self.api.module(dotted) is not None:
            return Mod(dotted)
        return Obj(dotted)

    def getattr_of(self, base: Any, name: str, default: Any) -> Any:
        if isinstance(base, Mod | Obj):
            if not self.api.owns(base.path):
                return Obj(f"{base.path}.{name}")
            got = self.api.resolve(f"{base.path}.{name}")
            if got is None:
                return default if default is not _NO else UNK
            return Obj(f"{base.path}.{name}")
        return UNK

    def compare(self, node: ast.Compare, path: _Path, module: str, depth: int) -> Any:
        op = node.ops[0]
        left = self.expr(node.left, path, module, depth)
        right = self.expr(node.comparators[0], path, module, depth)
        if isinstance(op, ast.Is | ast.IsNot):
            if left is UNK or right is UNK:
                return UNK
            if isinstance(left, _End | _Raised):
                return UNK
            same = left is right or left == right and isinstance(left, Obj | Mod)
            return same if isinstance(op, ast.Is) else not same
        if isinstance(op, ast.In | ast.NotIn):
            if isinstance(right, Namespace):
                # Reached only for names the module does not bind (lookups try them first).
                inside = False
            elif left is UNK or not isinstance(right, dict | frozenset | set | tuple | list | str):
                return UNK
            elif UNK in (right if not isinstance(right, str | dict) else ()):
                return UNK if left not in right else isinstance(op, ast.In)
            else:
                inside = left in right
            return inside if isinstance(op, ast.In) else not inside
        if left is UNK or right is UNK:
            return UNK
        if isinstance(op, ast.Eq):
            return left == right
        if isinstance(op, ast.NotEq):
            return left != right
        return UNK


_NO = object()


class _Sentinel:
    """A fresh ``object()``."""


@dataclass(frozen=True)
class _Raised:
    end: _End


def _combined(old: Any, new: Any) -> Any:
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


def _mutated(value: Any, method: str, args: list) -> Any:
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


def _merge(ends: list[_End]) -> _End:
    statuses = {e.status for e in ends}
    if len(statuses) == 1:
        return ends[0]
    if statuses == {ABSENT, REMOVED}:
        return _End(UNDECIDED)
    return _End(UNDECIDED)


def _catches_lookup(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(_dotted(n) in ("KeyError", "LookupError", "Exception") for n in names)


def _picks(test: ast.expr, path: _Path) -> bool:
    """Whether passing ``test`` singles the name out (``==``, ``in``: not ``!=``/``not in``)."""
    for node in ast.walk(test):
        if isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.Eq | ast.In):
            return True
        if isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.IsNot):
            return True  # ``x = TABLE.get(name); if x is not None``
    return False


def _pick(path: _Path, picks: bool) -> _Path:
    if picks:
        path.picked = True
    return path


def _fork(path: _Path, picks: bool) -> _Path:
    return _Path(dict(path.env), list(path.warnings), path.picked or picks)


def _bind(env: dict[str, Any], target: ast.expr, value: Any) -> None:
    if isinstance(target, ast.Name):
        env[target.id] = value
    elif isinstance(target, ast.Tuple | ast.List):
        for i, elt in enumerate(target.elts):
            item = value[i] if isinstance(value, tuple) and i < len(value) else UNK
            _bind(env, elt, item)


def _params(fn: Fn, args: list, kwargs: dict | None = None) -> dict[str, Any]:
    env = dict(fn.closure)
    params = [*fn.node.args.posonlyargs, *fn.node.args.args]
    for i, param in enumerate(params):
        env[param.arg] = args[i] if i < len(args) else (kwargs or {}).get(param.arg, UNK)
    return env


def _returns_inner(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    inner = {s.name for s in node.body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)}
    return any(
        isinstance(s, ast.Return) and isinstance(s.value, ast.Name) and s.value.id in inner
        for s in node.body
    )


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head else ""
    return ""


def _text_of(node: ast.expr) -> str:
    """The literal text of a message we cannot evaluate whole (unknown parts as ``...``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            p.value if isinstance(p, ast.Constant) else "..."  # type: ignore[misc]
            for p in node.values
        )
    parts = [
        n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]
    return " ".join(parts)


def _module_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """Module-level statements in order, through ``if``/``try``/``with`` blocks."""
    out: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, ast.If):
            if _dotted(stmt.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
                out.extend(_module_statements(stmt.orelse))
                continue
            out.extend(_module_statements(stmt.body))
            out.extend(_module_statements(stmt.orelse))
        elif isinstance(stmt, ast.Try):
            out.extend(_module_statements(stmt.body))
            for handler in stmt.handlers:
                out.extend(_module_statements(handler.body))
            out.extend(_module_statements(stmt.orelse + stmt.finalbody))
        elif isinstance(stmt, ast.With):
            out.extend(_module_statements(stmt.body))
        else:
            out.append(stmt)
    return out


def _absolute(module: str, target: str | None, level: int, api: HostAPI) -> str | None:
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
