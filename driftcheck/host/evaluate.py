"""Expressions inside a module ``__getattr__`` (and the module-level code its tables come from),
evaluated for one concrete name: a mixin of the interpreter in :mod:`driftcheck.host.served`."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any, cast

from driftcheck.host.objects import Found
from driftcheck.host.values import (
    ABSENT,
    NO_DEFAULT,
    PRESENT,
    REMOVED,
    UNK,
    Abort,
    End,
    Fn,
    HostAPI,
    KeyMiss,
    Mod,
    Namespace,
    Obj,
    Raised,
    Ref,
    Sentinel,
    Trace,
    bind,
    dotted,
    params_env,
    returns_inner,
)


class Expressions:
    """Evaluates expressions; the interpreter supplies ``api``, ``global_value`` and ``call``."""

    api: HostAPI
    global_value: Callable[[str, str, int], Any]
    call: Callable[..., End]

    def truth(self, node: ast.expr, path: Trace, module: str, depth: int) -> bool | None:
        value = self.expr(node, path, module, depth)
        if value is UNK or isinstance(value, Fn | Obj | Mod | Namespace):
            return None if value is UNK else True
        try:
            return bool(value)
        except Exception:
            return None

    def expr(self, node: ast.expr | None, path: Trace, module: str, depth: int) -> Any:
        if node is None:
            return None
        try:
            return self._expr(node, path, module, depth)
        except (Abort, RecursionError, KeyMiss):
            raise
        except Exception:
            return UNK

    def _expr(self, node: ast.expr, path: Trace, module: str, depth: int) -> Any:
        env = path.env
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in env:
                value = env[node.id]
                if isinstance(value, Ref):
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
                    else cast(ast.Constant, piece).value
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
            items: list[Any] = []
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
                    raise KeyMiss
                path.picked = True  # ``TABLE[name]`` went through: the table lists the name
                return base[key]
            if isinstance(base, Namespace) and isinstance(key, str) and self.api.owns(base.module):
                # ``globals()[name]`` (scipy 1.12's ``__getattr__``): a name the module's
                # namespace does not bind, its run-time writes read, raises KeyError.
                mod = self.api.module(base.module)
                if mod is not None:
                    bound = self.api.member(Found(mod, base.module), key, namespace_only=True)
                    if bound is None:
                        raise KeyMiss
                return UNK
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

    def comprehension(
        self, node: ast.DictComp | ast.ListComp | ast.SetComp, path: Trace, module: str, depth: int
    ) -> Any:
        gens = node.generators
        if len(gens) != 1:
            return UNK
        gen = gens[0]
        items = self.expr(gen.iter, path, module, depth)
        if not isinstance(items, tuple | list | frozenset | set | dict):
            return UNK
        out: list = []
        for item in items:
            inner = Trace({**path.env}, path.warnings, path.picked)
            bind(inner.env, gen.target, item)
            if any(self.truth(c, inner, module, depth) is not True for c in gen.ifs):
                continue
            if isinstance(node, ast.DictComp):
                key = self.expr(node.key, inner, module, depth)
                if key is UNK:
                    return UNK
                out.append((key, self.expr(node.value, inner, module, depth)))
            else:
                out.append(self.expr(node.elt, inner, module, depth))
        if isinstance(node, ast.DictComp):
            return dict(out)
        return frozenset(out) if isinstance(node, ast.SetComp) else tuple(out)

    def attribute(self, node: ast.Attribute, path: Trace, module: str, depth: int) -> Any:
        if node.attr == "__dict__" and isinstance(node.value, ast.Subscript):
            if dotted(node.value.value) == "sys.modules":
                target = self.expr(node.value.slice, path, module, depth)
                if isinstance(target, str):
                    return Namespace(target)
        if node.attr == "parent" and dotted(node.value) == "__spec__":
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

    def call_expr(self, node: ast.Call, path: Trace, module: str, depth: int) -> Any:
        head = dotted(node.func)
        args = [self.expr(a, path, module, depth) for a in node.args]
        kwargs = {k.arg: self.expr(k.value, path, module, depth) for k in node.keywords if k.arg}
        last = head.rsplit(".", 1)[-1]
        if head in ("globals", "vars") and not args:
            return Namespace(module)
        if head == "object" and not args:
            return Sentinel()  # ``sentinel = object()``: only itself ``is`` it
        if last in ("import_module", "import_string", "import_object") and args:
            return self.imported(args[0], kwargs.get("package"), module)
        if head == "getattr" and len(args) >= 2 and isinstance(args[1], str):
            return self.getattr_of(args[0], args[1], args[2] if len(args) > 2 else NO_DEFAULT)
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
            if end.status == PRESENT and end.returns is None and returns_inner(func.node):
                return self.returned_function(func, args, kwargs, depth)
            if end.status in (REMOVED, ABSENT):
                return Raised(end)
            return end
        return UNK

    def returned_function(self, factory: Fn, args: list, kwargs: dict, depth: int) -> Any:
        """The inner function a factory returns, with the factory's arguments as closure."""
        env = params_env(factory, args, kwargs)
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
                return default if default is not NO_DEFAULT else UNK
            return Obj(f"{base.path}.{name}")
        return UNK

    def compare(self, node: ast.Compare, path: Trace, module: str, depth: int) -> Any:
        op = node.ops[0]
        left = self.expr(node.left, path, module, depth)
        right = self.expr(node.comparators[0], path, module, depth)
        if isinstance(op, ast.Is | ast.IsNot):
            if left is UNK or right is UNK:
                return UNK
            if isinstance(left, End | Raised):
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
