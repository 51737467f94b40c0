"""Values in client code that conditions on the host are made of: how an expression reads the
host's version (``vllm.__version__``, ``importlib.metadata.version("vllm")``, wrapped in
``Version``/``parse``, a tuple, a helper's result), and literals with the predicate arguments
bound (``min_version or "0"``, ``pkg.replace("_", "-")``)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from driftcheck.client.index import ClientIndex, FunctionInfo, ModuleInfo
from driftcheck.client.names import FUNCTIONS, walk_statements

_VERSION_CTORS = {
    "packaging.version.Version",
    "packaging.version.parse",
    "pkg_resources.parse_version",
    "distutils.version.LooseVersion",
    "distutils.version.StrictVersion",
    "packaging.version.LegacyVersion",
}


def _is_version_ctor(name: str) -> bool:
    """A callable that parses a version: the known ones, and a host's own version class
    (``numpy.lib.NumpyVersion``: any class named ``...Version``)."""
    return name in _VERSION_CTORS or name.rsplit(".", 1)[-1].endswith("Version")


#: Module attributes that hold the host's version (``__version__``, pydantic's ``VERSION``,
#: Django's ``VERSION`` tuple).
_VERSION_ATTRS = ("__version__", "VERSION", "__VERSION__")
_METADATA_VERSION = {
    "importlib.metadata.version",
    "importlib_metadata.version",
}
DEPTH = 6  # how deep flags and predicates are followed
#: Calls that read an environment variable (None when it is unset and no default is given).
_GETENV = {"os.getenv", "os.environ.get"}


@dataclass
class Scope:
    """Where an expression is read: its module, its function, and bound predicate arguments."""

    module: ModuleInfo
    func: FunctionInfo | None = None
    env: dict[str, object] = field(default_factory=dict)
    depth: int = 0

    def deeper(self, module: ModuleInfo, func: FunctionInfo | None, env: dict) -> Scope:
        return Scope(module, func, env, self.depth + 1)


class HostValues:
    """Reads the host's version and constants off client expressions (a base of the gate
    reader)."""

    index: ClientIndex
    roots: set[str]
    dists: set[str]

    def _function(self, func: ast.expr, scope: Scope) -> FunctionInfo | None:
        """The client function a call names (a module-level function of any client module)."""
        names = scope.module.qualified(func)
        if not names and isinstance(func, ast.Name):
            names = [f"{scope.module.name}.{func.id}"]
        for name in names:
            info = self.index.functions.get(name)
            if info is not None and info.class_name is None:
                return info
        return None

    def _decide(self, test: ast.expr, scope: Scope) -> bool | None:
        """A predicate's own ``if`` on its arguments (``min_version is None``), when constant."""
        if (
            isinstance(test, ast.Compare)
            and len(test.ops) == 1
            and isinstance(test.ops[0], (ast.Is, ast.IsNot, ast.Eq, ast.NotEq))
        ):
            left = self._constant(test.left, scope)
            right = self._constant(test.comparators[0], scope)
            if left is NOT_CONSTANT or right is NOT_CONSTANT:
                return None
            same = left == right
            return same if isinstance(test.ops[0], (ast.Is, ast.Eq)) else not same
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            got = self._decide(test.operand, scope)
            return None if got is None else not got
        value = self._constant(test, scope)
        return None if value is NOT_CONSTANT else bool(value)

    # -- values ------------------------------------------------------------------------------
    def version_form(self, expr: ast.expr, scope: Scope) -> str:
        """How ``expr`` reads the host's version ("" when it does not). Read once per
        expression and scope without bound arguments: every ``if`` is read twice (its
        assignments' gates, then the walk), and a flag's values once per test that names it
        (transformers' are read 180,000 times)."""
        if scope.env:
            return self._version_form(expr, scope)
        # keyed by the expression itself, with the scope it was first read in (almost always
        # its only one): a key of ``id()``\ s cost three ints and two tuples per entry
        memo: dict[ast.expr, tuple[ModuleInfo, FunctionInfo | None, int, str]]
        memo = self.__dict__.setdefault("_version_forms", {})
        got = memo.get(expr)
        if got is not None:
            if got[0] is scope.module and got[1] is scope.func and got[2] == scope.depth:
                return got[3]
            others: dict[tuple[ast.expr, int, int, int], str]
            others = self.__dict__.setdefault("_version_forms_other", {})
            key = (expr, id(scope.module), id(scope.func), scope.depth)
            form = others.get(key)
            if form is None:
                form = others[key] = self._version_form(expr, scope)
            return form
        form = self._version_form(expr, scope)
        memo[expr] = (scope.module, scope.func, scope.depth, form)
        return form

    def _version_form(self, expr: ast.expr, scope: Scope) -> str:
        if scope.depth > DEPTH:
            return ""
        if isinstance(expr, ast.Attribute):
            if expr.attr in _VERSION_ATTRS:
                if any(n.split(".")[0] in self.roots for n in scope.module.qualified(expr.value)):
                    # ``pydantic.VERSION`` is a string, ``django.VERSION`` a tuple: read by
                    # what it is compared with.
                    return "str" if expr.attr == "__version__" else "auto"
            if expr.attr == "version" and isinstance(expr.value, ast.Call):  # pkg_resources
                call = expr.value
                names = scope.module.qualified(call.func)
                if any(n.endswith("get_distribution") for n in names) and self._is_host_dist(
                    call.args[0] if call.args else None, scope
                ):
                    return "str"
            if expr.attr in ("base_version", "public") and self.version_form(expr.value, scope):
                return "str"
            if expr.attr == "release" and self.version_form(expr.value, scope) == "version":
                return "tuple:9"
            return ""
        if isinstance(expr, ast.Name):
            return self._name_form(expr, scope)
        if (
            isinstance(expr, ast.Subscript)
            and isinstance(expr.value, ast.Call)
            and isinstance(expr.slice, ast.Constant)
            and isinstance(expr.slice.value, int)
        ):  # ``exists, version = _is_package_available("vllm", return_version=True)``
            return self._returned_form(expr.value, scope, expr.slice.value)
        if isinstance(expr, ast.Call):
            names = scope.module.qualified(expr.func)
            if not names and isinstance(expr.func, ast.Name):
                names = [expr.func.id]
            if any(n in _METADATA_VERSION for n in names) and expr.args:
                return "str" if self._is_host_dist(expr.args[0], scope) else ""
            if any(_is_version_ctor(n) for n in names) and expr.args:
                return "version" if self.version_form(expr.args[0], scope) else ""
            if isinstance(expr.func, ast.Name) and expr.func.id == "str" and expr.args:
                return "str" if self.version_form(expr.args[0], scope) else ""
            if isinstance(expr.func, ast.Name) and expr.func.id == "int" and len(expr.args) == 1:
                return self._part_form(expr.args[0], scope)
            if isinstance(expr.func, ast.Name) and expr.func.id == "tuple" and expr.args:
                return self._tuple_form(expr.args[0], scope)
            if (
                isinstance(expr.func, ast.Name)
                and expr.func.id == "getattr"
                and len(expr.args) >= 2
                and self._constant(expr.args[1], scope) == "__version__"
                and self._is_host_module(expr.args[0], scope)
            ):
                return "str"
            return self._returned_form(expr, scope, None)
        return ""

    def _name_form(self, expr: ast.Name, scope: Scope) -> str:
        """A name holding the host's version: imported, or assigned once (locally, at module
        level, or in the client module it is imported from)."""
        if expr.id in scope.env:
            return ""
        names = scope.module.qualified(expr)
        if any(n.endswith(".__version__") and n.split(".")[0] in self.roots for n in names):
            return "str"
        values = scope.func.locals.get(expr.id, []) if scope.func is not None else []
        module = scope.module
        if not values:
            source = module.names.imports.get(expr.id, "")
            mod, _, attr = source.rpartition(".")
            if mod in self.index.modules and mod != module.name:
                module, values = (
                    self.index.modules[mod],
                    self.index.modules[mod].globals.get(attr, []),
                )
            else:
                values = module.globals.get(expr.id, [])
        func = scope.func if module is scope.module else None
        inner = scope.deeper(module, func, scope.env if func is scope.func else {})
        if len(values) > 1:  # an override the environment leaves unset by default
            holder = func.node if func is not None else module.tree
            values = [v for v in values if not self._override(v, holder, inner)]
        forms = {
            self.version_form(v, inner)
            for v in values
            if not isinstance(v, ast.Constant)  # "N/A", None: placeholders where it is absent
        }
        return forms.pop() if len(forms) == 1 else ""

    def _override(self, value: ast.expr, holder: ast.AST, scope: Scope) -> bool:
        """``if E is not None: v = E`` (or ``if E: v = E``, or ``v = E`` in the ``else`` of
        ``if E is None`` / ``if not E``) with ``E`` an environment variable read without a
        default: taken only where the user sets the variable, so by default ``v`` holds its
        other values (``vllm_version_is``: ``VLLM_VERSION`` else ``vllm.__version__``)."""
        text = ""
        for test, body, orelse in self._assigning_ifs(holder):
            if id(value) not in body and id(value) not in orelse:
                continue
            text = text or ast.unparse(value)
            set_when = _set_test(test, text)
            if set_when is None:
                continue
            if id(value) in (body if set_when else orelse):
                return self.unset_env(value, scope)
        return False

    def _assigning_ifs(self, holder: ast.AST) -> list[tuple[ast.expr, set[int], set[int]]]:
        """The ``if`` statements in ``holder`` whose arms assign: (test, the ids of the values
        its body assigns, of those its ``else`` assigns); read once per holder, not once per
        value asked about (a module's tree was walked for every name of several values)."""
        cache: dict[int, tuple[ast.AST, list]] = self.__dict__.setdefault("_ifs_of", {})
        got = cache.get(id(holder))
        if got is None or got[0] is not holder:
            arms = []
            for node in walk_statements(holder):  # an ``if`` is a statement
                if isinstance(node, ast.If):
                    body = {id(s.value) for s in node.body if isinstance(s, ast.Assign)}
                    orelse = {id(s.value) for s in node.orelse if isinstance(s, ast.Assign)}
                    if body or orelse:
                        arms.append((node.test, body, orelse))
            got = cache[id(holder)] = (holder, arms)
        return got[1]

    def unset_env(self, expr: ast.expr, scope: Scope, depth: int = 0) -> bool:
        """Whether ``expr`` reads an environment variable that is None unless the user sets it:
        ``os.getenv("X")``, ``os.environ.get("X", None)``, or a client module's name bound to
        one (assigned once, or an entry of the table the module's ``__getattr__`` serves)."""
        if depth > DEPTH:
            return False
        if isinstance(expr, ast.Call):
            names = scope.module.qualified(expr.func)
            if not any(n in _GETENV for n in names) or not expr.args:
                return False
            if not isinstance(self._constant(expr.args[0], scope), str):
                return False
            default = [*expr.args[1:2], *(k.value for k in expr.keywords if k.arg == "default")]
            return all(isinstance(d, ast.Constant) and d.value is None for d in default)
        if not isinstance(expr, (ast.Name, ast.Attribute)):
            return False
        for name in scope.module.qualified(expr):
            owner, _, attr = name.rpartition(".")
            module = self.index.modules.get(owner)
            if module is None:
                continue
            values = module.globals.get(attr, [])
            inner = scope.deeper(module, None, {})
            if len(values) == 1:
                return self.unset_env(values[0], inner, depth + 1)
            served = _served(module, attr)
            if not values and served is not None:
                return self.unset_env(served, inner, depth + 1)
        return False

    def _returned_form(self, call: ast.Call, scope: Scope, index: int | None) -> str:
        """The version form a client function's result has (or item ``index`` of it)."""
        target = self._function(call.func, scope)
        if target is None:
            return ""
        env = bind_arguments(target.node, call, lambda e: self._constant(e, scope))
        inner = scope.deeper(target.module, target, env)
        forms = set()
        for value in returned_values(target.node.body, lambda t: self._decide(t, inner)):
            if is_false(value):
                continue
            if index is not None:
                if not (isinstance(value, ast.Tuple) and len(value.elts) > index):
                    continue
                value = value.elts[index]
            forms.add(self.version_form(value, inner))
        return forms.pop() if len(forms) == 1 else ""

    def _is_host_module(self, expr: ast.expr, scope: Scope) -> bool:
        """A host module: named (``vllm``), or ``importlib.import_module("vllm")`` (also
        through a local name)."""
        if any(n.split(".")[0] in self.roots for n in scope.module.qualified(expr)):
            return True
        if isinstance(expr, ast.Name) and scope.func is not None:
            values = scope.func.locals.get(expr.id, [])
            return len(values) == 1 and self._is_host_module(values[0], scope)
        if isinstance(expr, ast.Call) and expr.args:
            names = scope.module.qualified(expr.func)
            if any(n in ("importlib.import_module", "builtins.__import__") for n in names):
                value = self._constant(expr.args[0], scope)
                return isinstance(value, str) and value.split(".")[0] in self.roots
        return False

    def _part_form(self, expr: ast.expr, scope: Scope) -> str:
        """``int(V.split(".")[i])``: one part of the release number."""
        if (
            isinstance(expr, ast.Subscript)
            and isinstance(expr.slice, ast.Constant)
            and isinstance(expr.slice.value, int)
            and isinstance(expr.value, ast.Call)
            and isinstance(expr.value.func, ast.Attribute)
            and expr.value.func.attr == "split"
            and self.version_form(expr.value.func.value, scope) in ("str", "auto")
        ):
            return f"part:{expr.slice.value}"
        return ""

    def _tuple_form(self, expr: ast.expr, scope: Scope) -> str:
        """``tuple(int(x) for x in V.split(".")[:N])`` / ``tuple(map(int, V.split(".")[:N]))``."""
        seq: ast.expr | None = None
        if isinstance(expr, ast.GeneratorExp) and expr.generators:
            seq = expr.generators[0].iter
        elif (
            isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "map"
        ):
            seq = expr.args[1] if len(expr.args) == 2 else None
        n = 9
        if isinstance(seq, ast.Subscript) and isinstance(seq.slice, ast.Slice):
            upper = seq.slice.upper
            if isinstance(upper, ast.Constant) and isinstance(upper.value, int):
                n = upper.value
            seq = seq.value
        if (
            isinstance(seq, ast.Call)
            and isinstance(seq.func, ast.Attribute)
            and seq.func.attr == "split"
            and self.version_form(seq.func.value, scope) in ("str", "auto")
        ):
            return f"tuple:{n}"
        return ""

    def _is_host_dist(self, expr: ast.expr | None, scope: Scope) -> bool:
        """Names the host's distribution: a constant, or a local whose values that are constant
        all name it (``name = pkg.replace("_", "-")`` / ``name = pkg`` / ``name = found[0]``)."""
        if expr is None:
            return False
        candidates = [expr]
        if isinstance(expr, ast.Name) and expr.id not in scope.env and scope.func is not None:
            candidates = scope.func.locals.get(expr.id, []) or candidates
        values = [self._constant(c, scope) for c in candidates]
        known = [v for v in values if v is not NOT_CONSTANT]
        return bool(known) and all(
            isinstance(v, str) and v.lower().replace("_", "-") in self.dists for v in known
        )

    def _constant(self, expr: ast.expr, scope: Scope) -> object:
        """A literal's value (strings, numbers, tuples, ``Version("x")``), or NOT_CONSTANT."""
        if isinstance(expr, ast.Constant):
            return expr.value
        if isinstance(expr, ast.Tuple):
            items = [self._constant(e, scope) for e in expr.elts]
            return NOT_CONSTANT if NOT_CONSTANT in items else tuple(items)
        if isinstance(expr, ast.Name):
            if expr.id in scope.env:
                return scope.env[expr.id]
            local = scope.func.locals.get(expr.id, []) if scope.func is not None else []
            if len(local) == 1 and scope.depth < DEPTH:
                return self._constant(local[0], scope.deeper(scope.module, scope.func, scope.env))
            values = scope.module.globals.get(expr.id, [])
            if not local and len(values) == 1 and isinstance(values[0], (ast.Constant, ast.Tuple)):
                return self._constant(values[0], scope)
            return NOT_CONSTANT
        if isinstance(expr, ast.BoolOp):  # ``min_version or "0"``, as Python evaluates it
            value: object = NOT_CONSTANT
            for part in expr.values:
                value = self._constant(part, scope)
                if value is NOT_CONSTANT:
                    return NOT_CONSTANT
                if bool(value) == isinstance(expr.op, ast.Or):
                    return value
            return value
        if (
            isinstance(expr, ast.Call)
            and isinstance(expr.func, ast.Attribute)
            and expr.func.attr in ("replace", "lower", "strip")
        ):  # ``pkg_name.replace("_", "-")``
            base = self._constant(expr.func.value, scope)
            args = [self._constant(a, scope) for a in expr.args]
            if isinstance(base, str) and all(isinstance(a, str) for a in args):
                try:
                    return getattr(base, expr.func.attr)(*args)
                except TypeError:
                    return NOT_CONSTANT
        if isinstance(expr, ast.Call) and len(expr.args) == 1:
            names = scope.module.qualified(expr.func)
            if any(_is_version_ctor(n) for n in names):
                return self._constant(expr.args[0], scope)
        return NOT_CONSTANT


