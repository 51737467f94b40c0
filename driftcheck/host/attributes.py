"""Instance attributes of host classes, read from their methods' bodies.

griffe records ``self.x`` attributes assigned in ``__init__`` only; clients read attributes set
anywhere (``load_model`` sets ``self.model``). Every method is read, each attribute gets the type
its annotation or constructor call names (:class:`InferredType`), and an attribute assigned
different classes under different conditions (a config switch choosing an implementation)
records them all as alternatives.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import cast

import griffe


@dataclass(frozen=True)
class InferredType:
    """An instance attribute's type read from ``self.x: T = …`` or ``self.x = T(…)``."""

    path: str | None
    text: str

    def __str__(self) -> str:
        return self.text


def _resolve_in(cls: griffe.Class, text: str) -> str | None:
    head = text.split(".", 1)[0]
    if not head.isidentifier():
        return None
    try:
        return cls.resolve(head) + text[len(head) :]
    except Exception:  # griffe raises NameResolutionError for unknown names
        return None


def _record_alternatives(
    func: ast.FunctionDef | ast.AsyncFunctionDef,
    me: str,
    cls: griffe.Class,
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
) -> None:
    """Implementation switches: ``self.x = A(...)`` under one condition, ``B(...)`` under
    another (directly, or through a ``self._make_x()`` factory whose returns differ). Kept in
    ``cls.extra["driftcheck"]["alternatives"][x]`` as (class path, condition, line)."""
    for stmt, parts in _conditioned(func.body, ()):
        if not isinstance(stmt, ast.Assign | ast.AnnAssign):
            continue
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target
        value = stmt.value
        if not (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == me
            and isinstance(value, ast.Call)
        ):
            continue
        condition = _condition_text("", parts)
        found: list[tuple[str, str, int]] = []
        callee = value.func
        factory = (
            methods.get(callee.attr)
            if isinstance(callee, ast.Attribute)
            and isinstance(callee.value, ast.Name)
            and callee.value.id == me
            else None
        )
        if factory is not None:
            for ret, cond in _statements(factory.body, condition):
                if isinstance(ret, ast.Return) and isinstance(ret.value, ast.Call):
                    for path in _resolve_local(factory, cls, ast.unparse(ret.value.func)):
                        found.append((path, cond, ret.lineno))
        else:
            for path in _resolve_local(func, cls, ast.unparse(callee)):
                found.append((path, condition, stmt.lineno))
        if found:
            store = cls.extra.setdefault("driftcheck", {}).setdefault("alternatives", {})
            store.setdefault(target.attr, []).extend(found)


def _statements(nodes: list[ast.stmt], condition: str):  # noqa: ANN202 - a generator of pairs
    """Every statement with the ``if`` condition it runs under (nested bodies included)."""
    for node, parts in _conditioned(nodes, ()):
        yield node, _condition_text(condition, parts)


def _condition_text(condition: str, parts: tuple[tuple[ast.expr, bool], ...]) -> str:
    """``condition`` extended by each test (``not (test)`` where its branch is the else)."""
    for test, negated in parts:
        text = ast.unparse(test)
        text = f"not ({text})" if negated else text
        condition = f"{condition} and {text}" if condition else text
    return condition


def _conditioned(nodes: list[ast.stmt], parts: tuple[tuple[ast.expr, bool], ...]):  # noqa: ANN202 - a generator of pairs
    """:func:`_statements` with each condition kept as its tests, written out only for the
    statements that are read (most methods' ``if`` tests are never needed as text)."""
    for node in nodes:
        if isinstance(node, ast.If):
            yield from _conditioned(node.body, (*parts, (node.test, False)))
            yield from _conditioned(node.orelse, (*parts, (node.test, True)))
            continue
        yield node, parts
        for name in ("body", "orelse", "finalbody"):
            inner = getattr(node, name, None)
            if isinstance(inner, list) and not isinstance(
                node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
            ):
                yield from _conditioned([n for n in inner if isinstance(n, ast.stmt)], parts)
        for handler in getattr(node, "handlers", []) or []:
            yield from _conditioned(handler.body, parts)


_NESTING = (ast.stmt, ast.excepthandler, ast.match_case)


def _assignments(func: ast.AST) -> list[ast.Assign | ast.AnnAssign]:
    """The assignments anywhere in ``func`` (nested functions included), in the order
    ``ast.walk`` meets them."""
    return [n for n in _nested_statements(func) if isinstance(n, ast.Assign | ast.AnnAssign)]


