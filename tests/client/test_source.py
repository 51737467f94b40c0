"""A client file's ``Source`` addresses lines, columns and node texts as the splitting of its
text on any line break does, though it keeps only where each line starts and ends."""

from __future__ import annotations

import ast

from driftcheck.client.names import Source


def test_lines_are_the_text_split_on_every_kind_of_line_break():
    code = "a = 1\r\nb = 'é'\rc = (1,\n     2)\n"
    src = Source(code)
    assert len(src) == 5
    assert [src.line(i) for i in range(1, 6)] == ["a = 1", "b = 'é'", "c = (1,", "     2)", ""]


def test_columns_and_segments_count_characters_on_non_ascii_lines():
    code = "x = 'é'; y = f(1,\n  2)\nz = g()\n"
    src = Source(code)
    tree = ast.parse(code)
    call = tree.body[1].value  # f(1, 2): after a two-byte character
    assert src.start(call) == (1, 13) and src.end(call) == (2, 4)
    assert src.segment(call) == "f(1,\n  2)"
    z = tree.body[2].value
    assert src.span(z) == (3, 5, 3, 8) and src.segment(z) == "g()"
    assert src.column(9, 7) == 7  # a line past the end: the offset as it is


def test_a_text_of_plain_line_breaks_splits_as_the_pattern_does():
    for code in ("", "\n", "a\n\nbé\n", "a\nb", "x = 1\n\n\n"):
        src = Source(code)
        lines = code.split("\n")
        assert [src.line(i) for i in range(1, len(src) + 1)] == lines
