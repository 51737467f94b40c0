"""host/walk.py: the nodes of a tree in ``ast.walk``'s order."""

from __future__ import annotations

import ast

from driftcheck.host.walk import walk, walk_with_parents

SOURCE = """
import os, sys as system
from .pkg import (a, b as c)

@decorator(key={None: 1, **rest})
async def f(x: int, /, *args, k=lambda y: y + 1, **kw) -> "T":
    global g
    async with open(x) as fh, other():
        y = [i async for i in fh if i][0]
    match x:
        case {"a": 1, **others} | Point(x=0, y=_) if others:
            return f"{x!r:>{k}}"
        case [1, *tail]:
            pass
    try:
        del system.path[1:2:3]
    except* (ValueError, TypeError) as e:
        raise RuntimeError from e
    return (yield from x) if x else not x


class K(Base, metaclass=Meta):
    x: int = 0
    def m(self): return super().m(*self.args, **{"k": 1})
"""


def test_walk_yields_ast_walks_nodes_in_its_order():
    tree = ast.parse(SOURCE)
    assert walk(tree) == list(ast.walk(tree))
    call = tree.body[-1].body[-1]
    assert walk(call) == list(ast.walk(call))
    built = ast.Call(ast.Name("f", ast.Load()), [ast.Constant(1)], [])  # no line numbers
    assert walk(built) == list(ast.walk(built)) and len(walk(built)) == 4


def test_walk_with_parents_gives_each_nodes_parent_as_iter_child_nodes_does():
    tree = ast.parse(SOURCE)
    nodes, parents = walk_with_parents(tree)
    assert nodes == list(ast.walk(tree))
    expected = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
    assert list(parents.items()) == list(expected.items())
    cls = tree.body[-1]
    assert parents[cls.body[-1]] is cls and tree not in parents
