"""Reading gates off the client's syntax: which conditions test the host, and how.

Recognised, wherever they appear in an ``if``, a conditional expression, an early return or a
flag: the host's version (``vllm.__version__``, ``importlib.metadata.version("vllm")``,
``pkg_resources.get_distribution("vllm").version``, wrapped in ``packaging.version.Version`` /
``parse``, cut into a tuple, or compared as the string it is), ``hasattr(host_module, "x")``,
``getattr(host_module, "x", None) is not None``, a name imported behind ``try``/``except
ImportError`` tested for ``None``, ``TYPE_CHECKING``, a host name tested for its truth
(``if envs.VLLM_USE_V1:``, a ``flag`` gate: decided on a release that fixes its value,
:mod:`driftcheck.host.flags`); and the client's own predicates and flags
built from them (a function whose result is such a condition, with its arguments bound; a
module-level name assigned one, also from another module of the client). A condition that names
the host's version in a way not understood is an ``unknown`` gate: kept, and reported as such.
"""

from __future__ import annotations

import ast

from driftcheck.client.gate_values import (
    DEPTH,
    NOT_CONSTANT,
    HostValues,
    Scope,
    bind_arguments,
    is_false,
    is_true,
)
from driftcheck.client.index import ClientIndex, FunctionInfo, ModuleInfo
from driftcheck.client.predicates import predicate_gate
from driftcheck.gates import ALWAYS, TYPE_ONLY, Gate, all_of, negate

_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_CMP = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
}


class GateReader(HostValues):
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
        self._predicates: dict[tuple[str, str, int], Gate | None] = {}

    # -- entry point -----------------------------------------------------------------------
    def gate(self, expr: ast.expr, scope: Scope) -> Gate | None:
        """The gate ``expr`` is, when it tests the host."""
        if scope.depth > DEPTH:
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
            if value is NOT_CONSTANT:
                gates.append(Gate("unknown", name=scope.module.source.segment(expr)[:120]))
                continue
            gates.append(Gate("version", form=form, cmp=cmp, value=value))
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
            if self.version_form(func.value, scope) in ("str", "auto"):
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
        host_class = self._annotated_class(obj, scope, attr)
        if host_class is not None:  # ``hasattr(request, "is_ajax")``, request: HttpRequest
            return Gate("has", name=f"{host_class}.{attr}")
        return None

    def _annotated_class(self, obj: ast.expr, scope: Scope, attr: str) -> str | None:
        """The host class of a parameter annotated with it (or with a client subclass of it
        that does not define the attribute itself), or of a local built by calling it."""
        if not isinstance(obj, ast.Name) or scope.func is None:
            return None
        annotation = scope.func.params.get(obj.id)
        if annotation is None:
            values = scope.func.locals.get(obj.id, [])
            # ``frame = pd.DataFrame(...)``: a local built once by a host constructor
            if len(values) != 1 or not isinstance(values[0], ast.Call):
                return None
            annotation = values[0].func
        todo = list(scope.module.qualified(annotation))
        seen: set[str] = set()
        while todo:
            path = todo.pop(0)
            if path in seen:
                continue
            seen.add(path)
            if path.split(".", 1)[0] in self.roots:
                return path
            info = self.index.classes.get(path)
            if info is not None:
                if attr in info.methods or attr in info.attrs:
                    return None  # the client's own class answers, whatever the host has
                todo.extend(info.bases)
        return None

    def _predicate(self, func: FunctionInfo, call: ast.Call, scope: Scope) -> Gate | None:
        """The gate a client predicate returns, its parameters bound to the call's constants."""
        env = bind_arguments(func.node, call, lambda e: self._constant(e, scope))
        inner = scope.deeper(func.module, func, env)
        # read once per function, arguments and depth: predicates that call predicates would
        # otherwise be read again for every path of every caller (exponential in the depth)
        key = (func.qualname, repr(sorted(env.items(), key=lambda kv: kv[0])), inner.depth)
        if key not in self._predicates:
            self._predicates[key] = predicate_gate(self, func.node.body, inner, func.qualname)
        return self._predicates[key]

    def decide(self, test: ast.expr, scope: Scope) -> bool | None:
        """A condition on constants only (a predicate's own arguments), decided."""
        return self._decide(test, scope)

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
        if isinstance(expr, ast.Name) and scope.func is not None:
            values = scope.func.locals.get(expr.id, [])
            if len(values) == 1:
                return self.gate(values[0], scope.deeper(scope.module, scope.func, scope.env))
            if values:
                return None
        host = [n for n in names if n.split(".", 1)[0] in self.roots and "." in n]
        if host:  # a host flag (``envs.VLLM_USE_V1``): decided where the release fixes it
            return Gate("flag", name=host[0])
        if isinstance(expr, ast.Name):
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
        elif values and all(is_true(v) or is_false(v) for v in values):
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


def _assigns(stmt: ast.stmt, name: str, value: bool) -> bool:
    return (
        isinstance(stmt, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets)
        and isinstance(stmt.value, ast.Constant)
        and stmt.value.value is value
    )
