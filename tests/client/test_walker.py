"""A finished walk leaves nothing for the cyclic GC: the walker (and its map of every node's
parent) is freed as soon as it is dropped, as the scan relies on while the client's trees are
frozen out of the collector."""

from __future__ import annotations

import ast
import gc
import weakref

from driftcheck.client.index import ClientIndex, parse_module
from driftcheck.client.names import Walker

CODE = """
class A:
    def f(self, x):
        self.y = x
        return [v for v in x if v]
"""


class _Names(Walker):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def visit_Name(self, node: ast.Name) -> None:
        self.seen.append(node.id)

    def visit_Lambda(self, node: ast.Lambda) -> bool:
        return False  # its body is not walked


def test_a_dropped_walker_is_freed_without_a_collection() -> None:
    tree = ast.parse(CODE + "g = lambda: hidden\n")
    enabled = gc.isenabled()
    gc.disable()
    try:
        walker = _Names()
        walker.walk(tree)
        assert walker.seen == ["self", "x", "v", "v", "x", "v", "g"]  # not the lambda's body
        assert walker.parents[tree.body[0].body[0]] is tree.body[0]  # parents still recorded
        gone = weakref.ref(walker)
        del walker
        assert gone() is None
    finally:
        if enabled:
            gc.enable()


def test_indexing_a_module_leaves_no_cyclic_garbage() -> None:
    info = parse_module("m", "m.py", CODE)
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        index = ClientIndex()
        index.add_module(info)
        assert "m.A.f" in index.functions and "y" in index.classes["m.A"].attrs
        assert gc.collect() == 0
    finally:
        if enabled:
            gc.enable()
