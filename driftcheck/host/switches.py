"""What a release's default settings make of a switch between implementations, read from its
source.

A host picks one of two classes on a condition (``if self.use_v2: A() else: B()``,
:mod:`driftcheck.host.attributes` records the arms). Whether the default run takes an arm is a
fact of each release: the condition is followed to where its value comes from (an attribute
assigned once in the class, a property, a host function, a module-level literal, an environment
variable read with a default, an entry of the table a module's ``__getattr__`` serves) and
evaluated with the defaults. Terms the source cannot decide (a value computed at import, a field
of a config object) stay open: every way the evaluation goes through them is kept with the open
terms it assumed, so a caller can name them. The served model's ``config.json`` decides one more
kind of term: ``<...config...>.architectures``, the architectures the model declares.

Nothing is imported or run; the evaluation is bounded (call depth, paths, steps).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field

import griffe

from driftcheck.host.api import HostAPI
from driftcheck.host.flags import assignment, run_nodes, stored_elsewhere
from driftcheck.host.objects import Found

#: How deep host calls are followed from the condition.
MAX_DEPTH = 6
#: The most ways one evaluation is followed through open terms.
MAX_PATHS = 32
#: The most expressions one evaluation reads.
MAX_STEPS = 2000
#: Calls of the standard library that read an environment variable with a default.
_GETENV = {"os.getenv", "os.environ.get", "getenv", "environ.get"}
#: Builtins evaluated on known values.
_BUILTINS: dict[str, Callable[..., object]] = {
    "bool": bool,
    "int": int,
    "str": str,
    "len": len,
    "frozenset": frozenset,
    "set": frozenset,
    "tuple": tuple,
    "list": tuple,
}


@dataclass(frozen=True)
class Open:
    """A value the source does not decide; ``text`` is how the host's code spells it."""

    text: str


@dataclass(frozen=True)
class _Obj:
    """An instance of a host class (``self``, a parameter annotated with the class)."""

    cls: Found


@dataclass(frozen=True)
class _Mod:
    path: str


@dataclass(frozen=True)
class _Func:
    found: Found
    bound: _Obj | None = None


#: One way an expression goes: its value and the open terms the way assumed.
_Way = tuple[object, tuple[str, ...]]


@dataclass(frozen=True)
class Selection:
    """How the default settings of one release decide an arm of a switch.

    Attributes:
        paths: The open terms each way to the arm assumed (``()``: the defaults take the arm
            outright); empty when no way with the defaults takes it.
        settings: Environment variables the evaluation read (a user may set them).
        fields: ``(class path, field)`` of each class-level default read (a caller may pass it).
        evidence: ``(file, line, note)`` of each host fact that decided a term.
    """

    paths: tuple[tuple[str, ...], ...]
    settings: tuple[str, ...]
    evidence: tuple[tuple[str, int, str], ...]
    fields: tuple[tuple[str, str], ...] = ()

    @property
    def selected(self) -> bool:
        """Some way with the defaults takes the arm."""
        return bool(self.paths)

    @property
    def shortest(self) -> tuple[str, ...]:
        """The open terms of the way that assumes the fewest."""
        return min(self.paths, key=len) if self.paths else ()


