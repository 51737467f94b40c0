"""What a host does with an inner class a client class declares, the class itself rather than its
options (pydantic 2 warns "Support for class-based `config` is deprecated" for any ``class
Config``), release by release, read from the host's source.

A host looks the inner class up by name (``namespace.get("Config")``, ``attrs.pop("Meta")``,
``getattr(cls, "Meta", None)``) and then tests the value, in the same function or in the one it
hands the value to (``prepare_config(config_class_from_namespace)``): an ``if`` whose test holds
for a class (``if not isinstance(config, dict):``, ``if meta is not None:``) and whose block
warns or raises does so to every client class declaring it. A test that also depends on
something else (``if config and model_config:``) does so only sometimes (``conditional``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from driftcheck.host.api import HostAPI
from driftcheck.host.class_hooks import Treatment, _first_verdict
from driftcheck.host.class_options import INNER_LOOKUP, _imported_files

_CAPITALISED = re.compile(r"^[A-Z][A-Za-z0-9]*$")
#: Names of types a class is never an instance of (``isinstance(config, dict)`` is false).
_NOT_A_CLASS = frozenset(
    "dict list tuple str bytes int float bool set frozenset Mapping MutableMapping Sequence "
    "MutableSequence".split()
)


@dataclass(frozen=True)
class InnerTreat:
    """One host function's lookup of an inner class by name, and what it does with the class.

    Attributes:
        inner: The inner class's name (``Config``).
        function: The function that looks it up (``for_model``, ``__new__``).
        file: Its host file.
        line: The line of the lookup.
        treatment: reads (no warning or raise), warns or rejects.
        message: The host's message (warns, rejects).
        at_file: The file of the warning or raise (the lookup's or the function's it calls).
        at: Its line.
        conditional: The test also depends on something other than the class.
    """

    inner: str
    function: str
    file: str
    line: int
    treatment: Treatment
    message: str = ""
    at_file: str = ""
    at: int = 0
    conditional: bool = False


def inner_class_treatments(api: HostAPI) -> list[InnerTreat]:
    """Every lookup of an inner class by name in the release, with what follows it (one pass
    over the host, kept in the snapshot)."""

    def compute() -> list[list]:
        texts = api.source_texts()
        parsed: dict[str, ast.Module | None] = {}

        def module(rel: str) -> ast.Module | None:
            if rel not in parsed:
                parsed[rel] = _parse(texts[rel])
            return parsed[rel]

        rows: list[list] = []
        for rel in sorted(texts):
            text = texts[rel]
            if not INNER_LOOKUP.search(text):
                continue
            tree = module(rel)
            if tree is None:
                continue

            def modules(rel: str = rel, text: str = text) -> Iterator[tuple[str, ast.Module]]:
                """The module, then the host modules it imports (parsed only when asked)."""
                for r in (rel, *_imported_files(text, rel, texts)):
                    if (m := module(r)) is not None:
                        yield r, m

            for t in _module_treats(tree, rel, modules):
                rows.append(
                    [t.inner, t.function, t.file, t.line, t.treatment, t.message, t.at_file,
                     t.at, t.conditional]
                )  # fmt: skip
        return rows

    return [
        InnerTreat(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], bool(r[8]))
        for r in api.fact("class_inner_classes", compute)
    ]


def _parse(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def _module_treats(
    tree: ast.Module, rel: str, modules: Callable[[], Iterator[tuple[str, ast.Module]]]
) -> list[InnerTreat]:
    out: list[InnerTreat] = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for lookup, inner in _lookups(fn):
            held = _holders(fn, lookup)
            found = _tests(fn.body, held, rel, _constants(tree))
            for call, index in _handed_to(fn, held):
                for callee_rel, callee_tree, callee, param in _callees(call, index, modules()):
                    constants = _constants(callee_tree)
                    found += _tests(callee.body, _names({param}), callee_rel, constants)
            base = InnerTreat(inner, fn.name, rel, lookup.lineno, "reads")
            out.append(base)
            out += [
                InnerTreat(inner, fn.name, rel, lookup.lineno, v, m, f, at, cond)
                for v, m, f, at, cond in found
            ]
    return out


def _lookups(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[tuple[ast.Call, str]]:
    """The calls of the function that look an inner class up by a capitalised name
    (``x.get("Config")``, ``x.pop("Meta", None)``, ``getattr(x, "Meta", None)``)."""
    out: list[tuple[ast.Call, str]] = []
    for node in _own_nodes(fn):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("get", "pop") and node.args:
            arg = node.args[0]
        elif isinstance(func, ast.Name) and func.id == "getattr" and len(node.args) > 1:
            arg = node.args[1]
        else:
            continue
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            if _CAPITALISED.match(arg.value):
                out.append((node, arg.value))
    return out


def _own_nodes(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.AST]:
    """The nodes of a function's body, its nested functions and classes left out."""
    out: list[ast.AST] = []
    todo: list[ast.AST] = list(fn.body)
    while todo:
        node = todo.pop()
        out.append(node)
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            todo.extend(ast.iter_child_nodes(node))
    return out


