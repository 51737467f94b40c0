"""The syntax of a host definition (``HostAPI.def_node``): each definition asked for is the node a
parse of the whole module gives, and only what is asked for is kept."""

from __future__ import annotations

import ast
import gc
from pathlib import Path

import pytest
from conftest import host_api_of

from driftcheck.host.api import Found, HostAPI

ENGINE = (
    "import functools\n"
    "\n"
    "@functools.cache\n"
    "def top(a, b=1):\n"
    '    """Top-level, décoré."""\n'
    "    return a\n"
    "\n"
    "class Engine:\n"
    '    """Ünïcode before the columns."""\n'
    "\n"
    "    @property\n"
    "    def size(self): return 1\n"
    "\n"
    "    @(\n"
    "        staticmethod\n"
    "    )\n"
    "    def build(x):\n"
    "        return Engine()\n"
    "\n"
    "    def banner(self):\n"
    '        return """\n'
    "Engine\n"
    '""" + str(self)\n'
    "\n"
    "    class Inner:\n"
    "        async def run(self, *, n=2):\n"
    "            def helper():\n"
    "                return n\n"
    "            return helper()\n"
    "\n"
    "if True:\n"
    "    def guarded(x): return x  # é\n"
)


def _api(tmp_path: Path, text: str = ENGINE) -> HostAPI:
    return host_api_of(tmp_path, {"pkg/__init__.py": "", "pkg/engine.py": text})


def _found(api: HostAPI, path: str) -> Found:
    module = api.module("pkg.engine")
    obj = module
    for part in path.split("."):
        obj = obj.members[part]
    return Found(obj, f"pkg.engine.{path}")


PATHS = [
    "top",
    "Engine",
    "Engine.size",
    "Engine.build",
    "Engine.banner",
    "Engine.Inner",
    "Engine.Inner.run",
]


def _whole(text: str) -> dict[str, str]:
    """Each definition of ``text`` by name, as a parse of the whole module gives it."""
    return {
        n.name: ast.dump(n, include_attributes=True)
        for n in ast.walk(ast.parse(text))
        if isinstance(n, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
    }


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_each_definition_is_the_node_the_whole_module_gives(tmp_path: Path, newline: str):
    text = ENGINE.replace("\n", newline)
    api = _api(tmp_path, text)
    whole = _whole(text)
    guarded = Found(api.module("pkg.engine").members["guarded"], "pkg.engine.guarded")
    for found in [*(_found(api, p) for p in PATHS), guarded]:
        node = api.def_node(found)
        assert node is not None
        assert ast.dump(node, include_attributes=True) == whole[found.obj.name]
        assert api.def_node(found) is node  # the same node each time


def test_only_the_definitions_asked_for_are_kept(tmp_path: Path):
    text = "".join(f"def f{i}(x):\n    return [x] * {i}\n\n" for i in range(50))
    api = _api(tmp_path, text)
    asked = [api.def_node(_found(api, name)) for name in ("f3", "f40", "f41")]
    gc.collect()
    alive = {o.name for o in gc.get_objects() if isinstance(o, ast.FunctionDef)}
    assert {n.name for n in asked if n is not None} == {"f3", "f40", "f41"}
    assert not {f"f{i}" for i in range(50)} - {"f3", "f40", "f41"} & alive
    assert not api.__dict__.get("_ast_cache")


def test_a_tree_kept_for_other_readers_gives_its_own_node(tmp_path: Path):
    api = _api(tmp_path)
    tree = api._ast("pkg.engine", api.module_text("pkg.engine") or "")
    assert tree is not None
    engine = next(n for n in tree.body if isinstance(n, ast.ClassDef))
    assert api.class_node(_found(api, "Engine")) is engine
    assert api.def_node(_found(api, "Engine.size")) is engine.body[1]


def test_a_definition_is_parsed_from_its_own_lines(tmp_path: Path, monkeypatch):
    """With the lines griffe read for it (decorators included), a definition is parsed from
    those lines alone: the whole module never is. (griffe's lines of a property, and of a
    decorator whose expression starts below its ``@``, leave the decorator out: those are
    read from the whole module, above.)"""
    api = _api(tmp_path)
    whole = _whole(ENGINE)

    def no_whole_parse(text: str) -> None:
        raise AssertionError("the whole module was parsed")

    monkeypatch.setattr("driftcheck.host.api._parse", no_whole_parse)
    guarded = Found(api.module("pkg.engine").members["guarded"], "pkg.engine.guarded")
    own = ["top", "Engine", "Engine.banner", "Engine.Inner", "Engine.Inner.run"]
    for found in [*(_found(api, p) for p in own), guarded]:
        node = api.def_node(found)
        assert node is not None
        assert ast.dump(node, include_attributes=True) == whole[found.obj.name]


@pytest.mark.parametrize(
    ("path", "change"),
    [
        ("top", {"endlineno": 5}),  # the body cut after its docstring: it parses too
        ("top", {"decorators": []}),  # its decorator left out
        ("Engine.build", {"decorators": []}),  # a decorator over three lines left out
        ("Engine.Inner.run", {"endlineno": 22}),  # the nested helper's lines only
    ],
)
def test_lines_that_are_not_the_whole_definition_give_the_whole_modules_node(
    tmp_path: Path, path: str, change: dict
):
    api = _api(tmp_path)
    found = _found(api, path)
    for attr, value in change.items():
        setattr(found.obj, attr, value)
    node = api.def_node(found)
    assert node is not None
    assert ast.dump(node, include_attributes=True) == _whole(ENGINE)[found.obj.name]
