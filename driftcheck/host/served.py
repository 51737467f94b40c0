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
from typing import Any

from driftcheck.host.evaluate import Expressions
from driftcheck.host.values import (
    ABSENT,
    DEPRECATED,
    MAX_DEPTH,
    MAX_PATHS,
    PRESENT,
    REMOVED,
    UNDECIDED,
    UNK,
    Abort,
    End,
    Fn,
    HostAPI,
    KeyMiss,
    Mod,
    Obj,
    Raised,
    Ref,
    Served,
    Trace,
    absolute,
    bind,
    catches_lookup,
    combined,
    dotted,
    fork,
    merge,
    module_statements,
    mutated,
    params_env,
    pick,
    picks,
    text_of,
)


def serve(api: HostAPI, module: str, name: str) -> Served:
    """What ``module.__getattr__(name)`` does, read from the host's source."""
    key = f"served:{module}:{name}"
    row = api.fact(key, lambda: _serve_row(api, module, name))
    status, message, file, line, returns = row
    return Served(status, f"{module}.{name}", message, file, line, returns)


def _serve_row(api: HostAPI, module: str, name: str) -> list:
    interp = Interpreter(api, module)
    fn = interp.getattr_function()
    if fn is None:
        return [UNDECIDED, "", "", 0, None]
    try:
        end = interp.call(fn, [name], 0)
    except (Abort, RecursionError):
        end = End(UNDECIDED)
    file = interp.file_of(fn.module) if isinstance(fn, Fn) else ""
    return [end.status, end.message, file, end.line, end.returns]


class Interpreter(Expressions):
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
            if isinstance(value, Ref):
                if depth > MAX_DEPTH:
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
        path = Trace(env)
        for stmt in module_statements(tree.body):
            try:
                self.module_statement(stmt, path, module)
            except (Abort, RecursionError, KeyMiss):
                continue
        return env

    def module_statement(self, stmt: ast.stmt, path: Trace, module: str) -> None:
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
                    bind(env, target, value)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            bind(env, stmt.target, self.expr(stmt.value, path, module, 1))
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            old, new = env.get(stmt.target.id, UNK), self.expr(stmt.value, path, module, 1)
            env[stmt.target.id] = combined(old, new)
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
                    env[name] = mutated(env[name], func.attr, args)
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                local = alias.asname or alias.name.split(".")[0]
                env[local] = Mod(alias.name if alias.asname else local)
        elif isinstance(stmt, ast.ImportFrom):
            source = absolute(module, stmt.module, stmt.level, self.api)
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
                    env[local] = Ref(source, alias.name)

    # -- calls -------------------------------------------------------------------------------
    def call(self, fn: Fn, args: list[Any], depth: int, kwargs: dict | None = None) -> End:
        if depth > MAX_DEPTH:
            raise Abort
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
                    self.expr(defaults[j], Trace({}), fn.module, depth) if j >= 0 else UNK
                )
        for param in fn.node.args.kwonlyargs:
            env[param.arg] = (kwargs or {}).get(param.arg, UNK)
        try:
            ends = self.block(list(fn.node.body), Trace(env), fn, depth)
        except KeyMiss:
            return End(UNDECIDED)
        return merge(ends)

    def block(self, stmts: list[ast.stmt], path: Trace, fn: Fn, depth: int) -> list[End]:
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
                singles = picks(stmt.test, path)
                if test is True:
                    return self.block([*stmt.body, *rest], pick(path, singles), fn, depth)
                if test is False:
                    return self.block([*stmt.orelse, *rest], path, fn, depth)
                self.paths += 1
                if self.paths > MAX_PATHS:
                    raise Abort
                left = self.block([*stmt.body, *rest], fork(path, singles), fn, depth)
                right = self.block([*stmt.orelse, *rest], fork(path, False), fn, depth)
                return left + right
            if isinstance(stmt, ast.Try):
                handler = next((h for h in stmt.handlers if catches_lookup(h)), None)
                try:
                    body = [*stmt.body, *stmt.orelse, *stmt.finalbody, *rest]
                    return self.block(body, fork(path, False), fn, depth)
                except KeyMiss:
                    if handler is None:
                        raise
                    after = [*handler.body, *stmt.finalbody, *rest]
                    return self.block(after, fork(path, False), fn, depth)
            if isinstance(stmt, ast.With | ast.AsyncWith):
                stmts = [*stmt.body, *rest]
                i = 0
                continue
            if isinstance(stmt, ast.For | ast.AsyncFor | ast.While | ast.Match):
                if any(isinstance(n, ast.Return | ast.Raise) for n in ast.walk(stmt)):
                    return [End(UNDECIDED)]
            elif isinstance(stmt, ast.Assign):
                value = self.expr(stmt.value, path, fn.module, depth)
                for target in stmt.targets:
                    bind(path.env, target, value)
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                bind(path.env, stmt.target, self.expr(stmt.value, path, fn.module, depth))
            elif isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    if alias.asname:
                        path.env[alias.asname] = Mod(alias.name)
                    else:
                        top = alias.name.split(".")[0]
                        path.env[top] = Mod(top)
            elif isinstance(stmt, ast.ImportFrom):
                source = absolute(fn.module, stmt.module, stmt.level, self.api)
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

    def returned(self, value: Any, path: Trace, line: int) -> End:
        returns = value.path if isinstance(value, Obj | Mod) else None
        if isinstance(value, Raised):
            return value.end
        if isinstance(value, End):  # a call whose outcome we followed
            if value.status in (DEPRECATED, PRESENT) and path.warnings:
                message, wline = path.warnings[0]
                return End(DEPRECATED, message, wline, value.returns)
            return value
        if path.warnings:
            message, wline = path.warnings[0]
            return End(DEPRECATED, message, wline, returns)
        return End(PRESENT, "", line, returns)

    def raised(self, stmt: ast.Raise, path: Trace, module: str, depth: int) -> End:
        message = ""
        exc = stmt.exc
        if isinstance(exc, ast.Call) and exc.args:
            text = self.expr(exc.args[0], path, module, depth)
            message = text if isinstance(text, str) else text_of(exc.args[0])
        if path.picked:
            return End(REMOVED, message, stmt.lineno)
        return End(ABSENT, message, stmt.lineno)

    def effect(self, call: ast.Call, path: Trace, module: str, depth: int) -> None:
        """A call made for its effect: a warning, or a host helper that warns."""
        head = dotted(call.func)
        if head.rsplit(".", 1)[-1] in ("warn", "warn_explicit") and call.args:
            text = self.expr(call.args[0], path, module, depth)
            message = text if isinstance(text, str) else text_of(call.args[0])
            path.warnings.append((message, call.lineno))
            return
        fn = self.expr(call.func, path, module, depth)
        if isinstance(fn, Fn) and depth < MAX_DEPTH:
            args = [self.expr(a, path, module, depth) for a in call.args]
            try:
                inner = self.block(list(fn.node.body), Trace(params_env(fn, args)), fn, depth + 1)
            except KeyMiss:
                return
            for end in inner:
                if end.status == DEPRECATED and end.message:
                    path.warnings.append((end.message, call.lineno))
                    return

    # -- expressions -------------------------------------------------------------------------


__all__ = [
    "ABSENT",
    "DEPRECATED",
    "PRESENT",
    "REMOVED",
    "UNDECIDED",
    "Interpreter",
    "Served",
    "serve",
]
