"""The client's trees in compact nodes: the same trees to every reader, in less memory."""

from __future__ import annotations

import ast
import copy
import marshal
import pickle
import sys
import textwrap

from driftcheck.client.compact import COMPACT, EMPTY, NAME, ONE_LINE, PLAIN, compact
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
        assert type(new) is not type(old) and PLAIN[type(new)] is type(old)
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


# Sources where a derived field could read other than parsed: names not written as their ids
# (non-ASCII; the fullwidth one the parser normalises to an ASCII id), nodes over several lines,
# f-strings (their parts' positions), every context, match statements, walrus, type comments.
TRICKY = textwrap.dedent(
    """
    café = naïve + ｆｕｌｌ  # type: int
    x = (a +
         b)
    e = g(café, k=1) or g()
    s = f"{café!r:>{w}} {y=} {f'{z}'}" f'''
    {a
     + b}'''
    def f(a,  # type: int
          b):
        # type: (...) -> None
        del a, b.c, d[0]
        *p, q.r, s[1] = t
        return [(n := 1) for _ in ()]
    match p:
        case Point(x=0, y=ÿ) | [1, *ÿ] if (w := ÿ):
            pass
        case {"k": v, **kw}:
            pass
    """
)
if sys.version_info >= (3, 11):
    TRICKY += "try:\n    pass\nexcept* ValueError:\n    pass\n"
if sys.version_info >= (3, 12):
    TRICKY += "def g[T: int, *Ts, **P](x: T) -> T: ...\ntype Alias[K] = list[K]\n"


def _trees(**kw: bool) -> tuple[ast.AST, ast.AST]:
    return ast.parse(TRICKY, **kw), compact(ast.parse(TRICKY, **kw))


def test_tricky_sources_read_as_parsed_by_every_reader() -> None:
    for kw in ({}, {"type_comments": True}):
        plain, tree = _trees(**kw)
        assert _fields(tree) == _fields(plain)
        assert ast.unparse(tree) == ast.unparse(plain)
        assert marshal.dumps(compile(tree, "<t>", "exec")) == marshal.dumps(
            compile(plain, "<t>", "exec")
        )
        for old, new in zip(ast.walk(plain), ast.walk(tree), strict=True):
            assert isinstance(new, type(old)) and type(new).__name__ == type(old).__name__
            fields = [(k, _fields(v)) for k, v in ast.iter_fields(new)]
            assert fields == [(k, _fields(v)) for k, v in ast.iter_fields(old)]
            for name in (*old._fields, *old._attributes):
                assert hasattr(new, name) == hasattr(old, name)
                assert _fields(getattr(new, name, None)) == _fields(getattr(old, name, None))
            for name in ("end_lineno", "end_col_offset"):  # where a class gives one
                slots = getattr(type(new), "__slots__", (name,))
                if name in (*old._fields, *old._attributes) and name not in slots:
                    assert getattr(type(new), name) == getattr(type(old), name, None)


def test_each_smaller_form_is_used_only_where_it_reads_as_parsed() -> None:
    plain, tree = _trees()
    kinds = {type(n) for n in ast.walk(tree)}
    assert ONE_LINE[ast.BinOp] in kinds and COMPACT[ast.BinOp] in kinds
    names = [k.__slots__ for k in kinds if PLAIN.get(k) is ast.Name]
    assert ("id", "lineno", "col_offset") in names  # no slot for the end nor the context
    assert NAME.__slots__ == ("id", "ctx", "lineno", "col_offset")
    for old, new in zip(ast.walk(plain), ast.walk(tree), strict=True):
        slots = getattr(type(new), "__slots__", None)
        if slots is None:
            continue
        if isinstance(old, ast.Name):
            written_as_id = old.end_col_offset == old.col_offset + len(old.id)
            assert ("end_col_offset" in slots) == (not written_as_id)
            if old.id in ("café", "naïve", "full", "ÿ"):  # café's bytes outnumber its letters
                assert "end_col_offset" in slots
        if "end_lineno" in old._attributes:
            assert ("end_lineno" in slots) == (old.end_lineno != old.lineno)
        for name in old._fields:
            value = getattr(new, name)
            if isinstance(value, list):
                assert (value is EMPTY) == (not value)
    assert EMPTY == []


def test_a_value_set_on_a_node_is_kept_where_a_class_gives_the_parsed_one() -> None:
    plain, tree = _trees()
    name = next(n for n in ast.walk(tree) if type(n).__slots__ == ("id", "lineno", "col_offset"))
    store = ast.parse("x = 0").body[0].targets[0].ctx  # type: ignore[attr-defined]
    name.end_col_offset, name.end_lineno, name.ctx = 99, 98, store
    assert (name.end_col_offset, name.end_lineno, name.ctx) == (99, 98, store)
    assert {"end_col_offset", "end_lineno", "ctx"} <= set(name.__dict__)
    assert type(name).end_lineno is None  # the class's own reads as the plain class's


def test_copies_have_lists_of_their_own() -> None:
    tree = compact(ast.parse(TRICKY))
    for other in (copy.deepcopy(tree), pickle.loads(pickle.dumps(tree))):
        lists = [
            getattr(n, f) for n in ast.walk(other) for f in n._fields if type(getattr(n, f)) is list
        ]
        assert len({id(x) for x in lists}) == len(lists) and all(x is not EMPTY for x in lists)
        assert all(type(n).__module__ == "ast" for n in ast.walk(other))
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and not n.keywords)
    shallow = copy.copy(call)
    assert shallow.keywords == [] and shallow.keywords is not EMPTY


def test_the_gate_walk_knows_compact_statements_hold_no_block() -> None:
    from driftcheck.client.gating import _NO_BLOCKS

    code = "import a\nfrom b import c\nx = 1\ny: int = 2\nx += 1\nassert x\ndel x\npass\nf()\n"
    for stmt in compact(ast.parse(code)).body:
        assert type(stmt) in _NO_BLOCKS, type(stmt).__name__
    for stmt in compact(ast.parse("if x:\n    pass\nfor i in y:\n    pass\n")).body:
        assert type(stmt) not in _NO_BLOCKS
