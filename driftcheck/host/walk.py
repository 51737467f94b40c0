"""Syntax-tree walks for the passes over all of a host's files: ``ast.walk``'s nodes, in its
order, read without its generators (a pass over torch's files walks millions of nodes)."""

from __future__ import annotations

import ast


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
