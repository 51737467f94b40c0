"""override-signature reads a client class's mentions from the top-level statements that may
spell its name, parsed alone (``_part``): every mention, with every parent up to the module, is
the one a parse of the whole file gives, however the name is spelt."""

from __future__ import annotations

import ast
import re
from collections import Counter

import pytest

from driftcheck.checks import override_signature as osig
from driftcheck.checks.context import CheckContext
from driftcheck.client.lines import FileLines

CLIENT = '''"""A module that names Engine in its docstring."""
import functools
from host import Base, register

PLAIN = 1


class Engine(Base):
    def __init__(self, size):
        super().__init__()


@register(
    Engine,
)
class Other(Base):
    """Not Engine's subclass; says Engine in its docstring."""

    @functools.cache
    def make(self):
        return Engine


SPLIT = "Eng" "ine"
ESCAPED = "\\x45ngine"
CONTINUED = "Eng\\
ine"
PARENS = (
    "En"  # a comment between
    'gine'
)
FORMATTED = "Engi" f"ne{PLAIN}"
FAR = 2; NEAR = Engine(3)
Ｅngine2 = 4


def build():
    def inner():
        return isinstance(PLAIN, Engine)

    return [Engine(1), inner]


class Tiny(Engine):
    pass


def unrelated():
    return PLAIN + 1
'''


def _ctx(text: str, rel: str = "pkg/mod.py") -> CheckContext:
    lines = FileLines()
    lines.add(rel, text)
    lines.note_statements(rel, ast.parse(text))
    return CheckContext(target=None, client_lines=lines)  # type: ignore[arg-type]


def _chain(node: ast.AST | None, parents: dict[ast.AST, ast.AST]) -> tuple[str, ...]:
    out = []
    while node is not None:
        out.append("Module" if isinstance(node, ast.Module) else ast.dump(node, True))
        node = parents.get(node)
    return tuple(out)


def _mentions(read: osig._Read, name: str) -> Counter:
    word = re.compile(rf"\b{re.escape(name)}\b")
    found = osig._mentions_in(read.candidates(name, word), name, word, read.parents)
    return Counter((how, _chain(node, read.parents)) for how, node in found)


@pytest.mark.parametrize("name", ["Engine", "Engine2", "Tiny", "Other", "PLAIN", "inner", "make"])
def test_a_parts_mentions_are_the_whole_files(name: str):
    ctx = _ctx(CLIENT)
    part = osig._part(ctx, "pkg/mod.py", name)
    assert part is not None
    whole = ast.parse(CLIENT)
    assert _mentions(osig._read(ctx, "pkg/mod.py", part), name) == _mentions(
        osig._Read(whole), name
    )


def test_a_name_spelt_otherwise_is_found_in_its_statement():
    """Each spelling the source does not spell whole is a mention the part holds: split over
    strings (on one line, in brackets with a comment, into an f-string), an escape, a backslash
    that continues the string, a non-ASCII identifier read in its NFKC form."""
    ctx = _ctx(CLIENT)
    part = osig._part(ctx, "pkg/mod.py", "Engine")
    assert part is not None
    assigned = {t.id for s in part.body if isinstance(s, ast.Assign) for t in s.targets}
    assert {"SPLIT", "ESCAPED", "CONTINUED", "PARENS", "FORMATTED", "NEAR", "Engine2"} <= assigned
    assert "unrelated" not in {getattr(s, "name", "") for s in part.body}
    assert len(part.body) < len(ast.parse(CLIENT).body)


def test_a_file_without_its_statements_noted_is_read_whole():
    lines = FileLines()
    lines.add("pkg/mod.py", CLIENT)
    ctx = CheckContext(target=None, client_lines=lines)  # type: ignore[arg-type]
    part = osig._part(ctx, "pkg/mod.py", "Engine")
    assert part is not None
    assert ast.dump(part) == ast.dump(ast.parse(CLIENT))


def test_statements_on_one_line_are_one_run():
    lines = FileLines()
    text = "a = 1; b = 2\n\n@dec\nclass C:\n    x = 1\nd = 3\n"
    lines.add("m.py", text)
    lines.note_statements("m.py", ast.parse(text))
    assert lines.statements("m.py") == [(1, 1, 2), (3, 5, 1), (6, 6, 1)]
