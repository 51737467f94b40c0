"""Deprecations and removals of one parameter, read from a host function's body.

A ``warnings.warn(...)`` about a deprecation under a test of a parameter (``if min_items is not
None:``, ``if "const" in kwargs:``, a local popped from ``**kwargs``) deprecates *that
parameter*: only calls that pass it are affected. A ``raise`` under such a test whose message
names the parameter and says it is gone ("`regex` is removed. use `pattern` instead") means
the parameter no longer works. The replacement is the other parameter the message names, or
the one the guarded block assigns from it (``min_length = min_items``). Under a test of its type
(``isinstance(data, X)``, ``hasattr(field, "m")``) a warning or raise is about values of that
type, and a warning about a parameter without a default (every call passes it) is about its
value: no note.

A warning under a test of one value (``if strategy == "threadlocal":``) is about that value:
a call passing another literal is not affected. A decorator about parameters
(``@deprecated_params(strategy=...)``, ``@deprecate_kwarg(old_arg_name=...)``) deprecates
those parameters, never the whole function.

A warning under no parameter test deprecates the whole function (:func:`function_notes`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import cast

from driftcheck.host.api import Found, HostAPI
from driftcheck.host.served import Interpreter

DEPRECATION = re.compile(r"deprecat|FutureWarning|PendingDeprecation|will be removed", re.I)
# A raise that says the parameter is gone (not one that validates its value).
_GONE = re.compile(r"\bremoved\b|no longer|not supported|unsupported|renamed|\binstead\b", re.I)
# A word a message marks as a name: quoted, after "use"/"in favor of", or before "instead".
_MARKED = re.compile(
    r"[`'\"]([A-Za-z_]\w*)=?[`'\"]"
    r"|\b(?:[Uu]se|favou?r of)\s+([A-Za-z_]\w*)\b"
    r"|\b([A-Za-z_]\w*)=?\s+instead\b"
)


#: A parameter whose absence warns (``if x is None: warn("pass x")``): calls that leave it out.
OMITTED = "deprecated-if-omitted"
#: The note of a test on ``**kwargs`` itself: any keyword the named parameters do not take.
EXTRA = "**"


@dataclass(frozen=True)
class ParamNote:
    """What happens when a caller passes ``param``."""

    param: str
    status: str  # "deprecated" or "removed"
    message: str
    line: int
    replacement: str | None = None
    #: The values the host warns for (``if strategy == "threadlocal": warn(...)``), each as
    #: ``repr`` of the literal; empty: any value.
    values: tuple[str, ...] = ()


def parameter_notes(api: HostAPI, func: Found) -> list[ParamNote]:
    """Per-parameter deprecations and removals of a host function (cached per release)."""
    key = f"param-notes:{func.file}:{func.line}:{func.obj.name}"

    def compute() -> list[list]:
        notes, _ = _read(api, func)
        return [
            [n.param, n.status, n.message, n.line, n.replacement, list(n.values)] for n in notes
        ]

    rows = api.fact(key, compute)
    return [
        ParamNote(r[0], r[1], r[2], r[3], r[4], tuple(r[5]) if len(r) > 5 else ()) for r in rows
    ]


def function_notes(api: HostAPI, func: Found) -> list[str]:
    """Deprecation messages the function emits whatever its arguments (and ``@deprecated``)."""
    key = f"deprecations:{func.file}:{func.line}:{func.obj.name}"
    return list(api.fact(key, lambda: _read(api, func)[1]))


def message_text(api: HostAPI, module: str, node: ast.expr) -> str:
    """A warning's text; a module constant (``warn(SOME_MSG, ...)``) is read where it is bound."""
    if isinstance(node, ast.Name):
        value = Interpreter(api, module).global_value(module, node.id, 0)
        if isinstance(value, str):
            return value
    return literal(node) or ast.unparse(node)


def validated(api: HostAPI, func: Found) -> list[str]:
    """Parameters the function checks before use: a ``raise`` under a test of them."""

    def compute() -> list[str]:
        node = api.def_node(func)
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return []
        args = node.args
        params = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
        reader = _Reader(params, args.kwarg.arg if args.kwarg else None, lambda n: "")
        reader.block(node.body, ())
        return sorted(reader.validated)

    return list(api.fact(f"validated:{func.file}:{func.line}:{func.obj.name}", compute))


