"""The client's syntax trees in compact nodes: the trees the index holds until every use is
collected are most of a large client's memory (transformers' 1,436 files that name torch: 5.3
million nodes, 1.2 GB as the parser builds them).

The parser gives every node a dictionary of its fields and positions (272 bytes for a ``Name``,
beside the node's own 48). :func:`compact` rebuilds a tree in subclasses of the same node classes
that keep the same fields in slots (88 bytes for that ``Name``), with one ``int`` per line number
for the whole tree (the parser makes one for each node's first and last line past 256): half the
memory (1,229 MB to 600 MB for those files).

A compact node is an instance of its :mod:`ast` class, under that class's name, so ``isinstance``,
``ast.unparse``, ``compile``, :class:`ast.NodeVisitor` and the walkers' ``visit_<Class>`` hooks see
no difference; only a test of the exact class (``type(node) is ast.Call``) does, so a caller that
dispatches on the exact class maps it with :data:`PLAIN`. A copy (:func:`copy.deepcopy`) or a pickle
of a compact node is a plain node. The contexts and operators the parser shares between nodes stay
shared and plain.
"""

from __future__ import annotations

import ast
from typing import Any

#: Node classes CPython shares between trees (contexts and operators): kept as they are.
_SHARED = (ast.expr_context, ast.operator, ast.boolop, ast.unaryop, ast.cmpop)
#: Fields that never hold a node to rebuild: names, numbers, strings, shared contexts and
#: operators (a ``Constant``'s value is never a node either).
_NO_NODES = frozenset(
    "ctx op ops id attr arg kind type_comment level module conversion is_async simple value".split()
)


def _reduce(node: ast.AST) -> tuple[Any, ...]:
    """Copies and pickles of a compact node are plain nodes of its :mod:`ast` class."""
    plain = PLAIN[type(node)]
    slots: tuple[str, ...] = getattr(type(node), "__slots__", ())
    state = {name: getattr(node, name) for name in slots if hasattr(node, name)}
    return plain, (), state


def _compact_class(plain: type[ast.AST]) -> type[ast.AST]:
    slots = (*plain._fields, *plain._attributes)
    return type(
        plain.__name__,
        (plain,),
        {
            "__slots__": slots,
            "__module__": __name__,
            "__qualname__": plain.__name__,
            "__reduce__": _reduce,
        },
    )


def _leaf_classes() -> list[type[ast.AST]]:
    out = []
    for name in dir(ast):
        cls = getattr(ast, name)
        if (
            isinstance(cls, type)
            and issubclass(cls, ast.AST)
            and cls.__module__ == "ast"
            and cls._fields + cls._attributes
            and not issubclass(cls, _SHARED)
            # a leaf: ``Constant``'s subclasses are the deprecated aliases the parser never makes
            and all(issubclass(sub, ast.Constant) for sub in cls.__subclasses__())
            and not (issubclass(cls, ast.Constant) and cls is not ast.Constant)
        ):
            out.append(cls)
    return out


#: Plain node class -> its compact class.
COMPACT: dict[type[ast.AST], type[ast.AST]] = {cls: _compact_class(cls) for cls in _leaf_classes()}
#: Compact node class -> its plain :mod:`ast` class (and each plain class -> itself).
PLAIN: dict[type[ast.AST], type[ast.AST]] = {
    **{cls: cls for cls in COMPACT},
    **{sub: cls for cls, sub in COMPACT.items()},
}
#: Plain node class -> (compact class, the fields that may hold a node).
_PLAN: dict[type[ast.AST], tuple[type[ast.AST], tuple[str, ...]]] = {
    cls: (sub, tuple(f for f in cls._fields if f not in _NO_NODES)) for cls, sub in COMPACT.items()
}
# ``value`` holds a node everywhere but in ``Constant`` (and ``MatchSingleton``, ``keyword``'s is a
# node too): put it back where the class's value is an expression.
for _cls, (_sub, _fields) in list(_PLAN.items()):
    if "value" in _cls._fields and _cls not in (ast.Constant, ast.MatchSingleton):
        _PLAN[_cls] = (_sub, (*_fields, "value"))


def compact(tree: ast.AST) -> ast.AST:
    """``tree`` rebuilt in compact nodes (the plain tree is taken apart: use the result only).

    Raises RecursionError for a tree nested deeper than the interpreter's recursion limit."""
    return _rebuild(tree, {})


def _rebuild(node: ast.AST, lines: dict[int, int], plans: dict = _PLAN) -> ast.AST:
    plan = plans.get(type(node))
    if plan is None:
        return node  # shared, or already compact
    sub, fields = plan
    values: dict[str, Any] = node.__dict__
    for name in fields:
        value = values.get(name)
        if value is None:
            continue
        if type(value) is list:
            for i, item in enumerate(value):
                if type(item) in plans:
                    value[i] = _rebuild(item, lines)
        elif type(value) in plans:
            values[name] = _rebuild(value, lines)
    line = values.get("lineno")
    if line is not None and line > 256:  # the interpreter shares the small ints already
        values["lineno"] = line = lines.setdefault(line, line)
        end = values["end_lineno"]
        values["end_lineno"] = line if end == line else lines.setdefault(end, end)
    elif line is not None:
        end = values["end_lineno"]
        if end is not None and end > 256:
            values["end_lineno"] = lines.setdefault(end, end)
    return sub(**values)