class _Held:
    """What holds the looked-up class in a function: the lookup call, names bound to it."""

    def __init__(self, nodes: set[int], names: set[str]) -> None:
        self.nodes, self.names = nodes, names

    def __call__(self, node: ast.AST) -> bool:
        return id(node) in self.nodes or isinstance(node, ast.Name) and node.id in self.names


def _names(names: set[str]) -> _Held:
    return _Held(set(), names)


def _holders(fn: ast.FunctionDef | ast.AsyncFunctionDef, lookup: ast.Call) -> _Held:
    names = {
        t.id
        for node in _own_nodes(fn)
        if isinstance(node, ast.Assign) and node.value is lookup
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    return _Held({id(lookup)}, names)


def _handed_to(
    fn: ast.FunctionDef | ast.AsyncFunctionDef, held: _Held
) -> list[tuple[ast.Call, int]]:
    """The calls the function hands the class to, with the argument's position."""
    return [
        (node, i)
        for node in _own_nodes(fn)
        if isinstance(node, ast.Call)
        for i, arg in enumerate(node.args)
        if held(arg)
    ]


def _callees(
    call: ast.Call, index: int, modules: Iterator[tuple[str, ast.Module]]
) -> list[tuple[str, ast.Module, ast.FunctionDef | ast.AsyncFunctionDef, str]]:
    """The host functions of that name in the module or the host modules it imports (the first
    module that has one), with the parameter the argument binds."""
    func = call.func
    name = (
        func.id
        if isinstance(func, ast.Name)
        else func.attr
        if isinstance(func, ast.Attribute)
        else ""
    )
    for rel, tree in modules:
        found = []
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.name != name:
                continue
            params = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
            bound = isinstance(func, ast.Attribute) and params[:1] in (["self"], ["cls"])
            at = index + 1 if bound else index
            if at < len(params):
                found.append((rel, tree, node, params[at]))
        if found:
            return found
    return []


def _constants(tree: ast.Module) -> dict[str, str]:
    """The module's string constants (``DEPRECATION_MESSAGE = '...'``)."""
    return {
        t.id: stmt.value.value
        for stmt in tree.body
        if isinstance(stmt, ast.Assign)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
        for t in stmt.targets
        if isinstance(t, ast.Name)
    }


def _tests(
    body: list[ast.stmt], held: _Held, rel: str, constants: dict[str, str]
) -> list[tuple[Treatment, str, str, int, bool]]:
    """What the ``if`` statements testing the class do where the test holds for a class."""
    out: list[tuple[Treatment, str, str, int, bool]] = []
    for node in (n for stmt in body for n in _walk_stmt(stmt)):
        if not isinstance(node, ast.If) or not any(held(n) for n in ast.walk(node.test)):
            continue
        truth = _truth(node.test, held)
        block = node.body if truth is not False else node.orelse
        verdict = _first_verdict(block)
        if verdict is None or verdict[0] == "reads":
            continue
        treatment, message, at, nested = verdict
        out.append((treatment, constants.get(message, message), rel, at, truth is None or nested))
    return out


def _walk_stmt(stmt: ast.stmt) -> list[ast.AST]:
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return []
    out: list[ast.AST] = [stmt]
    for child in ast.iter_child_nodes(stmt):
        if isinstance(child, ast.stmt):
            out += _walk_stmt(child)
    return out


def _truth(test: ast.expr, held: _Held) -> bool | None:
    """Whether the test holds when the class is what it tests (None: it depends on more)."""
    if held(test):
        return True
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _truth(test.operand, held)
        return None if inner is None else not inner
    if isinstance(test, ast.BoolOp):
        values = [_truth(v, held) for v in test.values]
        if isinstance(test.op, ast.And):
            return False if False in values else True if all(values) else None
        return True if True in values else False if all(v is False for v in values) else None
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and held(test.left)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    ):
        if isinstance(test.ops[0], ast.Is):
            return False
        if isinstance(test.ops[0], ast.IsNot):
            return True
        return None
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.args:
        if test.func.id == "callable" and held(test.args[0]):
            return True
        if test.func.id == "isinstance" and len(test.args) == 2 and held(test.args[0]):
            kinds = test.args[1]
            names = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
            each = [_is_class_of(n) for n in names]
            return True if True in each else False if all(e is False for e in each) else None
    return None


def _is_class_of(node: ast.expr) -> bool | None:
    name = (
        node.id
        if isinstance(node, ast.Name)
        else node.attr
        if isinstance(node, ast.Attribute)
        else ""
    )
    if name == "type":
        return True
    return False if name in _NOT_A_CLASS else None