def _nested_statements(func: ast.AST) -> list[ast.AST]:
    """Every statement anywhere in ``func`` (nested functions included), in the order
    ``ast.walk`` meets them. Only statements are visited (a statement is never inside an
    expression): most of the cost of walking a method is its expressions."""
    out: list[ast.AST] = []
    level: list[ast.AST] = [func]
    while level:
        nxt: list[ast.AST] = []
        for node in level:
            if isinstance(node, ast.stmt):
                out.append(node)
            for field in node._fields:
                value = getattr(node, field, None)
                if isinstance(value, list):
                    nxt.extend(v for v in value if isinstance(v, _NESTING))
        level = nxt
    return out


#: A function's own imports by the function, for one module's visit (emptied when it ends: the
#: functions are nodes of griffe's parse, which nothing else keeps; held across visits, they
#: kept up to 4,096 functions' syntax trees alive, 4 to 7 MB of trl 1.16.0's cold peak).
_LOCAL_IMPORTS: dict[int, tuple[ast.AST, dict[str, list[str]]]] = {}


def _local_imports(func: ast.AST) -> dict[str, list[str]]:
    """Names a function imports in its own body (each binding, in every branch)."""
    cached = _LOCAL_IMPORTS.get(id(func))
    if cached is not None and cached[0] is func:
        return cached[1]
    found: dict[str, list[str]] = {}
    for node in _nested_statements(func):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                found.setdefault(alias.asname or alias.name, []).append(
                    f"{node.module}.{alias.name}"
                )
    _LOCAL_IMPORTS[id(func)] = (func, found)
    return found


def _resolve_local(func: ast.AST, cls: griffe.Class, text: str) -> list[str]:
    """What a name used in ``func`` may be: its own imports (every branch's), else the module's."""
    head = text.split(".", 1)[0]
    local = _local_imports(func).get(head)
    if local:
        return [target + text[len(head) :] for target in local]
    path = _resolve_in(cls, text)
    return [path] if path else []


def add_instance_attributes(mod: griffe.Module, tree: ast.Module) -> None:
    """Add ``self.x`` attributes assigned in any method (griffe reads only ``__init__``)."""

    def walk_class(node: ast.ClassDef, cls: griffe.Class) -> None:
        methods = {
            m.name: m for m in node.body if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)
        }
        for item in node.body:
            if isinstance(item, ast.ClassDef) and isinstance(
                inner := cls.members.get(item.name), griffe.Class
            ):
                walk_class(item, inner)
            if not isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) or not item.args.args:
                continue
            me = item.args.args[0].arg
            _record_alternatives(item, me, cls, methods)
            for sub in _assignments(item):
                target: ast.expr | None = None
                ann: ast.expr | None = None
                value: ast.expr | None = None
                if isinstance(sub, ast.AnnAssign):
                    target, ann, value = sub.target, sub.annotation, sub.value
                elif isinstance(sub, ast.Assign) and len(sub.targets) == 1:
                    target, value = sub.targets[0], sub.value
                if not (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == me
                ):
                    continue
                name = target.attr
                existing = cls.members.get(name)
                if existing is not None and not (
                    isinstance(existing, griffe.Attribute)
                    and existing.annotation is None
                    and ann is not None
                ):
                    continue
                type_expr = (
                    ann
                    if ann is not None
                    else (value.func if isinstance(value, ast.Call) else None)
                )
                text = ast.unparse(type_expr) if type_expr is not None else ""
                head = text.split(".", 1)[0].split("[", 1)[0]
                path = None
                if head.isidentifier():
                    try:
                        resolved = cls.resolve(head)
                        path = resolved + text[len(head) :] if "[" not in text else None
                    except Exception:  # griffe raises NameResolutionError for unknown names
                        path = None
                attr = griffe.Attribute(
                    name,
                    lineno=cast(ast.stmt, sub).lineno,  # only assignments get this far
                    endlineno=getattr(sub, "end_lineno", None),
                )
                # InferredType stands in for griffe's Expr: str() and canonical_path are all
                # that is read from an annotation.
                attr.annotation = InferredType(path, text) if text else None  # type: ignore[assignment]  # duck-typed Expr
                attr.labels.add("instance-attribute")
                cls.set_member(name, attr)

    try:
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and isinstance(
                cls := mod.members.get(node.name), griffe.Class
            ):
                walk_class(node, cls)
    finally:
        _LOCAL_IMPORTS.clear()