def _read(api: HostAPI, func: Found) -> tuple[list[ParamNote], list[str]]:
    node = api.def_node(func)
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return [], []
    whole: list[str] = []
    args = node.args
    params = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    params = [p for p in params if p not in ("self", "cls")]
    kwargs = args.kwarg.arg if args.kwarg else None
    decorated: list[ParamNote] = []
    for deco in node.decorator_list:
        by_param = decorator_params(deco, set(params), kwargs is not None)
        if by_param is not None:
            decorated.extend(by_param)
        elif re.search(r"\bdeprecated\b", ast.unparse(deco)):
            whole.append(literal(deco) or ast.unparse(deco))
    positional = [*args.posonlyargs, *args.args]
    defaults = {
        a.arg: d
        for a, d in zip(
            positional[len(positional) - len(args.defaults) :], args.defaults, strict=True
        )
    }
    defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d})
    reader = _Reader(
        set(params), kwargs, lambda n: message_text(api, func.obj.module.path, n), defaults
    )
    reader.block(node.body, ())
    for message, _line in reader.unguarded:
        whole.append(message)
    return [*decorated, *reader.notes], whole


# A decorator about parameters rather than the function (``deprecated_params``,
# ``deprecate_kwarg``, ``renamed_arguments``): its name says so.
_PARAM_DECORATOR = re.compile(
    r"deprecat\w*(param|arg|kw|keyword)|(param|arg|kw|keyword)\w*deprecat", re.I
)
# Not about parameters passed: about arguments passed by position (``positional_decorated``).
_POSITIONAL_DECORATOR = re.compile(r"nonkeyword|positional", re.I)
# A decorator's own options, never a parameter of the function it wraps.
_OPTIONS = frozenset(
    {
        "version",
        "since",
        "removal",
        "message",
        "msg",
        "category",
        "stacklevel",
        "name",
        "allowed_args",
        "alternative",
        "removed_in",
        "details",
    }
)


def decorator_params(deco: ast.expr, params: set[str], kwargs: bool) -> list[ParamNote] | None:
    """The parameters a deprecation decorator is about (SQLAlchemy's
    ``@deprecated_params(strategy=("1.4", "..."))``, pandas' ``@deprecate_kwarg(
    old_arg_name="x", new_arg_name="y")``): it warns only for a call that passes one of them,
    so each is a parameter's note, never the whole function's. None: not such a decorator."""
    if not isinstance(deco, ast.Call):
        return None
    head = ast.unparse(deco.func).rsplit(".", 1)[-1]
    if not _PARAM_DECORATOR.search(head) or _POSITIONAL_DECORATOR.search(head):
        return None
    out: list[ParamNote] = []
    options = {k.arg: k.value for k in deco.keywords if k.arg}
    old = options.get("old_arg_name")
    if isinstance(old, ast.Constant) and isinstance(old.value, str):
        new = options.get("new_arg_name")
        renamed = (
            new.value if isinstance(new, ast.Constant) and isinstance(new.value, str) else None
        )
        message = f"{old.value} is deprecated" + (f"; use {renamed} instead" if renamed else "")
        return [ParamNote(old.value, "deprecated", message, deco.lineno, renamed)]
    for name, value in options.items():
        texts = [
            n.value
            for n in ast.walk(value)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
        ]
        if name in params or (kwargs and texts and name not in _OPTIONS):
            message = max(texts, key=len) if texts else f"{name} is deprecated"
            out.append(ParamNote(name, "deprecated", message, deco.lineno))
    return out


