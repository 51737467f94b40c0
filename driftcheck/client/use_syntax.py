"""The syntax a use record is read from: attribute chains, how a call's result is used, what
the client does when a test fails, a client function's parameters and argument literals."""

from __future__ import annotations

import ast

from driftcheck.client.names import FUNCTIONS
from driftcheck.host.signature import dataclass_fields


def unsubscripted(node: ast.expr) -> ast.expr:
    """``Base[T]`` -> ``Base``."""
    return node.value if isinstance(node, ast.Subscript) else node


def reads(node: ast.AST) -> int:
    """How many attributes are read off the chain's root name."""
    n = 0
    while isinstance(node, ast.Attribute):
        n, node = n + 1, node.value
    return n


def dotted(text: str) -> bool:
    parts = text.split(".")
    return len(parts) > 1 and all(p.isidentifier() for p in parts)


def result_usage(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> str:
    parent = parents.get(node)
    if isinstance(parent, ast.Expr):
        return "discarded"
    if isinstance(parent, ast.Await):
        return result_usage(parent, parents)
    if isinstance(parent, ast.Assign | ast.AnnAssign | ast.NamedExpr):
        return "assigned"
    if isinstance(parent, ast.Return):
        return "returned"
    if isinstance(parent, ast.Subscript) and parent.value is node:
        return "subscripted"
    if isinstance(parent, ast.Attribute) and parent.value is node:
        return "attribute"
    if isinstance(parent, ast.If | ast.While | ast.IfExp | ast.BoolOp | ast.UnaryOp):
        return "truth-tested"
    if isinstance(parent, ast.keyword | ast.Starred) or (
        isinstance(parent, ast.Call) and parent.func is not node
    ):
        return "passed"
    if isinstance(parent, ast.For | ast.AsyncFor | ast.comprehension):
        if parent.iter is node:
            return "iterated"
        if isinstance(parent, ast.comprehension) and node in parent.ifs:
            return "truth-tested"
    return "used"


def on_false(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> str | None:
    """What the client does when a tested call returns False: ``raise ValueError`` or
    ``return`` when the branch an ``if`` takes then starts with it (None: anything else)."""
    parent, negated = parents.get(node), False
    if isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not):
        node, parent, negated = parent, parents.get(parent), True
    if not (isinstance(parent, ast.If) and parent.test is node):
        return None
    branch = parent.body if negated else parent.orelse
    first = branch[0] if branch else None
    if isinstance(first, ast.Raise):
        exc = first.exc.func if isinstance(first.exc, ast.Call) else first.exc
        return f"raise {ast.unparse(exc)}" if exc is not None else "raise"
    if isinstance(first, ast.Return):
        return "return"
    return None


def client_params(node: ast.AST) -> list[tuple[str, str, bool]]:
    """(name, kind, has_default) of a client function's parameters."""
    assert isinstance(node, FUNCTIONS)
    a = node.args
    positional = [*a.posonlyargs, *a.args]
    first_default = len(positional) - len(a.defaults)
    out: list[tuple[str, str, bool]] = []
    for i, x in enumerate(positional):
        kind = "positional_only" if i < len(a.posonlyargs) else "positional_or_keyword"
        out.append((x.arg, kind, i >= first_default))
    if a.vararg is not None:
        out.append((a.vararg.arg, "var_positional", True))
    out += [
        (x.arg, "keyword_only", d is not None)
        for x, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)
    ]
    if a.kwarg is not None:
        out.append((a.kwarg.arg, "var_keyword", True))
    return out


def literal(node: ast.expr) -> str | None:
    """A constant's source text (``False``, ``-1``, ``'C'``), else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return literal(node.operand) and ast.unparse(node)
    return ast.unparse(node) if isinstance(node, ast.Constant) else None


def own_init_vars(node: ast.ClassDef) -> tuple[str, ...]:
    """The ``InitVar`` fields a client class declares when a dataclass decorator makes it one
    (the dataclass machinery passes them to ``__post_init__`` after its bases')."""
    made = any(
        ast.unparse(d.func if isinstance(d, ast.Call) else d).rsplit(".", 1)[-1] == "dataclass"
        for d in node.decorator_list
    )
    if not made:
        return ()
    return tuple(p.name for p in dataclass_fields(node) if p.init_var)