@dataclass
class _Reader:
    api: HostAPI
    config: dict[str, object]
    settings: list[str] = field(default_factory=list)
    fields: list[tuple[str, str]] = field(default_factory=list)
    evidence: list[tuple[str, int, str]] = field(default_factory=list)
    steps: int = 0
    active: set[str] = field(default_factory=set)

    # -- statements ----------------------------------------------------------------------
    def run(
        self, body: list[ast.stmt], env: dict[str, object], module: str, depth: int
    ) -> list[tuple[object, tuple[str, ...]]]:
        """The values a function body returns, each with the open terms its way assumed."""
        todo: list[tuple[list[ast.stmt], dict[str, object], tuple[str, ...]]] = [(body, env, ())]
        out: list[tuple[object, tuple[str, ...]]] = []
        while todo:
            stmts, names, assumed = todo.pop()
            if len(out) + len(todo) > MAX_PATHS:
                return [(Open("..."), assumed)]
            ended = False
            for i, stmt in enumerate(stmts):
                rest = stmts[i + 1 :]
                if isinstance(stmt, ast.Return):
                    for value, more in self.expr(stmt.value, names, module, depth):
                        out.append((value, assumed + more))
                    ended = True
                    break
                if isinstance(stmt, ast.Raise):
                    ended = True  # this way returns nothing
                    break
                if isinstance(stmt, ast.If):
                    ways = self.expr(stmt.test, names, module, depth)
                    if not _leaves(stmt) and any(_truth(v) is None for v, _ in ways):
                        _forget(stmt, names)  # either arm only binds or changes names: no fork
                        continue
                    for value, more in ways:
                        truth = _truth(value)
                        if truth is not False:
                            yes = () if truth is True else (_text(value),)
                            todo.append((stmt.body + rest, dict(names), assumed + more + yes))
                        if truth is not True:
                            no = () if truth is False else (_negated(_text(value)),)
                            todo.append((stmt.orelse + rest, dict(names), assumed + more + no))
                    ended = True
                    break
                target, value = assignment(stmt)
                if target is not None and value is not None:
                    got = self.expr(value, names, module, depth)
                    if len(got) == 1:
                        names[target] = got[0][0]
                        assumed = assumed + got[0][1]
                        continue
                    for one, more in got:
                        todo.append((rest, {**names, target: one}, assumed + more))
                    ended = True
                    break
                if _leaves(stmt):  # a loop or a ``try`` that may return: its value is not known
                    out.append((Open(ast.unparse(stmt).split("\n", 1)[0]), assumed))
                    ended = True
                    break
                _forget(stmt, names)  # a call, a loop: what it binds or changes is not known
            if not ended:
                out.append((None, assumed))
        return out

    # -- expressions ---------------------------------------------------------------------
    def expr(
        self, node: ast.expr | None, env: dict[str, object], module: str, depth: int
    ) -> list[tuple[object, tuple[str, ...]]]:
        """The values an expression may have, each with the open terms it assumed."""
        self.steps += 1
        if node is None:
            return [(None, ())]
        if self.steps > MAX_STEPS or depth > MAX_DEPTH:
            return [(Open(ast.unparse(node)), ())]
        if isinstance(node, ast.Constant):
            return [(node.value, ())]
        if isinstance(node, ast.Name):
            if node.id in env:
                return [(env[node.id], ())]
            return [(self.global_(module, node.id, depth), ())]
        if isinstance(node, ast.Attribute):
            return [
                (value, more + assumed)
                for base, more in self.expr(node.value, env, module, depth)
                for value, assumed in self.attr(base, node.attr, node, depth)
            ]
        if isinstance(node, ast.Set | ast.List | ast.Tuple):
            items = [self.one(e, env, module, depth) for e in node.elts]
            if any(isinstance(i, Open) or i is _MANY for i in items):
                return [(Open(ast.unparse(node)), ())]
            return [(frozenset(items) if isinstance(node, ast.Set) else tuple(items), ())]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            out: list[_Way] = []
            for value, more in self.expr(node.operand, env, module, depth):
                truth = _truth(value)
                out.append((Open(_negated(_text(value))) if truth is None else not truth, more))
            return out
        if isinstance(node, ast.BoolOp):
            return [(self.boolop(node, env, module, depth), ())]
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            left = self.one(node.left, env, module, depth)
            right = self.one(node.comparators[0], env, module, depth)
            return [(_compare(node.ops[0], left, right, ast.unparse(node)), ())]
        if isinstance(node, ast.Call):
            return self.call(node, env, module, depth)
        return [(Open(ast.unparse(node)), ())]

    def one(self, node: ast.expr, env: dict[str, object], module: str, depth: int) -> object:
        """An expression's value where it has one way (else :data:`_MANY`)."""
        got = self.expr(node, env, module, depth)
        return got[0][0] if len(got) == 1 and not got[0][1] else _MANY

    def boolop(self, node: ast.BoolOp, env: dict[str, object], module: str, depth: int) -> object:
        """``a and b`` / ``a or b``: decided by a known operand, else open on the open operands
        (the known ones that do not decide dropped)."""
        stop = isinstance(node.op, ast.Or)  # the truth that decides the whole
        value: object = None
        left: list[str] = []
        for operand in node.values:
            value = self.one(operand, env, module, depth)
            truth = _truth(value)
            if truth is None:
                left.append(_text(value) if value is not _MANY else ast.unparse(operand))
            elif truth is stop:
                return value
        if not left:
            return value
        joint = " or " if stop else " and "
        return Open(joint.join(f"({t})" if " " in t and len(left) > 1 else t for t in left))

    def call(
        self, node: ast.Call, env: dict[str, object], module: str, depth: int
    ) -> list[tuple[object, tuple[str, ...]]]:
        callee = ast.unparse(node.func)
        args = [self.one(a, env, module, depth) for a in node.args]
        known = not any(isinstance(a, Open) or a is _MANY for a in args) and not node.keywords
        if callee in _GETENV and node.args and isinstance(args[0], str):
            self.settings.append(args[0])
            return [(args[1] if len(args) > 1 else None, ())]
        if callee in _BUILTINS and known and callee not in env:
            try:
                return [(_BUILTINS[callee](*args), ())]
            except (TypeError, ValueError):
                return [(Open(ast.unparse(node)), ())]
        if callee in ("any", "all") and len(node.args) == 1:
            return [(self.quantified(node, env, module, depth), ())]
        if callee == "getattr" and len(node.args) >= 2 and isinstance(args[1], str):
            base = self.one(node.args[0], env, module, depth)
            return self.attr(base, args[1], node, depth)
        func = self.one(node.func, env, module, depth)
        if isinstance(func, _Func) and not node.keywords and depth < MAX_DEPTH:
            return self.invoke(func, args, ast.unparse(node), depth)
        return [(Open(ast.unparse(node)), ())]

    def quantified(self, node: ast.Call, env: dict[str, object], module: str, depth: int) -> object:
        """``any(test for x in items)`` / ``all(...)`` over items the source decides."""
        gen = node.args[0]
        if not (
            isinstance(gen, ast.GeneratorExp)
            and len(gen.generators) == 1
            and isinstance(gen.generators[0].target, ast.Name)
            and not gen.generators[0].ifs
        ):
            return Open(ast.unparse(node))
        items = self.one(gen.generators[0].iter, env, module, depth)
        if not isinstance(items, tuple | frozenset | list):
            return Open(ast.unparse(node))
        name = gen.generators[0].target.id
        truths = [_truth(self.one(gen.elt, {**env, name: i}, module, depth)) for i in items]
        if any(t is None for t in truths):
            return Open(ast.unparse(node))
        return any(truths) if ast.unparse(node.func) == "any" else all(truths)

    def invoke(
        self, func: _Func, args: list[object], text: str, depth: int
    ) -> list[tuple[object, tuple[str, ...]]]:
        """A host function's returns for known positional arguments."""
        node = self.api.def_node(func.found)
        if (
            not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            or func.found.path in self.active
        ):
            return [(Open(text), ())]
        params = [a.arg for a in node.args.posonlyargs + node.args.args]
        given = ([func.bound] if func.bound is not None else []) + args
        if len(given) > len(params) or node.args.vararg or node.args.kwonlyargs:
            return [(Open(text), ())]
        env: dict[str, object] = dict(zip(params, given, strict=False))
        module = func.found.obj.module.path
        for name in params[len(given) :]:
            env[name] = Open(name)  # a default or an argument not passed: not followed
        self.active.add(func.found.path)
        try:
            got = self.run(node.body, env, module, depth + 1)
        finally:
            self.active.discard(func.found.path)
        if not got or (len(got) == 1 and isinstance(got[0][0], Open) and not got[0][1]):
            return [(Open(text), ())]  # named by the call, not by the callee's local
        return got

    # -- names ---------------------------------------------------------------------------
    def attr(self, base: object, name: str, node: ast.AST, depth: int) -> list[_Way]:
        """``base.name``."""
        if isinstance(base, _Mod):
            return [(self.global_(base.path, name, depth), ())]
        if isinstance(base, _Obj):
            return self.member(base, name, node, depth)
        if isinstance(base, Open):
            if name in self.config and "config" in base.text.rsplit(".", 1)[-1]:
                value = self.config[name]
                self.evidence.append(("config.json", 1, f"{name} = {value!r}"))
                return [(value, ())]
            return [(Open(f"{base.text}.{name}"), ())]
        return [(Open(ast.unparse(node)), ())]

    def member(self, obj: _Obj, name: str, node: ast.AST, depth: int) -> list[_Way]:
        """An attribute of a host instance: a property's value, a bound method, or the one
        value the class's methods assign to it."""
        got = self.api.class_member(obj.cls, name)
        text = ast.unparse(node)
        if isinstance(got, Found) and "property" in got.obj.labels:
            return self.invoke(_Func(got, obj), [], text, depth)  # griffe: an attribute
        if isinstance(got, Found) and isinstance(got.obj, griffe.Function):
            return [(_Func(got, obj), ())]
        key = f"{obj.cls.path}.{name}"
        if key in self.active:
            return [(Open(text), ())]
        for klass in self.api.mro(obj.cls)[0]:
            cls_node = self.api.class_node(klass)
            if cls_node is None:
                continue
            found = _self_assignments(cls_node, name)
            if len(found) != 1:
                if found:
                    return [(Open(text), ())]
                continue
            method, value = found[0]
            if value is None:
                return [(Open(text), ())]
            env = _parameters(self.api, method, klass, obj)
            self.active.add(key)
            try:
                ways = self.expr(value, env, klass.obj.module.path, depth + 1)
            finally:
                self.active.discard(key)
            if any(not isinstance(v, Open) or more for v, more in ways):
                self.evidence.append((klass.file, value.lineno, f"{name} = {ast.unparse(value)}"))
            return ways
        return [(self.field_default(obj, name, text, depth), ())]

    def field_default(self, obj: _Obj, name: str, text: str, depth: int) -> object:
        """A field's class-level default (``name: T = value``, ``= field(default=value)``):
        the value an instance has unless its constructor is given ``name``. Only a plain
        literal: a ``None`` default is a field someone fills in later."""
        for klass in self.api.mro(obj.cls)[0]:
            cls_node = self.api.class_node(klass)
            for stmt in cls_node.body if cls_node is not None else []:
                target, value = assignment(stmt)
                if target != name or value is None:
                    continue
                if isinstance(value, ast.Call):
                    given = {k.arg: k.value for k in value.keywords}
                    if "default" not in given:
                        return Open(text)
                    value = given["default"]
                got = self.one(value, {}, klass.obj.module.path, depth + 1)
                if not isinstance(got, bool | int | str):
                    return Open(text)  # ``None`` stands for "filled in later", not a setting
                self.fields.append((klass.path, name))
                self.evidence.append((klass.file, stmt.lineno, f"{name} = {ast.unparse(value)}"))
                return got
        return Open(text)

    def global_(self, module: str, name: str, depth: int) -> object:
        """A module-level name: a host module or function, a literal bound once, or an entry
        of the table the module's ``__getattr__`` serves."""
        table = _module_table(self.api, module)
        if table is None:
            return Open(name)
        imported = table.imports.get(name)
        if imported is not None:
            if self.api.module(imported) is not None:
                return _Mod(imported)
            owner, _, attr = imported.rpartition(".")
            if owner and owner != module and self.api.module(owner) is not None:
                return self.global_(owner, attr, depth + 1)
            return Open(name)
        found = self.api.resolve(f"{module}.{name}")
        if name in table.defs and isinstance(found, Found) and found.kind == "function":
            return _Func(found)
        file = found.file if isinstance(found, Found) else module.replace(".", "/") + ".py"
        if stored_elsewhere(self.api, module, name):
            return Open(name)  # some host code assigns it: not the module's value alone
        bound = table.literals.get(name)
        if bound is not None:
            value = self.one(bound, {}, module, depth + 1)
            if not isinstance(value, Open) and value is not _MANY:
                self.evidence.append((file, bound.lineno, f"{name} = {ast.unparse(bound)}"))
                return value
            return Open(name)
        served = table.served.get(name)
        if served is not None:
            value = self.one(served, {}, module, depth + 1)
            if not isinstance(value, Open) and value is not _MANY:
                self.evidence.append((file, served.lineno, f"{name}: {ast.unparse(served)}"))
                return value
        return Open(name)


