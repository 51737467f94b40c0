"""Where the host reads a module-level name, and through which module (host/readers.py)."""

from __future__ import annotations

from pathlib import Path

from conftest import host_api_of

from driftcheck.host.api import HostAPI
from driftcheck.host.readers import Read, reads

FILES = {
    "pkg/__init__.py": "",
    "pkg/ops.py": "from pkg.kernels import fn\n\n__all__ = ['fn']\n",
    "pkg/kernels.py": "def fn(x):\n    return x\n\n\ndef twice(x):\n    return fn(fn(x))\n",
    "pkg/engine.py": (
        "from pkg import ops\n"
        "from .kernels import fn as kernel\n"
        "import pkg.kernels\n\n\n"
        "def step(x):\n"
        "    return ops.fn(x) + kernel(x) + pkg.kernels.fn(x)\n"
    ),
    "pkg/other.py": "def fn():\n    return 'fn'  # fn in a string and a comment\n",
}


def _api(tmp_path: Path) -> HostAPI:
    return host_api_of(tmp_path, FILES)


def test_each_read_names_the_module_it_looks_the_name_up_in(tmp_path: Path):
    got = reads(_api(tmp_path), "fn")
    assert set(got) == {
        Read("pkg/engine.py", 7, "pkg.ops", "attribute"),
        Read("pkg/engine.py", 7, "pkg.kernels", "imported"),
        Read("pkg/engine.py", 7, "pkg.kernels", "attribute"),
        Read("pkg/kernels.py", 6, "pkg.kernels", "global"),
    }


def test_imports_definitions_and_strings_are_no_reads(tmp_path: Path):
    got = reads(_api(tmp_path), "fn")
    assert not [r for r in got if r.file in ("pkg/ops.py", "pkg/other.py")]


def test_names_searched_together_read_as_each_searched_alone(tmp_path: Path):
    names = ["fn", "twice", "kernels", "ops", "step", "x"]
    alone = {n: reads(_api(tmp_path / "alone"), n) for n in names}
    together = _api(tmp_path / "together")
    got = {n: reads(together, n, also=names) for n in names}
    assert got == alone
    assert alone["fn"] and alone["kernels"]  # reads of a function and through a package
    assert set(together.__dict__["_facts"]) == {f"reads:1:{n}" for n in names}  # one pass


def test_a_file_that_names_it_only_in_comments_and_strings_is_not_parsed(tmp_path, monkeypatch):
    import driftcheck.host.readers as readers

    parsed: list[str] = []
    parse = readers.ast.parse
    monkeypatch.setattr(readers.ast, "parse", lambda text: parsed.append(text) or parse(text))
    files = {**FILES, "pkg/docs.py": '"""Call fn(x) first."""\n\nX = 1  # not fn\n'}
    got = reads(host_api_of(tmp_path, files), "fn")
    assert not any("Call fn(x)" in t for t in parsed)
    assert {r.file for r in got} == {"pkg/engine.py", "pkg/kernels.py"}