class _Reader:
    def __init__(
        self,
        params: set[str],
        kwargs: str | None,
        text: Callable[[ast.expr], str],
        defaults: dict[str, ast.expr] | None = None,
    ) -> None:
        self.defaults = defaults or {}
        # Parameters every call passes (no default): a warning under a test of one is about
        # its value (``if a.shape[-1] == 2``), not about passing it. Unknown without defaults.
        self.required = params - self.defaults.keys() if defaults is not None else set()
        self.text = text
        self.strings: dict[str, str] = {}
        self.derived: dict[str, list[str]] = {}
        self.validated: set[str] = set()
        self.assigned: set[str] = set()
        self.kept: dict[str, str] = {}  # ``self.x`` -> the parameter it was set from
        self.params = params
        self.kwargs = kwargs
        self.aliases: dict[str, str] = {}  # local name -> keyword it was popped from
        self.notes: list[ParamNote] = []
        self.unguarded: list[tuple[str, int]] = []

    def block(self, body: list[ast.stmt], guards: tuple[ast.expr, ...]) -> None:
        for stmt in body:
            self.statement(stmt, guards)

    def statement(self, stmt: ast.stmt, guards: tuple[ast.expr, ...]) -> None:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            return
        if isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            self.assigned.update(
                n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)
            )
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            key = self.popped_key(stmt.value)
            target = stmt.targets[0]
            if (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
                and isinstance(stmt.value, ast.Name)
                and stmt.value.id in self.params
            ):
                self.kept[target.attr] = stmt.value.id  # ``self.opclasses = opclasses``
            if key and isinstance(target, ast.Name):
                self.aliases[target.id] = key
            elif isinstance(target, ast.Name):
                # ``old_used = (start is not no_default) or (end is not no_default)``
                looked = [
                    n.id
                    for n in ast.walk(stmt.value)
                    if isinstance(n, ast.Name) and n.id in self.params
                ]
                if looked and isinstance(stmt.value, ast.BoolOp | ast.Compare | ast.UnaryOp):
                    self.derived[target.id] = looked
            if isinstance(target, ast.Name) and isinstance(
                stmt.value, ast.Constant | ast.JoinedStr | ast.BinOp
            ):
                text = literal(stmt.value)
                if text:
                    self.strings[target.id] = text  # ``msg = "..."; warn(msg, ...)``
        if isinstance(stmt, ast.If):
            self.block(stmt.body, (*guards, stmt.test))
            # ``else:`` runs when the test fails (``if x is NOT_PASSED: ... else: warn``: still
            # about x); an ``elif`` has its own test, and what the first one looked at is not
            # what it is about (``if old and new: raise ... elif old: warn``).
            elif_ = len(stmt.orelse) == 1 and isinstance(stmt.orelse[0], ast.If)
            negated = ast.UnaryOp(op=ast.Not(), operand=stmt.test)
            self.block(stmt.orelse, guards if elif_ else (*guards, negated))
            return
        if isinstance(stmt, ast.Raise):
            self.raised(stmt, guards)
            return
        for child in ast.iter_child_nodes(stmt):
            if isinstance(child, ast.Call):
                self.call(child, guards)
        for name in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(stmt, name, None)
            if isinstance(inner, list):
                if name == "handlers":
                    for handler in inner:
                        self.block(handler.body, guards)
                else:
                    self.block(inner, guards)

    def popped_key(self, value: ast.expr) -> str | None:
        """``kwargs.pop("k", ...)`` / ``kwargs.get("k")`` / ``kwargs["k"]`` -> ``k``."""
        if self.kwargs is None:
            return None
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
            owner = value.func.value
            if (
                isinstance(owner, ast.Name)
                and owner.id == self.kwargs
                and value.func.attr in ("pop", "get")
                and value.args
                and isinstance(value.args[0], ast.Constant)
                and isinstance(value.args[0].value, str)
            ):
                return value.args[0].value
        if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name):
            if value.value.id == self.kwargs and isinstance(value.slice, ast.Constant):
                return str(value.slice.value)
        return None

    def tested(self, guards: tuple[ast.expr, ...]) -> list[str]:
        """The parameters (keywords) the enclosing tests look at."""
        out: list[str] = []
        for test in guards:
            for node in ast.walk(test):
                if (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Name)
                    and node.value.id == "self"
                    and node.attr in self.kept
                ):
                    if self.kept[node.attr] not in out:
                        out.append(self.kept[node.attr])
                elif isinstance(node, ast.Name) and node.id in self.derived:
                    out.extend(p for p in self.derived[node.id] if p not in out)
                elif isinstance(node, ast.Name):
                    name = self.aliases.get(node.id) or (
                        node.id if node.id in self.params or node.id == self.kwargs else ""
                    )
                    if name and name not in out:
                        out.append(name)
                elif isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.In | ast.NotIn):
                    right = node.comparators[0]
                    if (
                        isinstance(right, ast.Name)
                        and right.id == self.kwargs
                        and isinstance(node.left, ast.Constant)
                        and isinstance(node.left.value, str)
                    ):
                        out.append(node.left.value)
                elif isinstance(node, ast.Call):
                    key = self.popped_key(node)
                    if key and key not in out:
                        out.append(key)
        if self.kwargs in out:
            out.remove(self.kwargs)
            if not out:
                out.append(EXTRA)  # ``if kwargs:``: any keyword that lands in ``**kwargs``
        return out

    def call(self, call: ast.Call, guards: tuple[ast.expr, ...]) -> None:
        head = ast.unparse(call.func)
        if not head.endswith("warn") or not call.args:
            return
        if not DEPRECATION.search(ast.unparse(call)):
            return
        arg = call.args[0]
        local = self.strings.get(arg.id) if isinstance(arg, ast.Name) else None
        message = local or self.text(arg)
        params = self.tested(guards)
        if not params:
            # Under a test of the object's state or of a local (``if self.criterion == "mse"``)
            # it warns for some calls only, and which is not the caller's to see: no note.
            if not any(self.stateful(g) for g in guards):
                self.unguarded.append((message, call.lineno))
            return
        params = [p for p in params if p not in self.type_tested(guards)]
        params = [p for p in params if p not in self.required]
        if not params:
            # It warns about values of one type (``isinstance(data, X)``, ``hasattr(field,
            # "m")``) or of a parameter every call passes: no note.
            return
        named = [p for p in params if _names(message, p)]
        for param in named or params:
            # ``if supported_tasks is None: warn(...)``: it warns when the caller leaves it out
            status = OMITTED if self.fires_by_default(param, guards) else "deprecated"
            values = self.warned_values(param, guards) if status != OMITTED else ()
            self.notes.append(
                ParamNote(
                    param, status, message, call.lineno, self.replacement(message, param), values
                )
            )

    def warned_values(self, param: str, guards: tuple[ast.expr, ...]) -> tuple[str, ...]:
        """The literal values a test compares ``param`` to (``if strategy == "threadlocal"``,
        ``if mode in ("a", "b")``, alone or in an ``and``): the warning is about those values
        only. Empty when any test of it is another kind (then any value may warn)."""
        values: list[str] = []
        for test in guards:
            parts = (
                test.values
                if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And)
                else [test]
            )
            for part in parts:
                if not (
                    isinstance(part, ast.Compare)
                    and len(part.ops) == 1
                    and isinstance(part.left, ast.Name)
                    and self.aliases.get(part.left.id, part.left.id) == param
                ):
                    if param in self.tested((part,)):
                        return ()  # tested some other way too
                    continue
                op, right = part.ops[0], part.comparators[0]
                items = (
                    right.elts
                    if isinstance(op, ast.In) and isinstance(right, ast.Tuple | ast.List | ast.Set)
                    else [right]
                    if isinstance(op, ast.Eq)
                    else None
                )
                if items is None:
                    return ()
                for item in items:
                    try:
                        values.append(repr(ast.literal_eval(item)))
                    except (ValueError, SyntaxError, TypeError):
                        return ()
        return tuple(values)

    def type_tested(self, guards: tuple[ast.expr, ...]) -> set[str]:
        """What the tests check the type of (``isinstance(x, T)``, ``type(x) is T``,
        ``hasattr(x, "m")``, ``callable(x)``)."""
        return {
            self.aliases.get(n.args[0].id, n.args[0].id)
            for test in guards
            for n in ast.walk(test)
            if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name)
            and n.func.id in ("isinstance", "issubclass", "type", "hasattr", "callable")
            and n.args
            and isinstance(n.args[0], ast.Name)
        }

    def stateful(self, test: ast.expr) -> bool:
        """Whether a test looks at ``self``/``cls`` or at a local of the function."""
        return any(
            isinstance(n, ast.Name) and (n.id in ("self", "cls") or n.id in self.assigned)
            for n in ast.walk(test)
        )

    def fires_by_default(self, param: str, guards: tuple[ast.expr, ...]) -> bool:
        """Whether the tests about ``param`` hold when the caller leaves it at its default."""
        default = self.defaults.get(param)
        if default is None:
            return False
        decided = [_at_default(g, param, default) for g in guards if _about(g, param)]
        return bool(decided) and all(d is True for d in decided)

    def raised(self, stmt: ast.Raise, guards: tuple[ast.expr, ...]) -> None:
        self.validated.update(p for p in self.tested(guards) if p in self.params)
        exc = stmt.exc
        if not (isinstance(exc, ast.Call) and exc.args):
            return
        message = literal(exc.args[0])
        if not message or not _GONE.search(message):
            return
        typed = self.type_tested(guards)
        for param in self.tested(guards):
            # A raise under ``isinstance(data, X)`` rejects values of one type, not the
            # parameter (pandas 2's ``DataFrame(data=...)`` for MaskedRecords).
            if _names(message, param) and param not in typed:
                self.notes.append(
                    ParamNote(
                        param, "removed", message, stmt.lineno, self.replacement(message, param)
                    )
                )

    def replacement(self, message: str, param: str) -> str | None:
        """The other parameter of the function that the message names as the replacement
        (``use `pattern```); None when it names none, or two (the choice is the caller's)."""
        named = replacements(message, param, self.params)
        return named[0] if len(named) == 1 else None


