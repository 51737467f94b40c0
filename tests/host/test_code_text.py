"""A module's code without its comments and strings (host/code_text.py): what is left is what
the tokenizer reads as code, so a name it does not hold is read from no node of the module."""

from __future__ import annotations

import ast
import io
import sys
import tokenize

import pytest

from driftcheck.host.code_text import code_only, line_starts

CASES = [
    # (source, names its code spells)
    ('"""torch.compile in a docstring"""\nx = 1  # compile\n', set()),
    ("y = compile(src)  # compile\n", {"compile"}),
    ("s = 'it''s'\nt = \"a # not a comment\" + compile\n", {"compile"}),
    ('s = """a\n"compile" b\'\'\' """\nk = 2\n', set()),
    ('s = """x""""compile"\n', set()),  # four quotes: a triple string, then a plain one
    ("s = 'a\\'compile'\n", set()),  # an escaped quote does not close the string
    ("s = r'a\\'compile'\n", set()),  # nor in a raw string
    ("s = 'a\\\ncompile'\n", set()),  # a backslash continues a string onto the next line
    ("s = b'compile' + rb'compile' + Rb\"x\" + u'compile'\n", set()),
    ("s = f'{compile}'\n", {"compile"}),  # an f-string holds code
    ("s = rf'{compile}' + Fr'x'\n", {"compile"}),
    ("x = a if b else'compile'\n", set()),
    ("# 'compile\nx = compile\n", {"compile"}),  # a quote in a comment opens nothing
    ("x = 1\r# compile\rcompile = 2\r", {"compile"}),
]


def _tokenized_names(source: str) -> set[str]:
    """The names Python's own tokenizer reads as code (f-strings whole, as they hold code)."""
    out = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.NAME:
            out.add(tok.string)
        elif tok.type == tokenize.STRING and tok.string[:2].lower().count("f"):
            out.update(w for w in ("compile",) if w in tok.string)
    return out


@pytest.mark.parametrize(("source", "names"), CASES)
def test_only_the_code_is_left(source: str, names: set[str]):
    ast.parse(source)  # every case is a module that parses
    code = code_only(source)
    if code is None:  # from Python 3.12, a module with an f-string is left to the parser
        assert sys.version_info >= (3, 12)
        return
    assert ("compile" in code) == ("compile" in names)
    assert ("compile" in _tokenized_names(source)) == ("compile" in names)


def test_an_identifier_outside_ascii_is_not_decided():
    # NFKC folds a fullwidth letter: the parser reads ``compile`` where the text spells none
    source = "x = \uff43ompile\n"
    assert ast.parse(source).body[0].value.id == "compile"  # type: ignore[attr-defined]
    assert code_only(source) is None
    assert code_only("'\uff43ompile'  # \uff43\nx = 1\n") is not None  # only in a string


def test_line_starts_split_where_the_parser_does():
    text = "a\r\nb\rc\nd"
    starts = line_starts(text)
    assert starts == [0, 3, 5, 7]
    assert [n.lineno for n in ast.parse(text).body] == [1, 2, 3, 4]


@pytest.mark.parametrize(
    "text",
    [
        "compile",
        "x.compile(1)",
        "recompile compile_ _compile",
        "compiled\ncompile",
        "é compileé",
        "a1compile",
        "compile compile(compile)\u0663compile compile",
        "_compile.compile\u2019compile",
    ],
)
def test_a_word_is_found_where_the_pattern_finds_it(text: str):
    import re

    from driftcheck.host.code_text import spells_word, word_offsets

    assert spells_word(text, "compile") == (re.search(r"\bcompile\b", text) is not None)
    found = [m.start() for m in re.finditer(r"\bcompile\b", text)]
    assert word_offsets(text, "compile") == found
