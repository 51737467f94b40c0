"""The host's own call sites of a method (host/callers.py): one pass for several members reads
each as a pass for it alone would."""

from __future__ import annotations

from pathlib import Path

from conftest import host_api_of

from driftcheck.host.api import HostAPI
from driftcheck.host.callers import call_sites

FILES = {
    "pkg/__init__.py": "",
    "pkg/engine.py": (
        "class Engine:\n"
        "    def step(self, x):\n"
        "        out = self.run(x, rank=0)\n"
        "        self.log(out)\n"
        "        if out is None:\n"
        "            return self.fetch(x)[0]\n"
        "        (item,) = self.fetch(x, rank=1)\n"
        "        self.run(item)\n"
        "        return out[0]\n"
        "\n"
        "    def other(self):\n"
        "        def inner():\n"
        "            return self.run(1)\n"
        "        self.log(self.fetch(2))\n"
        "        return inner\n"
    ),
    "pkg/worker.py": (
        "def work(engine):\n"
        "    res = engine.fetch(3, rank=2)\n"
        "    engine.run(res)\n"
        "    engine.log(res, level=1)\n"
        "    return res\n"
    ),
}


def _api(tmp_path: Path) -> HostAPI:
    return host_api_of(tmp_path, FILES)


def test_members_mined_together_read_as_each_mined_alone(tmp_path: Path):
    members = ["run", "fetch", "log"]
    alone = {m: call_sites(_api(tmp_path / "alone"), m) for m in members}
    together = _api(tmp_path / "together")
    got = {m: call_sites(together, m, also=members) for m in members}
    assert got == alone
    assert set(together.__dict__["_facts"]) == {f"callers:3:{m}" for m in members}


def test_each_site_says_how_its_result_is_used(tmp_path: Path):
    sites = {(s.file, s.line): s for s in call_sites(_api(tmp_path), "fetch")}
    assert sites[("pkg/engine.py", 6)].unwrapped and sites[("pkg/engine.py", 6)].result == (
        "subscripted"
    )
    assert sites[("pkg/engine.py", 7)].result == "unpacked"
    assert sites[("pkg/engine.py", 7)].keywords == ("rank",)
    assert sites[("pkg/engine.py", 14)].result == "used"
    worker = sites[("pkg/worker.py", 2)]
    assert worker.result == "assigned" and worker.values == ("2",)
    assert worker.then == (("run", ("res",)), ("log", ("res",)))
    run = {(s.file, s.line): s for s in call_sites(_api(tmp_path / "b"), "run")}
    assert run[("pkg/engine.py", 3)].none_checked and run[("pkg/engine.py", 3)].unwrapped
    assert ("pkg/engine.py", 13) in run  # a nested function's own call, read once


def test_keyword_calls_prefetched_together_read_as_each_mined_alone(tmp_path: Path):
    from driftcheck.host.callers import keyword_calls, prefetch_keyword_calls

    names = ["run", "fetch", "log", "absent"]
    alone = {n: keyword_calls(_api(tmp_path / "alone"), n) for n in names}
    together = _api(tmp_path / "together")
    prefetch_keyword_calls(together, names)
    mined = set(together.__dict__["_facts"])
    assert mined == {f"kwcalls:4:{n}" for n in names}  # one pass kept every name's fact
    assert {n: keyword_calls(together, n) for n in names} == alone
    assert alone["fetch"] and alone["absent"] == []


def test_enclosing_defs_in_one_pass_read_as_each_line_scanned_back():
    from driftcheck.host.callers import _enclosing_def, _enclosing_defs

    text = (
        "import x\n"
        "x.run(0)\n"
        "class A:\n"
        "    @deco(x.run(1))\n"
        "    def a(self, k=x.run(2)):\n"
        '        """Doc\n'
        "text at column 0 inside a docstring\n"
        '        """\n'
        "        def inner(\n"
        "            y,\n"
        "        ) -> int:\n"
        "            return y.run(3)\n"
        "\n"
        "        return self.run(4)\n"
        "    async def b(self):\n"
        "        await self.run(5)\n"
        "    z = x.run(6)\n"
        "def top():\n"
        "    if x:\n"
        "        x.run(7)\n"
        "    class Inner:\n"
        "        def m(self):\n"
        "            pass\n"
        "    return x.run(8)\n"
        "      \n"
        "x.run(9)\n"
    )
    lines = text.splitlines()
    scanned = {n: _enclosing_def(lines, n) for n in range(len(lines))}
    assert _enclosing_defs(lines, range(len(lines))) == scanned
    assert scanned[5] == 4 and scanned[11] == 8 and scanned[15] == 14 and scanned[16] is None
    assert scanned[13] is None  # text at column 0 ends what the scan back reads as inside
    assert scanned[22] == 21 and scanned[23] == 17 and scanned[24] == 17 and scanned[25] is None