def _leaves(stmt: ast.stmt) -> bool:
    """Whether a statement may return or raise (an ``if`` that does not only binds names)."""
    return any(isinstance(n, ast.Return | ast.Raise) for n in ast.walk(stmt))


def _forget(stmt: ast.stmt, names: dict[str, object]) -> None:
    """Open every name a statement binds and every name whose method it calls
    (``items.append(x)``)."""
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names[node.id] = Open(node.id)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and not isinstance(names.get(node.func.value.id), _Obj | _Mod | _Func)
            and node.func.value.id in names
        ):
            names[node.func.value.id] = Open(node.func.value.id)  # host objects: class facts


#: The value of an expression that has more than one way.
_MANY = Open("<several>")


@dataclass
class _Table:
    imports: dict[str, str]
    defs: set[str]
    literals: dict[str, ast.expr]
    served: dict[str, ast.expr]


def _module_table(api: HostAPI, module: str) -> _Table | None:
    """The names a module binds at its top level, read once per release."""
    cache = api.__dict__.setdefault("_switch_tables", {})
    if module in cache:
        return cache[module]
    text = api.module_text(module)
    table = None
    if text is not None:
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            tree = None
        if tree is not None:
            table = _read_table(tree, module, api.module(module))
    cache[module] = table
    return table


