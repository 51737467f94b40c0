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

Most nodes need less than a slot per field (458 MB to 383 MB for those files, the parser's
lists and strings included): an empty list field holds the one shared :data:`EMPTY` (no reader
changes a client tree's list; a copy gets its own); a node on one line has no ``end_lineno`` slot
(:data:`ONE_LINE`: a class attribute reads it from ``lineno``), a ``Name`` written as its ``id``
none for ``end_col_offset`` either (:data:`NAME`), and a node with one of the parser's contexts
(``Load``, ``Store``, ``Del``) holds it as a class attribute. Each class is chosen only where the
value it gives is the one parsed, so every field and attribute reads as parsed; a value set on a
node later is kept in its ``__dict__`` and read instead. The trees are read, never changed: a
change to a list in one would show in every empty list, and moving a one-line node (a new
``lineno`` without a new ``end_lineno``) would move its end too (``ast.increment_lineno`` on a
compact tree would move such an end twice). A copy is a plain tree, free to change.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable
from typing import Any, cast

#: Node classes CPython shares between trees (contexts and operators): kept as they are.
_SHARED = (ast.expr_context, ast.operator, ast.boolop, ast.unaryop, ast.cmpop)
#: Fields that never hold a node to rebuild: names, numbers, strings, shared contexts and
#: operators (a ``Constant``'s value is never a node either).
_NO_NODES = frozenset(
    "ctx op ops id attr arg kind type_comment level module conversion is_async simple value".split()
)


#: The one empty list every empty list field of a compact tree holds (492,000 lists, 28 MB, in
#: transformers' trees). Nothing that reads the client's trees changes a list in them: a copy or a
#: pickle gets a list of its own (see :func:`_reduce`).
EMPTY: list[Any] = []


class _Line:
    """``end_lineno`` of a node on one line: its ``lineno``, computed when read (a non-data
    descriptor: a value set on the node is kept in its ``__dict__`` and read instead)."""

    __slots__ = ()

    def __get__(self, node: ast.AST | None, owner: type | None = None) -> int | None:
        return None if node is None else node.lineno  # type: ignore[attr-defined]


class _NameEnd:
    """``end_col_offset`` of a ``Name`` whose spelling is its ``id`` in ASCII: ``col_offset`` and
    the id's length (the rebuild checks the two agree before it uses this)."""

    __slots__ = ()

    def __get__(self, node: ast.AST | None, owner: type | None = None) -> int | None:
        if node is None:
            return None
        return node.col_offset + len(node.id)  # type: ignore[attr-defined]


def _reduce(node: ast.AST) -> tuple[Any, ...]:
    """Copies and pickles of a compact node are plain nodes of its :mod:`ast` class (with lists
    of their own where the compact node holds the shared empty one)."""
    plain = PLAIN[type(node)]
    state = {}
    for name in (*plain._fields, *plain._attributes):
        value = getattr(node, name, _UNSET)
        if value is EMPTY:
            value = []
        if value is not _UNSET:
            state[name] = value
    # made without calling the class (3.13's ``__init__`` warns of each missing field)
    return plain.__new__, (plain,), state


_UNSET = object()


def _compact_class(plain: type[ast.AST], derived: dict[str, Any] | None = None) -> type[ast.AST]:
    """A compact class for ``plain``: a slot per field and attribute, but those ``derived``
    computes."""
    derived = derived or {}
    slots = tuple(n for n in (*plain._fields, *plain._attributes) if n not in derived)
    return type(
        plain.__name__,
        (plain,),
        {
            "__slots__": slots,
            "__module__": __name__,
            "__qualname__": plain.__name__,
            "__reduce__": _reduce,
            **derived,
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
#: Plain node class -> its compact class for a node on one line (no ``end_lineno`` slot).
ONE_LINE: dict[type[ast.AST], type[ast.AST]] = {
    cls: _compact_class(cls, {"end_lineno": _Line()})
    for cls in COMPACT
    if "end_lineno" in cls._attributes
}
#: The compact class of a ``Name`` written as its ``id`` (on one line: every ``Name`` is).
NAME = _compact_class(ast.Name, {"end_lineno": _Line(), "end_col_offset": _NameEnd()})
#: The contexts the parser gives every ``Name``, ``Attribute``, ... (one object each, shared).
_CONTEXTS = (
    ast.parse("x").body[0].value.ctx,  # type: ignore[attr-defined]
    ast.parse("x = 0").body[0].targets[0].ctx,  # type: ignore[attr-defined]
    ast.parse("del x").body[0].targets[0].ctx,  # type: ignore[attr-defined]
)
#: (compact class of a node with a context, the parser's context) -> its class holding that
#: context as a class attribute, not in a slot (a value set on a node is kept in its
#: ``__dict__`` and read instead).
_BY_CONTEXT: dict[tuple[type[ast.AST], Any], type[ast.AST]] = {
    (base, ctx): _compact_class(
        plain,
        {
            **({"end_lineno": _Line()} if base is not COMPACT[plain] else {}),
            **({"end_col_offset": _NameEnd()} if base is NAME else {}),
            "ctx": ctx,
        },
    )
    for plain in COMPACT
    if "ctx" in plain._fields
    for base in (COMPACT[plain], ONE_LINE[plain], *((NAME,) if plain is ast.Name else ()))
    for ctx in _CONTEXTS
}
#: Compact node class -> its plain :mod:`ast` class (and each plain class -> itself).
PLAIN: dict[type[ast.AST], type[ast.AST]] = {
    **{cls: cls for cls in COMPACT},
    **{sub: cls for cls, sub in COMPACT.items()},
    **{sub: cls for cls, sub in ONE_LINE.items()},
    NAME: ast.Name,
}
PLAIN.update({sub: PLAIN[base] for (base, _), sub in _BY_CONTEXT.items()})
#: Plain node class -> (compact class, its one-line class or None, the fields that may hold a
#: node or a list, whether it has a context).
_PLAN: dict[type[ast.AST], tuple[type[ast.AST], type[ast.AST] | None, tuple[str, ...], bool]] = {
    cls: (
        sub,
        ONE_LINE.get(cls),
        tuple(f for f in cls._fields if f not in _NO_NODES),
        "ctx" in cls._fields,
    )
    for cls, sub in COMPACT.items()
}
# ``value`` holds a node everywhere but in ``Constant`` (and ``MatchSingleton``, ``keyword``'s is a
# node too): put it back where the class's value is an expression.
for _cls, (_sub, _one, _fields, _ctx) in list(_PLAN.items()):
    if "value" in _cls._fields and _cls not in (ast.Constant, ast.MatchSingleton):
        _PLAN[_cls] = (_sub, _one, (*_fields, "value"), _ctx)


def _build(cls: type[ast.AST], values: dict[str, Any]) -> ast.AST:
    """A node of ``cls`` holding ``values`` (from 3.13 on, the node classes' ``__init__`` sets
    a field not given, ``ctx`` included, which would put a context in the node's ``__dict__``)."""
    node = cls.__new__(cls)
    for name, value in values.items():
        setattr(node, name, value)
    return node


#: Whether the node classes' ``__init__`` sets the fields it is not given (3.13 on).
_INIT_FILLS = sys.version_info >= (3, 13)


def compact(tree: ast.AST) -> ast.AST:
    """``tree`` rebuilt in compact nodes (the plain tree is taken apart: use the result only).

    Raises RecursionError for a tree nested deeper than the interpreter's recursion limit."""
    return _rebuild(tree, {})


def _rebuild(node: ast.AST, lines: dict[int, int]) -> ast.AST:
    rebuild = _REBUILD.get(type(node))
    return node if rebuild is None else rebuild(node, lines)


def _rebuilder(plain: type[ast.AST]) -> Callable[[ast.AST, dict[int, int]], ast.AST]:
    """The function rebuilding a ``plain`` node (its children first) in its compact class,
    written out for the class's fields (a tenth cheaper than one loop over every class's plan:
    a client's files are rebuilt as they are parsed, and the rebuild costs as much as the
    parse).

    A node field rebuilt, a list of nodes rebuilt in place (an empty one replaced by
    :data:`EMPTY`); the line numbers past 256 shared through ``lines``; the one-line,
    ``Name`` and context classes chosen where the values they give are the ones parsed."""
    sub, one, fields, has_ctx = _PLAN[plain]
    code = ["def rebuild(node, lines):", "    values = node.__dict__"]
    for name in fields:
        code += [
            f"    v = values.get({name!r})",
            "    if v is not None:",
            "        if type(v) is list:",
            "            if v:",
            "                for i, item in enumerate(v):",
            "                    r = REBUILD.get(type(item))",
            "                    if r is not None:",
            "                        v[i] = r(item, lines)",
            "            else:",
            f"                values[{name!r}] = EMPTY",
            "        else:",
            "            r = REBUILD.get(type(v))",
            "            if r is not None:",
            f"                values[{name!r}] = r(v, lines)",
        ]
    code.append("    sub = SUB")
    if "lineno" in plain._attributes:
        code += [
            "    line = values.get('lineno')",
            "    if line is not None:",
            "        if line > 256:  # the interpreter shares the small ints already",
            "            values['lineno'] = line = lines.setdefault(line, line)",
            "        end = values['end_lineno']",
        ]
        if one is not None:
            code += [
                "        if end == line:",
                "            del values['end_lineno']",
                "            sub = ONE",
            ]
            if plain is ast.Name:
                code += [
                    "            if values['end_col_offset'] == values['col_offset'] + len(",
                    "                values['id']",
                    "            ):",
                    "                del values['end_col_offset']",
                    "                sub = NAME",
                ]
            code.append("        elif end is not None and end > 256:")
        else:
            code.append("        if end is not None and end > 256:")
        code.append("            values['end_lineno'] = lines.setdefault(end, end)")
    if has_ctx:
        code += [
            "    held = BY_CONTEXT.get((sub, values.get('ctx')))",
            "    if held is not None:",
            "        del values['ctx']",
            "        return build(held, values) if INIT_FILLS else held(**values)",
        ]
    code.append("    return sub(**values)")
    space: dict[str, Any] = {
        "REBUILD": _REBUILD, "EMPTY": EMPTY, "SUB": sub, "ONE": one, "NAME": NAME,
        "BY_CONTEXT": _BY_CONTEXT, "build": _build, "INIT_FILLS": _INIT_FILLS,
    }  # fmt: skip
    exec("\n".join(code), space)  # noqa: S102 (written above from the class's own fields)
    return cast(Callable[[ast.AST, dict[int, int]], ast.AST], space["rebuild"])


#: Plain node class -> the function rebuilding its nodes (:func:`_rebuilder`).
_REBUILD: dict[type, Callable[[ast.AST, dict[int, int]], ast.AST]] = {}
_REBUILD.update({plain: _rebuilder(plain) for plain in _PLAN})
