"""The client's trees in compact nodes: the same trees to every reader, in less memory."""

from __future__ import annotations

import ast
import copy
import pickle
import sys
import textwrap

from driftcheck.client.compact import COMPACT, PLAIN, compact
from driftcheck.client.index import parse_module
from driftcheck.client.names import Walker, children

SOURCE = textwrap.dedent(
    '''
    """A module written for this test."""
    from __future__ import annotations
    import os.path as osp
    from .pkg import (a, b as c)

    @decorator(1, key="v")
    class Engine(Base, metaclass=Meta):
        """Docstring."""
        limit: int = 3

        async def run(self, x, /, y=2, *args, z: "int" = 4, **kw) -> list[int]:
            global G
            async with ctx() as (p, q):
                async for i in aiter():
                    await i
            try:
                value = {k: v for k, v in kw.items() if k}
            except ValueError as err:
                raise RuntimeError("x") from err
            finally:
                del value
            return [x[1:2, ...], *args, f"{y!r:>{z}}", lambda m=1: m ** -2]

    match command:
        case {"k": [1, *rest]} | Point(x=0, y=[*rest]) if rest:
            pass
        case None:
            pass
    nums = {1, 2} | {3}; flag = not (a < b <= c is not None)
    total += (n := 5) if nums else 0
    while False:
        break
    else:
        assert nums, "never"
    print(call(1, *pos, x=2, **more), {**d, "k": 1}, [i for i in g()] if 0 else ())
    '''
)


def _fields(node: object) -> object:
    """Everything a node holds, recursively (``ast.dump`` would also name the optional fields
    a compact node leaves None, where the plain class's own default hides them)."""
    if isinstance(node, ast.AST):
        names = (*node._fields, *node._attributes)
        return type(node).__name__, [(n, _fields(getattr(node, n, "unset"))) for n in names]
    if isinstance(node, list):
        return [_fields(item) for item in node]
    return node


def test_a_compact_tree_reads_as_the_tree_parsed() -> None:
    plain = ast.parse(SOURCE)
    tree = compact(ast.parse(SOURCE))
    assert _fields(tree) == _fields(plain)
    assert ast.unparse(tree) == ast.unparse(plain)
    compile(tree, "<test>", "exec")  # the compiler takes it as it is
    for old, new in zip(ast.walk(plain), ast.walk(tree), strict=True):
        assert isinstance(new, PLAIN.get(type(old), type(old)))
        assert type(new).__name__ == type(old).__name__
        assert [type(k).__name__ for k in children(new)] == [
            type(k).__name__ for k in children(old)
        ]


def test_every_node_but_the_shared_ones_is_compact_and_smaller() -> None:
    plain = ast.parse(SOURCE)
    tree = compact(ast.parse(SOURCE))
    shared = (ast.expr_context, ast.operator, ast.boolop, ast.unaryop, ast.cmpop)
    plain_size = new_size = 0
    for old, new in zip(ast.walk(plain), ast.walk(tree), strict=True):
        if isinstance(new, shared):
            assert new is old  # the parser's own, shared between trees
            continue
        assert type(new) is COMPACT[type(old)]
        plain_size += sys.getsizeof(old) + sys.getsizeof(old.__dict__)
        new_size += sys.getsizeof(new)
    assert new_size * 2 < plain_size


def test_one_line_number_object_per_line() -> None:
    code = "\n" * 400 + "x = f(a, b)\ny = g(c)\n"
    tree = compact(ast.parse(code))
    on_401 = [n for n in ast.walk(tree) if getattr(n, "lineno", 0) == 401]
    assert len(on_401) > 3
    assert all(n.lineno is on_401[0].lineno for n in on_401)
    assert all(n.end_lineno is on_401[0].lineno for n in on_401)


def test_copies_and_pickles_are_plain_nodes() -> None:
    tree = compact(ast.parse(SOURCE))
    expected = _fields(tree)
    for other in (copy.deepcopy(tree), pickle.loads(pickle.dumps(tree))):
        assert _fields(other) == expected
        assert all(type(n).__module__ == "ast" for n in ast.walk(other))
    shallow = copy.copy(tree.body[0])
    assert type(shallow) is ast.Expr and shallow.value is tree.body[0].value


def test_walkers_visit_compact_nodes_by_their_class_names() -> None:
    class Calls(Walker):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[str] = []

        def visit_Call(self, node: ast.Call) -> None:
            self.seen.append(ast.unparse(node.func))

    plain, small = Calls(), Calls()
    plain.walk(ast.parse(SOURCE))
    small.walk(compact(ast.parse(SOURCE)))
    assert small.seen == plain.seen and "call" in small.seen


def test_the_index_holds_compact_trees() -> None:
    info = parse_module("pkg.mod", "pkg/mod.py", SOURCE)
    assert type(info.tree) is COMPACT[ast.Module]


def test_a_tree_too_deep_to_rebuild_stays_as_parsed() -> None:
    depth = sys.getrecursionlimit() + 100
    code = "x = " + "-" * depth + "1\n"
    try:
        ast.parse(code)
    except (RecursionError, MemoryError, SyntaxError):
        return  # the parser itself refuses it on this interpreter: nothing to rebuild
    info = parse_module("pkg.deep", "pkg/deep.py", code)
    assert type(info.tree) is ast.Module  # as parsed: the index says it is too deep