def _read_table(tree: ast.Module, module: str, mod: griffe.Module | None) -> _Table:
    package = module if mod is not None and mod.is_package else module.rpartition(".")[0]
    imports: dict[str, str] = {}
    defs: set[str] = set()
    literals: dict[str, ast.expr] = {}
    served: dict[str, ast.expr] = {}
    stores: dict[str, int] = {}
    for node in run_nodes(tree):  # a binding under ``if TYPE_CHECKING:`` never runs
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            stores[node.id] = stores.get(node.id, 0) + 1
        elif isinstance(node, ast.Global | ast.Nonlocal):
            for n in node.names:
                stores[n] = stores.get(n, 0) + 2  # a function rebinds it
    getattr_served = any(
        isinstance(s, ast.FunctionDef) and s.name == "__getattr__" for s in tree.body
    )
    for stmt in tree.body:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname:
                    imports[alias.asname] = alias.name
                else:
                    head = alias.name.split(".")[0]
                    imports[head] = head
        elif isinstance(stmt, ast.ImportFrom):
            base = stmt.module or ""
            if stmt.level:
                parts = package.split(".")
                parent = ".".join(parts[: len(parts) - stmt.level + 1])
                base = f"{parent}.{base}" if base else parent
            for alias in stmt.names:
                imports[alias.asname or alias.name] = f"{base}.{alias.name}"
        elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defs.add(stmt.name)
        target, value = assignment(stmt)
        if target is not None and value is not None and stores.get(target) == 1:
            literals[target] = value
        if getattr_served and isinstance(stmt, ast.Assign | ast.AnnAssign):
            if isinstance(stmt.value, ast.Dict):
                for key, entry in zip(stmt.value.keys, stmt.value.values, strict=True):
                    if (
                        isinstance(key, ast.Constant)
                        and isinstance(key.value, str)
                        and isinstance(entry, ast.Lambda)
                        and not entry.args.args
                        and stores.get(key.value, 0) == 0
                    ):
                        served[key.value] = entry.body
    return _Table(imports, defs, literals, served)


