"""Routes of a FastAPI / Starlette host, read statically.

Two passes. The *module pass* reads every module that names a router: module-level
``APIRouter(prefix=...)`` / ``FastAPI()`` objects, the routes registered on them (decorators,
``add_api_route``, ``add_route``) and the routers they include, each under the ``if`` guards around
it (module-level ``if envs.X:``, an ``if`` inside a function, an early ``return``). The *builder
pass* starts from each function that creates a ``FastAPI()`` app and follows the calls that pass
the app on (``register_x_routes(app)``, ``attach_router(app)`` through imports, including imports
inside functions), collecting the guards on the way. The app with the most routes is the server's.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import cast

from driftcheck.http.hostcode import Def, HostCode, Imports, keyword, literal_str, local_imports
from driftcheck.http.routes_syntax import (
    APP_CLASSES,
    Guard,
    Include,
    RawRoute,
    Registration,
    assigned_objects,
    class_called,
    creates_app,
    decorator_methods,
    dotted,
    ends,
    listed_methods,
    registers_on_decorator,
)

_MAX_DEPTH = 10
#: Texts a module that makes or fills a router or app contains (a cheap pre-filter).
NEEDLES = ("APIRouter", "FastAPI", "Starlette", "include_router", "add_api_route", "add_route")


@dataclass
class _Walk:
    module: str
    bindings: dict[str, str]
    local: Imports
    #: Builder pass: record only what happens on these (non-module) objects.
    builder: bool
    depth: int = 0
    #: ``name = Call(...)`` seen so far in the body being walked.
    assigned: dict[str, ast.AST] = field(default_factory=dict)
    #: Objects the caller passed in (``register_x_routes(router)``): recorded in any pass.
    passed: frozenset[str] = frozenset()


@dataclass
class RouteReader:
    """Reads registrations and includes across the host, then the server app's routes."""

    code: HostCode
    regs: list[Registration] = field(default_factory=list)
    incs: list[Include] = field(default_factory=list)
    prefixes: dict[str, str] = field(default_factory=dict)
    apps: list[str] = field(default_factory=list)
    module_objects: dict[str, dict[str, str]] = field(default_factory=dict)
    _seen_calls: set[tuple] = field(default_factory=set)
    #: The key of the server's app (``module:builder``), once read.
    main_app: str | None = None
    builders: dict[str, Def] = field(default_factory=dict)
    #: Functions the builder pass walked (called with an app or a builder's router).
    followed: list[Def] = field(default_factory=list)

    # -- entry -------------------------------------------------------------------------------
    def read(self) -> list[RawRoute]:
        modules = self.code.modules_containing(*NEEDLES)
        builders: list[Def] = []
        for module in modules:
            tree = self.code.parse(module)
            if tree is None:
                continue
            objects = self._module_objects(module, tree)
            walk = _Walk(module, dict(objects), {}, builder=False)
            self._body(walk, tree.body, ())
            text = self.code.text(module)
            if not any(f"{cls}(" in text for cls in APP_CLASSES):
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and creates_app(node):
                    builders.append(Def(module, node, node.name))
        for builder in builders:
            key = f"{builder.module}:{builder.name}"
            self.apps.append(key)
            self.builders[key] = builder
            objects = dict(self._objects_of(builder.module))
            local = local_imports(
                builder.node, builder.module, self.code.is_package(builder.module)
            )
            for name, cls, call in assigned_objects(builder.node):
                objects[name] = key if cls in APP_CLASSES else f"{key}:{name}"
                self._record_object(objects[name], cls, call, app=False)
            walk = _Walk(builder.module, objects, local, builder=True)
            self._body(walk, cast(ast.FunctionDef, builder.node).body, ())  # a builder function
        best: list[RawRoute] = []
        for app in self.apps:
            routes = self.routes_of(app)
            if len(routes) > len(best):
                best, self.main_app = routes, app
        return best

    def routes_of(self, key: str) -> list[RawRoute]:
        out: list[RawRoute] = []
        self._collect(key, "", (), out, frozenset())
        return out

    def _collect(
        self, key: str, prefix: str, guards: tuple[Guard, ...], out: list, seen: frozenset
    ) -> None:
        if key in seen:
            return
        seen = seen | {key}
        for reg in self.regs:
            if reg.target == key:
                out.append(RawRoute(reg.method, prefix + reg.path, reg, guards + reg.guards))
        for inc in self.incs:
            if inc.parent == key:
                sub = prefix + inc.prefix + self.prefixes.get(inc.child, "")
                self._collect(inc.child, sub, guards + inc.guards, out, seen)

    # -- objects -----------------------------------------------------------------------------
    def _objects_of(self, module: str) -> dict[str, str]:
        if module not in self.module_objects:
            tree = self.code.parse(module)
            self.module_objects[module] = {} if tree is None else self._module_objects(module, tree)
        return self.module_objects[module]

    def _module_objects(self, module: str, tree: ast.Module) -> dict[str, str]:
        if module in self.module_objects:
            return self.module_objects[module]
        out: dict[str, str] = {}
        for stmt in tree.body:
            if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
                cls = class_called(stmt.value)
                for t in stmt.targets:
                    if isinstance(t, ast.Name) and cls:
                        key = f"{module}:{t.id}"
                        out[t.id] = key
                        self._record_object(key, cls, stmt.value)
        self.module_objects[module] = out
        return out

    def _record_object(self, key: str, cls: str, call: ast.Call, app: bool = True) -> None:
        if cls in APP_CLASSES and app:
            if key not in self.apps:
                self.apps.append(key)
        prefix = literal_str(keyword(call, "prefix"))
        if prefix:
            self.prefixes[key] = prefix

    def _resolve_object(self, walk: _Walk, expr: ast.AST) -> str | None:
        """The router/app key an expression names (a binding, or a router imported)."""
        if isinstance(expr, ast.Name) and expr.id in walk.bindings:
            return walk.bindings[expr.id]
        name = dotted(expr)
        if name is None:
            return None
        found = self.code.resolve(walk.module, name, walk.local)
        if isinstance(found, Def) and found.kind == "Assign":
            return self._objects_of(found.module).get(found.name)
        return None

    def _mine(self, walk: _Walk, key: str | None) -> bool:
        """Whether this pass records what happens on ``key``: the module pass records module
        objects, the builder pass the objects a builder made (its app, its routers)."""
        if key is None:
            return False
        if key in walk.passed:
            return True
        module_level = key.count(":") == 1 and key.partition(":")[2] in self._objects_of(
            key.partition(":")[0]
        )
        return module_level != walk.builder

    # -- statements --------------------------------------------------------------------------
    def _body(self, walk: _Walk, body: list[ast.stmt], guards: tuple[Guard, ...]) -> None:
        for stmt in body:
            self._stmt(walk, stmt, guards)
            if isinstance(stmt, ast.If) and not stmt.orelse and ends(stmt.body):
                guards = guards + (self._cond(walk, stmt.test, True),)
            elif isinstance(stmt, ast.Return | ast.Raise):
                return

    def _stmt(self, walk: _Walk, stmt: ast.stmt, guards: tuple[Guard, ...]) -> None:
        if isinstance(stmt, ast.If):
            self._body(walk, stmt.body, guards + (self._cond(walk, stmt.test, False),))
            if stmt.orelse:
                self._body(walk, stmt.orelse, guards + (self._cond(walk, stmt.test, True),))
        elif isinstance(stmt, ast.For | ast.AsyncFor | ast.While | ast.With | ast.AsyncWith):
            self._body(walk, stmt.body, guards)
        elif isinstance(stmt, ast.Try):
            for part in (stmt.body, *(h.body for h in stmt.handlers), stmt.orelse, stmt.finalbody):
                self._body(walk, part, guards)
        elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            self._decorated(walk, stmt, guards)
            if not walk.builder and not registers_on_decorator(stmt):
                # A module function's own registrations (on module routers) count when it runs.
                inner = _Walk(
                    walk.module,
                    walk.bindings,
                    local_imports(stmt, walk.module, self.code.is_package(walk.module)),
                    builder=False,
                )
                self._body(inner, stmt.body, guards if walk.depth else ())
        elif not isinstance(stmt, ast.ClassDef):
            if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
                for t in stmt.targets:
                    if isinstance(t, ast.Name):
                        walk.assigned[t.id] = stmt.value
            for node in ast.walk(stmt):
                if isinstance(node, ast.Call):
                    self._call(walk, node, guards)

    def _cond(self, walk: _Walk, test: ast.expr, negated: bool) -> Guard:
        return Guard(walk.module, ast.unparse(test), negated, test)

    def _decorated(
        self,
        walk: _Walk,
        func: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef,
        guards: tuple[Guard, ...],
    ) -> None:
        for dec in func.decorator_list:
            if not (isinstance(dec, ast.Call) and isinstance(dec.func, ast.Attribute)):
                continue
            key = self._resolve_object(walk, dec.func.value)
            if not self._mine(walk, key):
                continue
            handler = Def(walk.module, func, func.name)
            for method in decorator_methods(dec.func.attr, dec):
                path = literal_str(dec.args[0]) if dec.args else literal_str(keyword(dec, "path"))
                if path is not None:
                    self._reg(cast(str, key), method, path, handler, guards, walk, dec)  # _mine

    def _reg(
        self,
        key: str,
        method: str,
        path: str,
        handler: Def | None,
        guards: tuple,
        walk: _Walk,
        call: ast.Call,
    ) -> None:
        file = self.code.file(walk.module)
        node = handler.node if handler else call
        line = getattr(node, "lineno", call.lineno)
        self.regs.append(Registration(key, method, path, handler, guards, file, line, call))

    def _call(self, walk: _Walk, call: ast.Call, guards: tuple[Guard, ...]) -> None:
        func = call.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr in ("append", "insert")
            and isinstance(func.value, ast.Attribute)
            and func.value.attr == "routes"
            and call.args
        ):
            key = self._resolve_object(walk, func.value.value)
            if key is not None and self._mine(walk, key):
                self._route_object(walk, key, call.args[-1], guards)
            return
        if isinstance(func, ast.Attribute):
            key = self._resolve_object(walk, func.value)
            if key is not None and self._mine(walk, key):
                if func.attr == "include_router" and call.args:
                    child = self._resolve_object(walk, call.args[0])
                    if child is not None:
                        prefix = literal_str(keyword(call, "prefix")) or ""
                        self.incs.append(Include(key, child, prefix, guards))
                    return
                if func.attr in ("add_api_route", "add_route", "add_api_websocket_route"):
                    self._added_route(walk, key, call, guards)
                    return
                if func.attr == "mount" and call.args:
                    path = literal_str(call.args[0])
                    if path is not None:
                        self._reg(key, "MOUNT", path, None, guards, walk, call)
                    return
        self._follow(walk, call, guards)

    def _route_object(self, walk: _Walk, key: str, value: ast.AST, guards: tuple) -> None:
        """``app.routes.append(Mount("/p", ...))`` / ``Route("/p", endpoint, methods=[...])``,
        the object built in place or assigned to a name just before."""
        if isinstance(value, ast.Name):
            value = walk.assigned.get(value.id, value)
        if not isinstance(value, ast.Call) or not value.args:
            return
        cls = (dotted(value.func) or "").rsplit(".", 1)[-1]
        path = literal_str(value.args[0])
        if path is None:
            return
        if cls == "Mount":
            self._reg(key, "MOUNT", path, None, guards, walk, value)
        elif cls in ("Route", "APIRoute", "WebSocketRoute"):
            handler = None
            name = dotted(value.args[1]) if len(value.args) > 1 else None
            if name:
                found = self.code.resolve(walk.module, name, walk.local)
                handler = found if isinstance(found, Def) else None
            methods = ["WEBSOCKET"] if "WebSocket" in cls else listed_methods(value) or ["GET"]
            for method in methods:
                self._reg(key, method, path, handler, guards, walk, value)

    def _added_route(self, walk: _Walk, key: str, call: ast.Call, guards: tuple) -> None:
        path = literal_str(call.args[0]) if call.args else literal_str(keyword(call, "path"))
        endpoint = call.args[1] if len(call.args) > 1 else keyword(call, "endpoint")
        if path is None:
            return
        handler = None
        name = dotted(endpoint) if endpoint is not None else None
        if name:
            found = self.code.resolve(walk.module, name, walk.local)
            handler = found if isinstance(found, Def) else None
        attr = cast(ast.Attribute, call.func).attr  # ``app.add_route(...)``
        methods = ["WEBSOCKET"] if "websocket" in attr else listed_methods(call) or ["GET"]
        for method in methods:
            self._reg(key, method, path, handler, guards, walk, call)

    def _follow(self, walk: _Walk, call: ast.Call, guards: tuple[Guard, ...]) -> None:
        """Walk a function that an app or router is passed to (``attach_router(app)``,
        ``register_x_routes(router)``), recording what it does to them under ``guards``."""
        passed = [
            (i, None, walk.bindings[a.id])
            for i, a in enumerate(call.args)
            if isinstance(a, ast.Name) and a.id in walk.bindings
        ] + [
            (None, k.arg, walk.bindings[k.value.id])
            for k in call.keywords
            if isinstance(k.value, ast.Name) and k.arg and k.value.id in walk.bindings
        ]
        name = dotted(call.func)
        if not passed or name is None or walk.depth >= _MAX_DEPTH:
            return
        found = self.code.resolve(walk.module, name, walk.local)
        if not (isinstance(found, Def) and found.kind in ("FunctionDef", "AsyncFunctionDef")):
            return
        node = cast(ast.FunctionDef | ast.AsyncFunctionDef, found.node)  # by its kind
        params = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
        bindings = dict(self._objects_of(found.module))
        for index, kw, key in passed:
            # A positional argument has its index, a keyword its name.
            at = cast(int, index)
            param = kw if kw is not None else (params[at] if at < len(params) else None)
            if param:
                bindings[param] = key
        seen = (found.qualname, tuple(sorted(bindings.items())), tuple(g.text for g in guards))
        if seen in self._seen_calls:
            return
        self._seen_calls.add(seen)
        self.followed.append(found)
        local = local_imports(found.node, found.module, self.code.is_package(found.module))
        keys = frozenset(key for _, _, key in passed)
        inner = _Walk(
            found.module, bindings, local, builder=True, depth=walk.depth + 1, passed=keys
        )
        for name_, cls, made in assigned_objects(found.node):
            inner.bindings[name_] = f"{found.qualname}:{name_}"
            self._record_object(inner.bindings[name_], cls, made, app=False)
        self._body(inner, node.body, guards)