def _set_test(test: ast.expr, text: str) -> bool | None:
    """Whether ``test`` holds when ``text`` is set (``X is not None``, ``X``: True; ``X is
    None``, ``not X``: False); None when ``test`` is not about ``text``."""
    if ast.unparse(test) == text:
        return True
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        got = _set_test(test.operand, text)
        return None if got is None else not got
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.Is, ast.IsNot))
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
        and ast.unparse(test.left) == text
    ):
        return isinstance(test.ops[0], ast.IsNot)
    return None


def _served(module: ModuleInfo, name: str) -> ast.expr | None:
    """What a module's ``__getattr__`` serves for ``name`` from a table of lambdas
    (``env_variables = {"X": lambda: os.getenv("X")}``), when the module defines one."""
    if not any(
        isinstance(s, ast.FunctionDef) and s.name == "__getattr__" for s in module.tree.body
    ):
        return None
    for stmt in module.tree.body:
        value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
        if not isinstance(value, ast.Dict):
            continue
        for key, entry in zip(value.keys, value.values, strict=True):
            if (
                isinstance(key, ast.Constant)
                and key.value == name
                and isinstance(entry, ast.Lambda)
                and not entry.args.args
            ):
                return entry.body
    return None


class _NotConstant:
    def __repr__(self) -> str:
        return "<not constant>"


