"""The client's texts kept in their smallest form: the same text to every reader."""

from __future__ import annotations

import ast
import sys

import pytest

from driftcheck.client.index import parse_module
from driftcheck.client.lines import FileLines
from driftcheck.client.names import Source
from driftcheck.client.texts import PACK_ABOVE, Packed, Texts, keep, text_of, unpack, utf8_of

WIDE = 'def greet(name):\n    """Say hello \U0001f917 to ``name``."""\n    return "h\u00e9llo " + name\n'
LATIN = "x = 'caf\u00e9'\n" * 50


def test_each_text_is_kept_in_its_smallest_form() -> None:
    assert keep("plain = 1\n") == "plain = 1\n"
    assert isinstance(unpack(keep(WIDE * 100)), bytes)  # four bytes a character as a string
    assert len(unpack(keep(WIDE * 100))) < sys.getsizeof(WIDE * 100) / 3
    assert keep(LATIN) == LATIN  # one byte a character already: UTF-8 would be larger
    assert keep("lone \ud800 surrogate") == "lone \ud800 surrogate"
    for text in (WIDE, LATIN, "", "a\r\nb\rc"):
        assert text_of(keep(text)) == text


def test_the_store_reads_back_what_it_was_given() -> None:
    texts = Texts()
    texts["a.py"], texts["b.py"] = WIDE, "b = 1\n"
    assert dict(texts) == {"a.py": WIDE, "b.py": "b = 1\n"}
    assert {**texts} == dict(texts.items())
    assert isinstance(unpack(texts.kept("a.py")), bytes) and texts.utf8("b.py") == b"b = 1\n"
    other = Texts()
    kept = texts.kept("a.py")
    texts.move("a.py", other)
    assert "a.py" not in texts and other.kept("a.py") is kept and other["a.py"] == WIDE
    del other["a.py"]
    assert len(other) == 0


def test_sources_lines_and_spans_agree_with_the_string() -> None:
    code = WIDE * 3 + "\r\nvalue = greet('\u00fc')  # \U0001f600\r\n"
    as_text, as_kept = Source(code), Source(keep(code))
    assert isinstance(unpack(as_kept.code), bytes)
    assert len(as_text) == len(as_kept)
    tree = ast.parse(code)
    for node in ast.walk(tree):
        if isinstance(node, ast.expr):
            assert as_kept.span(node) == as_text.span(node)
            assert as_kept.segment(node) == as_text.segment(node)
    for i in range(1, len(as_text) + 1):
        assert as_kept.line(i) == as_text.line(i)


def test_a_parsed_module_and_the_lines_share_the_kept_text() -> None:
    texts, lines = Texts(), FileLines()
    texts["m.py"] = WIDE
    lines.add("m.py", texts.kept("m.py"))
    info = parse_module("m", "m.py", texts["m.py"], texts.kept("m.py"))
    assert info.source.code is texts.kept("m.py")
    assert lines.text("m.py") == WIDE and lines["m.py"] == WIDE.splitlines()


def test_a_kept_text_parses_as_its_string_whatever_encoding_it_declares() -> None:
    from driftcheck.client.names import parse

    for head in ("", "# -*- coding: utf-8 -*-\n", "#!/usr/bin/env python\n# coding=latin-1\n"):
        code = head + WIDE + "s = '\u00e9\U0001f917'\n"
        kept = keep(code)
        assert isinstance(unpack(kept), bytes)
        plain, from_kept = parse(code), parse(kept)
        assert ast.dump(from_kept, include_attributes=True) == ast.dump(
            plain, include_attributes=True
        )


LONG = "def f(x):\n    return x + 1  # caf\u00e9\n" * 400  # Latin-1: kept as a string
LONG_WIDE = WIDE * 200  # kept as UTF-8 bytes


def test_long_texts_are_kept_packed_and_read_back_as_they_were_kept() -> None:
    import pickle

    for text in (LONG, LONG_WIDE, "x = 1\n" * 2000, "lone \ud800 surrogate " * 500):
        for compressed in (False, True):  # waiting to be compressed, and compressed
            kept = keep(text)
            assert len(text) > PACK_ABOVE and isinstance(kept, Packed)
            if compressed:
                kept._pack()
            assert keep(kept) is kept  # a packed text is kept as it is
            assert kept.isascii() == text.isascii()
            assert text_of(kept) == text
            assert unpack(kept) == (text.encode() if isinstance(unpack(kept), bytes) else text)
            assert pickle.loads(pickle.dumps(kept)).unpacked() == unpack(kept)
    # a fresh copy: pickling a string keeps its UTF-8 beside it, which makes it larger
    fresh = LONG[:-1] + LONG[-1]
    assert isinstance(unpack(keep(fresh)), str) and isinstance(unpack(keep(LONG_WIDE)), bytes)
    assert utf8_of(keep(LONG_WIDE)) == LONG_WIDE.encode()
    packed = keep(LONG)
    packed._pack()
    assert packed._raw is None and len(packed._data) < len(LONG) / 10  # what packing is for