def _self_assignments(
    cls: ast.ClassDef, name: str
) -> list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, ast.expr | None]]:
    """``self.name = value`` in the class's methods, with the method (None: ``self.name += ...``,
    a value not known)."""
    out: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, ast.expr | None]] = []
    for item in cls.body:
        if not isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) or not item.args.args:
            continue
        me = item.args.args[0].arg
        for node in ast.walk(item):
            value: ast.expr | None
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            elif isinstance(node, ast.AugAssign):
                targets, value = [node.target], None
            else:
                continue
            for target in targets:
                if (
                    isinstance(target, ast.Attribute)
                    and target.attr == name
                    and isinstance(target.value, ast.Name)
                    and target.value.id == me
                ):
                    out.append((item, value))
    return out


def _parameters(
    api: HostAPI, method: ast.FunctionDef | ast.AsyncFunctionDef, klass: Found, me: _Obj
) -> dict[str, object]:
    """A method's names: ``self`` the instance, a parameter annotated with a host class an
    instance of it, any other parameter or local open."""
    env: dict[str, object] = {}
    for node in ast.walk(method):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            env[node.id] = Open(node.id)
    params = method.args.posonlyargs + method.args.args + method.args.kwonlyargs
    for arg in params:
        env[arg.arg] = Open(arg.arg)
        if arg.annotation is not None:
            text = ast.unparse(arg.annotation).strip("'\"")
            path = _resolve(api, klass, text)
            found = api.resolve(path) if path else None
            if isinstance(found, Found) and found.kind == "class":
                env[arg.arg] = _Obj(found)
    env[method.args.args[0].arg] = me
    return env