def replacements(message: str, param: str, params: Iterable[str]) -> list[str]:
    """The parameters a message names as replacements of ``param``: quoted (`` `x` ``,
    ``'x'``), after "use" or "in favor of", or before "instead". A bare word that happens to
    be a parameter's name ("`min_items` is deprecated" beside a parameter ``deprecated``) is
    not one."""
    names = set(params)
    out: list[str] = []
    for m in _MARKED.finditer(message):
        word = next(g for g in m.groups() if g)
        if word != param and word in names and word not in out:
            out.append(word)
    return out


def _about(test: ast.expr, param: str) -> bool:
    """A test on ``param`` alone (``x is None``, ``not x``, ``x``)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _about(test.operand, param)
    if isinstance(test, ast.Name):
        return test.id == param
    return (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.left, ast.Name)
        and test.left.id == param
    )


def _at_default(test: ast.expr, param: str, default: ast.expr) -> bool | None:
    """``test`` with ``param`` at its default (None when that cannot be told)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _at_default(test.operand, param, default)
        return None if inner is None else not inner
    if isinstance(test, ast.Name):
        return bool(default.value) if isinstance(default, ast.Constant) else None
    if not isinstance(test, ast.Compare):
        return None
    op, other = test.ops[0], test.comparators[0]
    if isinstance(other, ast.Constant) and isinstance(default, ast.Constant):
        same = other.value == default.value and type(other.value) is type(default.value)
    elif ast.unparse(other) == ast.unparse(default):
        same = True  # the same sentinel (``x is NOT_PASSED`` with ``x=NOT_PASSED``)
    else:
        return None
    if isinstance(op, ast.Is | ast.Eq):
        return same
    if isinstance(op, ast.IsNot | ast.NotEq):
        return not same
    return None


def _names(message: str, param: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(param)}(?!\w)", message) is not None


_MESSAGE_KEYWORDS = ("message", "msg", "reason")
_VERSION_ONLY = re.compile(r"v?\d+(?:\.\d+)*(?:\.?(?:a|b|rc|dev|post)\d*)?")


def literal(node: ast.expr) -> str:
    """The text of a message (f-string holes as ``...``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        # An f-string's literal pieces are str constants.
        return "".join(
            cast(str, p.value) if isinstance(p, ast.Constant) else "..." for p in node.values
        )
    if isinstance(node, ast.Call):
        # ``@deprecated_cls("1.4", "X is deprecated ...")``: the message, not the version the
        # decorator takes first; a ``message=`` keyword where the call names one.
        named = [kw.value for kw in node.keywords if kw.arg in _MESSAGE_KEYWORDS]
        texts = [literal(a) for a in (*named, *node.args)]
        for text in texts:
            if text and not _VERSION_ONLY.fullmatch(text.strip()):
                return text
        if node.args:
            return texts[len(named)]
    parts = [
        n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]
    return "".join(parts)