def test_texts_are_compressed_once_too_many_wait_oldest_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from driftcheck.client import texts as module

    text = "x = 1\n" * 2000
    monkeypatch.setattr(module, "PENDING_BYTES", 3 * len(text))
    for _ in range(4):  # what earlier tests left waiting is compressed first
        keep(text)
    kept = [keep(text) for _ in range(5)]
    waiting = [k._raw is not None for k in kept]
    assert waiting == [False, False, True, True, True]  # the last three fit
    assert all(text_of(k) == text for k in kept)
    small = keep("x = 1\n" * 1000)  # a small client's texts: never compressed
    assert small._raw is not None and text_of(small) == "x = 1\n" * 1000


@pytest.mark.parametrize("waiting", [8_000_000, 0])
def test_many_packed_texts_each_read_back_its_own_text(
    waiting: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from driftcheck.client import texts as module

    monkeypatch.setattr(module, "PENDING_BYTES", waiting)  # 0: each compressed at once
    texts = [f"n{i} = {i}\n" * 1000 for i in range(20)]
    kept = [keep(t) for t in texts]
    for _ in range(3):  # more texts than are kept unpacked, read in turn and again
        for t, k in zip(texts, kept, strict=True):
            assert text_of(k) == t


def test_a_packed_text_parses_and_locates_as_its_string() -> None:
    from driftcheck.client.names import parse

    code = LONG_WIDE + "\r\nvalue = greet('\u00fc')  # \U0001f600\r\n"
    kept = keep(code)
    assert isinstance(kept, Packed)
    assert ast.dump(parse(kept), include_attributes=True) == ast.dump(
        ast.parse(code), include_attributes=True
    )
    as_text, as_kept = Source(code), Source(kept)
    assert len(as_text) == len(as_kept)
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Call):
            assert as_kept.span(node) == as_text.span(node)
            assert as_kept.segment(node) == as_text.segment(node)
    texts, lines = Texts(), FileLines()
    texts["m.py"] = code
    lines.add("m.py", texts.kept("m.py"))
    info = parse_module("m", "m.py", texts.kept("m.py"))
    assert info.source.code is texts.kept("m.py") and lines.text("m.py") == code


def test_the_word_filter_never_misses_a_file_that_holds_the_word() -> None:
    import random
    import re

    rng = random.Random(7)
    vocab = [
        "Model",
        "model",
        "Model2",
        "_Model",
        "caf\u00e9",
        "x",
        "Config",
        "forward",
        "\u00e9t\u00e9",
    ]
    lines = FileLines()
    texts = {}
    for i in range(60):
        words = rng.choices(vocab, k=rng.randrange(0, 400))
        seps = rng.choices([" ", ".", "(", "\n", "", "_", "1"], k=len(words))
        texts[f"f{i}.py"] = "".join(w + s for w, s in zip(words, seps, strict=True))
        lines.add(f"f{i}.py", texts[f"f{i}.py"])
    for word in [*vocab, "absent", "Model.forward"]:
        holds = {r for r, t in texts.items() if re.search(rf"\b{re.escape(word)}\b", t)}
        assert holds <= set(lines.may_hold(word)), word
    assert lines.may_hold("Model.forward") == list(texts)  # not one word: every file
    assert len(lines.may_hold("absent")) < len(texts) / 4  # the filter does filter


def test_the_word_filter_lets_few_files_through_for_a_word_none_holds() -> None:
    import random

    rng = random.Random(11)

    def word() -> str:
        return "".join(rng.choices("abcdefghijklmnopqrstuvwxyz_", k=10))

    lines = FileLines()
    for i in range(200):
        lines.add(f"f{i}.py", " ".join(word() for _ in range(rng.randrange(50, 800))))
    through = sum(len(lines.may_hold(word())) for _ in range(200))
    assert through / (200 * 200) < 0.01  # a bit a word let 3 to 6% through


def test_the_word_filter_reads_the_words_the_pattern_finds() -> None:
    """The filter splits a text's bytes at ASCII non-word bytes and only the pieces holding
    other characters with the pattern: the same words as ``\\w+`` over the whole text."""
    import random
    import re

    from driftcheck.client.lines import words_of

    rng = random.Random(5)
    alphabet = [
        *"ab_Z09 .(\t\n-'\"#",
        "\u00e9",  # a letter outside ASCII: a word character
        "\u2019",  # a right quote: not one
        "\u00a0",  # a no-break space: whitespace, not a word character
        "\u3000",  # an ideographic space
        "\u4e2d",  # an ideograph: a word character
        "\U0001f917",  # an emoji: not one
        "\u0663",  # an Arabic-Indic digit: a word character
        "\x1c",  # a separator ``str.split`` splits at and ``\\w`` is not
        "\ud800",  # a lone surrogate, as a file decoded with surrogates keeps it
    ]
    texts = ["", "plain ascii_words here", "caf\u00e9\u2019s r\u00e9sum\u00e9"]
    texts += ["".join(rng.choices(alphabet, k=rng.randrange(1, 80))) for _ in range(400)]
    for text in texts:
        expected = {w.encode("utf-8", "surrogatepass") for w in re.findall(r"\w+", text)}
        assert words_of(text) == expected, repr(text)
