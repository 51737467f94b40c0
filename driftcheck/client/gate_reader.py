"""Reading gates off the client's syntax: which conditions test the host, and how.

Recognised, wherever they appear in an ``if``, a conditional expression, an early return or a
flag: the host's version (``vllm.__version__``, ``importlib.metadata.version("vllm")``,
``pkg_resources.get_distribution("vllm").version``, wrapped in ``packaging.version.Version`` /
``parse``, cut into a tuple, or compared as the string it is), ``hasattr(host_module, "x")``,
``getattr(host_module, "x", None) is not None``, a name imported behind ``try``/``except
ImportError`` tested for ``None``, ``TYPE_CHECKING``; and the client's own predicates and flags
built from them (a function whose result is such a condition, with its arguments bound; a
module-level name assigned one, also from another module of the client). A condition that names
the host's version in a way not understood is an ``unknown`` gate: kept, and reported as such.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from driftcheck.client.index import ClientIndex, FunctionInfo, ModuleInfo
from driftcheck.client.names import FUNCTIONS
from driftcheck.client.predicates import predicate_gate
from driftcheck.gates import ALWAYS, TYPE_ONLY, Gate, all_of, negate

_VERSION_CTORS = {
    "packaging.version.Version",
    "packaging.version.parse",
    "pkg_resources.parse_version",
    "distutils.version.LooseVersion",
    "distutils.version.StrictVersion",
    "packaging.version.LegacyVersion",
}
_METADATA_VERSION = {
    "importlib.metadata.version",
    "importlib_metadata.version",
}
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_CMP = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
}
_DEPTH = 6  # how deep flags and predicates are followed


@dataclass
class Scope:
    """Where an expression is read: its module, its function, and bound predicate arguments."""

    module: ModuleInfo
    func: FunctionInfo | None = None
    env: dict[str, object] = field(default_factory=dict)
    depth: int = 0

    def deeper(self, module: ModuleInfo, func: FunctionInfo | None, env: dict) -> Scope:
        return Scope(module, func, env, self.depth + 1)


class GateReader:
    """Turns conditions into :class:`Gate` values (None: the condition is not about the host)."""

    def __init__(self, index: ClientIndex, roots: set[str], dists: set[str]) -> None:
        self.index = index
        self.roots = roots
        self.dists = {d.lower().replace("_", "-") for d in dists} | {
            r.lower().replace("_", "-") for r in roots
        }
        #: Module name -> local name -> host symbol imported behind try/except ImportError.
        self.guarded: dict[str, dict[str, str]] = {}
        self._flags: dict[tuple[str, str], Gate | None] = {}

    # -- entry point -----------------------------------------------------------------------
    def gate(self, expr: ast.expr, scope: Scope) -> Gate | None:
        """The gate ``expr`` is, when it tests the host."""
        if scope.depth > _DEPTH:
            return None
        if isinstance(expr, ast.BoolOp):
            return self._boolop(expr, scope)
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
            inner = self.gate(expr.operand, scope)
            return negate(inner) if inner is not None else None
        if isinstance(expr, ast.Compare):
            return self._compare(expr, scope)
        if isinstance(expr, ast.Call):
            return self._call(expr, scope)
        if isinstance(expr, (ast.Name, ast.Attribute)):
            return self._name(expr, scope)
        return None

    # -- boolean structure -----------------------------------------------------------------
    def _boolop(self, expr: ast.BoolOp, scope: Scope) -> Gate | None:
        parts = [self.gate(v, scope) for v in expr.values]
        host = [p for p in parts if p is not None]
        if not host:
            return None
        if isinstance(expr.op, ast.And):
            # A condition that is not about the host does not stop the host's code from running
            # on a release where the host part holds; where it fails, nothing runs either way.
            return all_of(host)
        if len(host) < len(parts):
            return Gate("unknown", name=scope.module.source.segment(expr)[:120])
        return Gate("or", tuple(host))

    # -- comparisons -----------------------------------------------------------------------
    def _compare(self, expr: ast.Compare, scope: Scope) -> Gate | None:
        pairs = list(zip([expr.left, *expr.comparators], expr.comparators, strict=False))
        gates: list[Gate] = []
        mentions = False
        for (left, right), op in zip(pairs, expr.ops, strict=True):
            if isinstance(op, (ast.Is, ast.IsNot)):
                got = self._is_none(left, right, scope)
                if got is not None:
                    gates.append(got if isinstance(op, ast.IsNot) else negate(got))
                    continue
            cmp = _CMP.get(type(op))
            lform, rform = self.version_form(left, scope), self.version_form(right, scope)
            mentions = mentions or bool(lform or rform)
            if cmp is None or bool(lform) == bool(rform):
                continue
            if lform:
                value = self._constant(right, scope)
                form = lform
            else:
                value = self._constant(left, scope)
                form, cmp = rform, _FLIP[cmp]
            if value is _NOT_CONSTANT:
                gates.append(Gate("unknown", name=scope.module.source.segment(expr)[:120]))
                continue
            gates.append(Gate("version", form=form, cmp=cmp, value=value))  # type: ignore[arg-type]
        if gates:
            return all_of(gates)
        if mentions:
            return Gate("unknown", name=scope.module.source.segment(expr)[:120])
        return None

    def _is_none(self, left: ast.expr, right: ast.expr, scope: Scope) -> Gate | None:
        """``X is not None`` for X a guarded import, ``getattr(host, "x", None)``, or the host's
        version (which every side scanned has: the host is installed there)."""
        if not (isinstance(right, ast.Constant) and right.value is None):
            return None
        if self.version_form(left, scope):
            return ALWAYS
        return self._presence(left, scope)

    def _presence(self, expr: ast.expr, scope: Scope) -> Gate | None:
        if isinstance(expr, ast.Name):
            symbol = self.guarded.get(scope.module.name, {}).get(expr.id)
            if symbol is not None:
                return Gate("has", name=symbol)
        if (
            isinstance(expr, ast.Call)
            and isinstance(expr.func, ast.Name)
            and expr.func.id == "getattr"
            and len(expr.args) >= 2
        ):
            return self._hasattr(expr.args[0], expr.args[1], scope)
        return None

    # -- calls -------------------------------------------------------------------------------
    def _call(self, expr: ast.Call, scope: Scope) -> Gate | None:
        func = expr.func
        if isinstance(func, ast.Name) and func.id == "hasattr" and len(expr.args) == 2:
            return self._hasattr(expr.args[0], expr.args[1], scope)
        if isinstance(func, ast.Name) and func.id == "callable" and len(expr.args) == 1:
            return self._presence(expr.args[0], scope)
        if isinstance(func, ast.Attribute) and func.attr == "startswith" and len(expr.args) == 1:
            if self.version_form(func.value, scope) == "str":
                value = self._constant(expr.args[0], scope)
                if isinstance(value, str):
                    return Gate("version", form="str", cmp="startswith", value=value)
                return Gate("unknown", name=scope.module.source.segment(expr)[:120])
        target = self._function(func, scope)
        if target is not None:
            return self._predicate(target, expr, scope)
        return None

    def _hasattr(self, obj: ast.expr, name: ast.expr, scope: Scope) -> Gate | None:
        attr = self._constant(name, scope)
        if not isinstance(attr, str):
            return None
        for path in scope.module.qualified(obj):
            if path.split(".", 1)[0] in self.roots:
                return Gate("has", name=f"{path}.{attr}")
        return None

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

    def _predicate(self, func: FunctionInfo, call: ast.Call, scope: Scope) -> Gate | None:
        """The gate a client predicate returns, its parameters bound to the call's constants."""
        env = _bind(func.node, call, lambda e: self._constant(e, scope))
        inner = scope.deeper(func.module, func, env)
        return predicate_gate(self, func.node.body, inner, func.qualname)

    def decide(self, test: ast.expr, scope: Scope) -> bool | None:
        """A condition on constants only (a predicate's own arguments), decided."""
        return self._decide(test, scope)

    def _decide(self, test: ast.expr, scope: Scope) -> bool | None:
        """A predicate's own ``if`` on its arguments (``min_version is None``), when constant."""
        if (
            isinstance(test, ast.Compare)
            and len(test.ops) == 1
            and isinstance(test.ops[0], (ast.Is, ast.IsNot, ast.Eq, ast.NotEq))
        ):
            left = self._constant(test.left, scope)
            right = self._constant(test.comparators[0], scope)
            if left is _NOT_CONSTANT or right is _NOT_CONSTANT:
                return None
            same = left == right
            return same if isinstance(test.ops[0], (ast.Is, ast.Eq)) else not same
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            got = self._decide(test.operand, scope)
            return None if got is None else not got
        value = self._constant(test, scope)
        return None if value is _NOT_CONSTANT else bool(value)

    # -- names and flags ---------------------------------------------------------------------
    def _name(self, expr: ast.Name | ast.Attribute, scope: Scope) -> Gate | None:
        names = scope.module.qualified(expr)
        if any(n.endswith("TYPE_CHECKING") and n.split(".")[0] == "typing" for n in names):
            return TYPE_ONLY
        if isinstance(expr, ast.Name) and expr.id == "TYPE_CHECKING" and not names:
            return TYPE_ONLY
        presence = self._presence(expr, scope)
        if presence is not None:
            return presence
        if isinstance(expr, ast.Name):
            if scope.func is not None:
                values = scope.func.locals.get(expr.id, [])
                if len(values) == 1:
                    return self.gate(values[0], scope.deeper(scope.module, scope.func, scope.env))
                if values:
                    return None
            return self._flag(scope.module, expr.id, scope)
        for name in names:  # a flag of another client module: ``utils.HAS_X``
            module, _, attr = name.rpartition(".")
            if module in self.index.modules:
                return self._flag(self.index.modules[module], attr, scope)
        return None

    def _flag(self, module: ModuleInfo, name: str, scope: Scope) -> Gate | None:
        """A module-level name assigned a gate (or True/False in a try/except ImportError)."""
        source = module.names.imports.get(name)
        if source is not None:  # ``from pkg.utils import HAS_X``
            mod, _, attr = source.rpartition(".")
            if mod in self.index.modules and mod != module.name:
                return self._flag(self.index.modules[mod], attr, scope)
            return None
        key = (module.name, name)
        if key in self._flags:
            return self._flags[key]
        self._flags[key] = None  # a cycle reads as "not a gate"
        values = module.globals.get(name, [])
        got: Gate | None = None
        if len(values) == 1:
            got = self.gate(values[0], scope.deeper(module, None, {}))
        elif values and all(_is_true(v) or _is_false(v) for v in values):
            got = self._try_flag(module, name)
        self._flags[key] = got
        return got

    def _try_flag(self, module: ModuleInfo, name: str) -> Gate | None:
        """``try: import host.x; NAME = True`` / ``except ImportError: NAME = False``."""
        for stmt in module.tree.body:
            if not isinstance(stmt, ast.Try):
                continue
            body_true = any(_assigns(s, name, True) for s in stmt.body + stmt.orelse)
            handler_false = any(_assigns(s, name, False) for h in stmt.handlers for s in h.body)
            if body_true and handler_false:
                imports = host_imports(stmt.body, module, self.roots)
                if imports:
                    return all_of([Gate("has", name=s) for s in imports])
        return None

    # -- values ------------------------------------------------------------------------------
    def version_form(self, expr: ast.expr, scope: Scope) -> str:
        """How ``expr`` reads the host's version ("" when it does not)."""
        if scope.depth > _DEPTH:
            return ""
        if isinstance(expr, ast.Attribute):
            if expr.attr == "__version__":
                if any(n.split(".")[0] in self.roots for n in scope.module.qualified(expr.value)):
                    return "str"
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
            if any(n in _VERSION_CTORS for n in names) and expr.args:
                return "version" if self.version_form(expr.args[0], scope) else ""
            if isinstance(expr.func, ast.Name) and expr.func.id == "str" and expr.args:
                return "str" if self.version_form(expr.args[0], scope) else ""
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
        forms = {
            self.version_form(v, inner)
            for v in values
            if not isinstance(v, ast.Constant)  # "N/A", None: placeholders where it is absent
        }
        return forms.pop() if len(forms) == 1 else ""

    def _returned_form(self, call: ast.Call, scope: Scope, index: int | None) -> str:
        """The version form a client function's result has (or item ``index`` of it)."""
        target = self._function(call.func, scope)
        if target is None:
            return ""
        env = _bind(target.node, call, lambda e: self._constant(e, scope))
        inner = scope.deeper(target.module, target, env)
        forms = set()
        for value in _returns(target.node.body, lambda t: self._decide(t, inner)):
            if _is_false(value):
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
            and self.version_form(seq.func.value, scope) == "str"
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
        known = [v for v in values if v is not _NOT_CONSTANT]
        return bool(known) and all(
            isinstance(v, str) and v.lower().replace("_", "-") in self.dists for v in known
        )

    def _constant(self, expr: ast.expr, scope: Scope) -> object:
        """A literal's value (strings, numbers, tuples, ``Version("x")``), or _NOT_CONSTANT."""
        if isinstance(expr, ast.Constant):
            return expr.value
        if isinstance(expr, ast.Tuple):
            items = [self._constant(e, scope) for e in expr.elts]
            return _NOT_CONSTANT if _NOT_CONSTANT in items else tuple(items)
        if isinstance(expr, ast.Name):
            if expr.id in scope.env:
                return scope.env[expr.id]
            local = scope.func.locals.get(expr.id, []) if scope.func is not None else []
            if len(local) == 1 and scope.depth < _DEPTH:
                return self._constant(local[0], scope.deeper(scope.module, scope.func, scope.env))
            values = scope.module.globals.get(expr.id, [])
            if not local and len(values) == 1 and isinstance(values[0], (ast.Constant, ast.Tuple)):
                return self._constant(values[0], scope)
            return _NOT_CONSTANT
        if isinstance(expr, ast.BoolOp):  # ``min_version or "0"``, as Python evaluates it
            value: object = _NOT_CONSTANT
            for part in expr.values:
                value = self._constant(part, scope)
                if value is _NOT_CONSTANT:
                    return _NOT_CONSTANT
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
                    return _NOT_CONSTANT
        if isinstance(expr, ast.Call) and len(expr.args) == 1:
            names = scope.module.qualified(expr.func)
            if any(n in _VERSION_CTORS for n in names):
                return self._constant(expr.args[0], scope)
        return _NOT_CONSTANT