NOT_CONSTANT = _NotConstant()


def bind_arguments(node: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call, value) -> dict:  # noqa: ANN001
    """Parameter -> constant value, from the call's arguments and the defaults."""
    a = node.args
    params = [*a.posonlyargs, *a.args]
    env: dict[str, object] = {}
    defaults = a.defaults
    for param, default in zip(params[len(params) - len(defaults) :], defaults, strict=True):
        env[param.arg] = value(default)
    for param, kw_default in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        if kw_default is not None:
            env[param.arg] = value(kw_default)
    for param, arg in zip(params, call.args, strict=False):
        if isinstance(arg, ast.Starred):
            break
        env[param.arg] = value(arg)
    for kw in call.keywords:
        if kw.arg is not None:
            env[kw.arg] = value(kw.value)
    return {k: v for k, v in env.items() if v is not NOT_CONSTANT}


def returned_values(body: list[ast.stmt], decide) -> list[ast.expr]:  # noqa: ANN001
    """The values a function body can return, following ``if``\\ s its arguments decide."""
    out: list[ast.expr] = []
    for stmt in body:
        if isinstance(stmt, FUNCTIONS) or isinstance(stmt, ast.ClassDef):
            continue
        if isinstance(stmt, ast.Return):
            out.append(stmt.value if stmt.value is not None else ast.Constant(None))
            return out
        if isinstance(stmt, ast.If):
            verdict = decide(stmt.test)
            if verdict is True:
                return out + returned_values(stmt.body, decide)
            if verdict is False:
                out += returned_values(stmt.orelse, decide)
                continue
            out += returned_values(stmt.body, decide) + returned_values(stmt.orelse, decide)
            continue
        for name in ("body", "orelse", "finalbody"):
            block = getattr(stmt, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                out += returned_values(block, decide)
        for handler in getattr(stmt, "handlers", None) or []:
            out += returned_values(handler.body, decide)
    return out


def is_false(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Constant) and expr.value in (False, None)


def is_true(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Constant) and expr.value is True