def _resolve(api: HostAPI, klass: Found, text: str) -> str | None:
    if not text.replace(".", "").isidentifier():
        return None
    head = text.split(".", 1)[0]
    try:
        return klass.obj.resolve(head) + text[len(head) :]
    except Exception:  # noqa: BLE001 - griffe raises NameResolutionError for unknown names
        return None


def _truth(value: object) -> bool | None:
    if isinstance(value, Open | _Func | _Obj | _Mod):
        return None if isinstance(value, Open) else True
    try:
        return bool(value)
    except Exception:  # noqa: BLE001 - a value whose truth is not plain
        return None


def _text(value: object) -> str:
    return value.text if isinstance(value, Open) else repr(value)


_FLIPPED = {ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
            ast.In: ast.NotIn, ast.NotIn: ast.In}  # fmt: skip


def _negated(text: str) -> str:
    """The source text of ``not (text)``, simplified where it reads as plainly."""
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return f"not ({text})"
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return ast.unparse(node.operand)
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _FLIPPED:
        node.ops = [_FLIPPED[type(node.ops[0])]()]
        return ast.unparse(node)
    return ast.unparse(ast.UnaryOp(ast.Not(), node))


def _compare(op: ast.cmpop, left: object, right: object, text: str) -> object:
    if any(isinstance(v, Open | _Func | _Obj | _Mod) or v is _MANY for v in (left, right)):
        return Open(text)
    try:
        if isinstance(op, ast.Is):
            return left is right
        if isinstance(op, ast.IsNot):
            return left is not right
        if isinstance(op, ast.Eq):
            return left == right
        if isinstance(op, ast.NotEq):
            return left != right
        if isinstance(op, ast.In):
            return left in right  # type: ignore[operator]  # a known container
        if isinstance(op, ast.NotIn):
            return left not in right  # type: ignore[operator]  # a known container
    except TypeError:
        return Open(text)
    return Open(text)


def selection(
    api: HostAPI, owner: Found, line: int, condition: str, config: dict[str, object]
) -> Selection | None:
    """How the release's defaults decide ``condition``, the test under which ``owner``'s method
    at ``line`` takes an arm (None: the source decides none of its terms)."""
    cache = api.__dict__.setdefault("_switch_selections", {})
    key = (owner.path, line, condition, tuple(sorted((k, repr(v)) for k, v in config.items())))
    if key not in cache:
        cache[key] = _selection(api, owner, line, condition, config)
    return cache[key]


def _selection(
    api: HostAPI, owner: Found, line: int, condition: str, config: dict[str, object]
) -> Selection | None:
    node = api.class_node(owner)
    method = next(
        (
            m
            for m in (node.body if node is not None else [])
            if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)
            and m.args.args
            and m.lineno <= line <= (m.end_lineno or m.lineno)
        ),
        None,
    )
    if method is None:
        return None
    try:
        test = ast.parse(condition, mode="eval").body if condition else None
    except SyntaxError:
        return None
    if test is None:
        return None
    reader = _Reader(api, config)
    env = _parameters(api, method, owner, _Obj(owner))
    paths: list[tuple[str, ...]] = []
    for value, assumed in reader.run([ast.If(test, [ast.Return(ast.Constant(True))], [])],
                                     env, owner.obj.module.path, 0):  # fmt: skip
        if value is True:
            paths.append(tuple(dict.fromkeys(assumed)))
    if not reader.evidence and not reader.settings:
        return None
    return Selection(
        tuple(sorted(set(paths), key=len)),
        tuple(dict.fromkeys(reader.settings)),
        tuple(dict.fromkeys(reader.evidence)),
        tuple(dict.fromkeys(reader.fields)),
    )