class _NotConstant:
    def __repr__(self) -> str:
        return "<not constant>"


_NOT_CONSTANT = _NotConstant()


def host_imports(body: list[ast.stmt], module: ModuleInfo, roots: set[str]) -> list[str]:
    """The host names that the import statements directly in ``body`` bind."""
    out = []
    for stmt in body:
        if isinstance(stmt, ast.Import):
            out += [a.name for a in stmt.names if a.name.split(".")[0] in roots]
        elif isinstance(stmt, ast.ImportFrom) and not stmt.level and stmt.module:
            if stmt.module.split(".")[0] in roots:
                out += [f"{stmt.module}.{a.name}" for a in stmt.names if a.name != "*"]
    return out


def _bind(node: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call, value) -> dict:  # noqa: ANN001
    """Parameter -> constant value, from the call's arguments and the defaults."""
    a = node.args
    params = [*a.posonlyargs, *a.args]
    env: dict[str, object] = {}
    defaults = a.defaults
    for param, default in zip(params[len(params) - len(defaults) :], defaults, strict=True):
        env[param.arg] = value(default)
    for param, default in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        if default is not None:
            env[param.arg] = value(default)
    for param, arg in zip(params, call.args, strict=False):
        if isinstance(arg, ast.Starred):
            break
        env[param.arg] = value(arg)
    for kw in call.keywords:
        if kw.arg is not None:
            env[kw.arg] = value(kw.value)
    return {k: v for k, v in env.items() if v is not _NOT_CONSTANT}


def _returns(body: list[ast.stmt], decide) -> list[ast.expr]:  # noqa: ANN001
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
                return out + _returns(stmt.body, decide)
            if verdict is False:
                out += _returns(stmt.orelse, decide)
                continue
            out += _returns(stmt.body, decide) + _returns(stmt.orelse, decide)
            continue
        for name in ("body", "orelse", "finalbody"):
            block = getattr(stmt, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                out += _returns(block, decide)
        for handler in getattr(stmt, "handlers", None) or []:
            out += _returns(handler.body, decide)
    return out


def _is_false(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Constant) and expr.value in (False, None)


def _is_true(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Constant) and expr.value is True


def _assigns(stmt: ast.stmt, name: str, value: bool) -> bool:
    return (
        isinstance(stmt, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets)
        and isinstance(stmt.value, ast.Constant)
        and stmt.value.value is value
    )
