"""``hasattr`` tests on an object that decide whether a use of one of its attributes runs.

``if hasattr(model, "get_language_model"): ... elif hasattr(model, "model"): base = model.model``
reads ``model.model`` only where the object has it, and only where it has no
``get_language_model``. Each guard is ``(object expression, attribute, holds)``: the use runs only
where ``hasattr(object, attribute)`` is ``holds``. Read from the ``if``/``elif``/``while`` tests,
conditional expressions and ``and`` chains above the use, and from a ``hasattr`` call the use is
an argument of; checks decide them against the receiver's class.
"""

from __future__ import annotations

import ast

Guard = tuple[str, str, bool]


def guards_of(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> tuple[Guard, ...]:
    """The ``hasattr`` guards over ``node`` (innermost first)."""
    out: list[Guard] = []
    child, parent = node, parents.get(node)
    while parent is not None:
        if isinstance(parent, ast.If | ast.While | ast.IfExp):
            if isinstance(parent, ast.IfExp):
                in_body, in_else = child is parent.body, child is parent.orelse
            else:
                in_body, in_else = child in parent.body, child in parent.orelse
            if in_body:
                out.extend(_positive(parent.test))
            elif in_else:
                single = _hasattr(parent.test)
                if single is not None:
                    out.append((single[0], single[1], False))
        elif isinstance(parent, ast.BoolOp) and isinstance(parent.op, ast.And):
            for value in parent.values:
                if value is child:
                    break
                out.extend(_positive(value))
        if isinstance(parent, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            break
        child, parent = parent, parents.get(parent)
    return tuple(out)


def _positive(test: ast.AST) -> list[Guard]:
    """The ``hasattr`` calls a true ``test`` implies (itself, or the terms of an ``and``)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return [g for value in test.values for g in _positive(value)]
    single = _hasattr(test)
    return [(single[0], single[1], True)] if single is not None else []


def _hasattr(test: ast.AST) -> tuple[str, str] | None:
    """``hasattr(EXPR, "name")`` -> (EXPR's source, name); ``not hasattr(...)`` is not one."""
    if (
        isinstance(test, ast.Call)
        and isinstance(test.func, ast.Name)
        and test.func.id == "hasattr"
        and len(test.args) == 2
        and isinstance(test.args[1], ast.Constant)
        and isinstance(test.args[1].value, str)
    ):
        return ast.unparse(test.args[0]), test.args[1].value
    return None


def same_expression(a: str, b: str) -> bool:
    """Two expressions' sources, compared as code (spacing and parentheses aside)."""
    try:
        return a == b or ast.unparse(ast.parse(a, mode="eval")) == ast.unparse(
            ast.parse(b, mode="eval")
        )
    except SyntaxError:
        return False
