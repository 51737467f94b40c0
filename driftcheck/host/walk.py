"""Syntax-tree walks for the passes over all of a host's files: ``ast.walk``'s nodes, in its
order, read without its generators (a pass over torch's files walks millions of nodes)."""

from __future__ import annotations

import ast
import gc
from collections.abc import Iterator
from contextlib import contextmanager


def walk(node: ast.AST) -> list[ast.AST]:
    """Every node under ``node`` (itself first), in the order :func:`ast.walk` yields them,
    at about half its cost: a list grown while it is read, each node's children read from its
    fields as :func:`ast.iter_child_nodes` reads them."""
    out = [node]
    append = out.append
    for cur in out:  # the list grows as it is read: breadth first, as ast.walk's queue
        for name in cur._fields:
            field = getattr(cur, name, None)
            if isinstance(field, ast.AST):
                append(field)
            elif isinstance(field, list):
                for item in field:
                    if isinstance(item, ast.AST):
                        append(item)
    return out


def walk_with_parents(node: ast.AST) -> tuple[list[ast.AST], dict[ast.AST, ast.AST]]:
    """:func:`walk`, and each node's parent as ``{c: n for n in ast.walk(node) for c in
    ast.iter_child_nodes(n)}`` builds it (the same entries, set in the same order), from the
    one walk."""
    out = [node]
    parents: dict[ast.AST, ast.AST] = {}
    append = out.append
    for cur in out:
        for name in cur._fields:
            field = getattr(cur, name, None)
            if isinstance(field, ast.AST):
                append(field)
                parents[field] = cur
            elif isinstance(field, list):
                for item in field:
                    if isinstance(item, ast.AST):
                        append(item)
                        parents[item] = cur
    return out, parents


#: The statements and the nodes between statements: every import and every definition is
#: among them.
BLOCKS = (ast.stmt, ast.excepthandler, ast.match_case)


def statements(tree: ast.AST) -> list[ast.AST]:
    """The tree's statements (and except handlers, match cases), in :func:`ast.walk`'s order
    among themselves: a statement is never inside an expression, so the walk of these alone
    meets them in the order the walk of every node does."""
    out: list[ast.AST] = [tree]
    append = out.append
    for cur in out:
        for name in cur._fields:
            field = getattr(cur, name, None)
            if isinstance(field, list):
                for item in field:
                    if isinstance(item, BLOCKS):
                        append(item)
    return out


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic GC held off for a pass over all of a host's files: it parses file after file
    (or function after function) and drops each tree, freed by its reference counts (a syntax
    tree holds no cycles), and a collection in the middle of a parse only walks the tree being
    built (half of a parse's cost on torch's files, default thresholds). Turned back on after,
    unless it was off before."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