def test_the_walk_that_skips_leaf_fields_reads_what_the_whole_walk_reads():
    import ast

    from driftcheck.host.callers import _own_reads, _own_tree

    func = ast.parse(
        "async def f(self, a, *, k=x.y(1)):\n"
        "    b = [c.m(i)[0] for i in a if i is not None and -i < 2 != 3]\n"
        "    d: dict = {k: await e.n(v) for k, v in a.items()}\n"
        "    f'{self.p(b)!r:>{w.q()}}'\n"
        "    del a[0], self.z\n"
        "    match a:\n"
        "        case {'k': [x, *rest]} if x.r() in b: return (yield self.s(x))\n"
        "    lambda: self.t()\n"
        "    return await (self.u(b) + ~self.v(*b, **d))\n"
    ).body[0]
    nodes, every_parent = _own_tree(func)
    calls, subscripts, compares, parents = _own_reads(func)
    assert calls == [
        n for n in nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
    ]
    assert subscripts == [n for n in nodes if isinstance(n, ast.Subscript)]
    assert compares == [n for n in nodes if isinstance(n, ast.Compare)]
    assert parents == {c: p for c, p in every_parent.items() if isinstance(c, ast.Call | ast.Await)}
    assert len(calls) == 10 and len(subscripts) == 2 and len(compares) == 3


def test_a_function_mined_in_an_earlier_release_reads_as_mined_afresh(tmp_path: Path):
    from driftcheck.host import callers

    moved = {  # the next release: the same functions, further down and one nesting deeper
        **FILES,
        "pkg/engine.py": "import os\n\n\nif os:\n"
        + "".join(f"    {line}\n" if line else "\n" for line in FILES["pkg/engine.py"].split("\n")),
    }
    callers._MINED.clear()
    fresh = {m: call_sites(host_api_of(tmp_path / "fresh", moved), m) for m in ("run", "log")}
    callers._MINED.clear()
    call_sites(_api(tmp_path / "before"), "run")  # only "run" is kept for these functions
    again = {m: call_sites(host_api_of(tmp_path / "after", moved), m) for m in ("run", "log")}
    assert again == fresh
    assert {(s.file, s.line) for s in again["run"]} >= {("pkg/engine.py", n) for n in (7, 12, 17)}


def test_the_rebuild_search_finds_what_its_pattern_finds():
    """``_rebuilds_in`` (two patterns searched from their own first characters, the word
    boundary tested at each match) answers as the one pattern ``_REBUILD`` it stands for."""
    import random

    from driftcheck.host.callers import _REBUILD, _rebuilds_in

    pieces = [
        "type(",
        ")",
        "(",
        "x",
        "_",
        "d",
        " ",
        "\n",
        ".",
        "__class__(",
        "self",
        "\u00e9",  # a word character outside ASCII: no boundary before ``type``
        "\u2019",  # a quote outside ASCII: a boundary
        "\u0663",  # a digit outside ASCII: a word character
    ]
    rng = random.Random(3)
    texts = ["", "type(x)(1)", "dtype(x)(1)", "x.__class__(1)", "\u00e9type(a)(b)", "type(a)"]
    texts += ["".join(rng.choices(pieces, k=rng.randrange(1, 30))) for _ in range(3000)]
    for text in texts:
        assert _rebuilds_in(text) == (_REBUILD.search(text) is not None), repr(text)


def test_a_site_kept_as_a_row_reads_as_asdict_gives_it():
    """The rows kept in the snapshot are the sites' fields as ``dataclasses.asdict`` gives
    them: a field that holds something other than strings, numbers and tuples of them (which
    ``asdict`` would convert) fails here."""
    from dataclasses import asdict, fields

    from driftcheck.host.callers import CallSite, KeywordCall, _row

    site = CallSite(
        "a.py", 3, "self.e", ("k",), "assigned", True, (("then", ("x",)),), ("1",), True
    )
    call = KeywordCall("a.py", 4, "f", ("k",), ("1",), ("x",), True)
    for made in (site, call):
        assert _row(made) == asdict(made)
        assert list(_row(made)) == [f.name for f in fields(made)]
