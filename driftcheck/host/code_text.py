"""A module's code without its comments and string literals, for the passes over all of a
host's files that parse only the files whose code names something: a name that a file spells
only in its docstrings and comments (torch's files say ``torch.compile`` in thousands of them)
is read from none of its nodes, so the file need not be parsed for it.

The comments and strings are found the way Python's tokenizer finds them (a comment runs from
``#`` to the line's end outside a string; a string from its prefix and quotes to the first
closing quotes that no backslash escapes, raw or not), so for a file that parses, what is left
is its code. An f-string (or a template string) holds code: it is kept. Where that cannot be
exact, :func:`code_only` says so and the caller parses the file as before: an identifier
outside ASCII (the parser folds it, NFKC, to a name the text does not spell) and, from Python
3.12, any f-string (whose replacement fields may reuse its own quotes, PEP 701).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator


def _quoted(q: str) -> str:
    """A string body opened and closed by ``q`` (``"``, ``'``, or either tripled)."""
    c = q[0]
    if len(q) == 3:  # any character but an unescaped run of three closing quotes
        return rf"{q}[^{c}\\]*(?:(?:\\.|{c}(?!{c}{c}))[^{c}\\]*)*{q}"
    return rf"{q}[^{c}\\\r\n]*(?:\\(?:\r\n|.)[^{c}\\\r\n]*)*{q}"


_BODY = "|".join(_quoted(q) for q in ('"""', "'''", '"', "'"))
#: A comment (group 1), a string that holds code (group 2: its prefix has ``f`` or ``t``), or
#: any other string; the tripled quotes tried before the single ones, as the tokenizer does.
_NOT_CODE = re.compile(
    r"(?=[#'\"rRbBuUfFtT])(?:(#[^\r\n]*)"
    rf"|([rRbB]?[fFtT][rRbB]?(?:{_BODY}))"
    rf"|[rRbBuU]{{0,2}}(?:{_BODY}))",
    re.S,
)
_CODE_STRING = re.compile(r"[fFtT][rRbB]?['\"]")
_NESTED_QUOTES = sys.version_info >= (3, 12)


def code_only(text: str) -> str | None:
    """``text`` with each comment and each string that holds no code replaced by a space; None
    where the code left cannot be told exactly (see the module's docstring)."""
    if _NESTED_QUOTES and _CODE_STRING.search(text):
        return None
    code = _NOT_CODE.sub(r"\2 ", text)
    return code if code.isascii() else None


_LINE_END = re.compile(r"\r\n|\r|\n")


def line_starts(text: str) -> list[int]:
    """Where each line of ``text`` starts (line ``n`` at index ``n - 1``), split at the line
    ends the parser counts: ``bisect_right(starts, offset)`` is an offset's line."""
    starts = [0]
    for m in _LINE_END.finditer(text):
        starts.append(m.end())
    return starts


def spells_word(text: str, word: str) -> bool:
    """Whether ``text`` holds ``word`` (an identifier) as a word, as ``\\bword\\b`` finds
    it: by the string's own search, not a pattern tried at each of the text's characters."""
    return next(_word_offsets(text, word), None) is not None


def word_offsets(text: str, word: str) -> list[int]:
    """Where ``text`` holds ``word`` (an identifier) as a word: the starts of the matches of
    ``\\bword\\b``, found as :func:`spells_word` finds the first."""
    return list(_word_offsets(text, word))


def _word_offsets(text: str, word: str) -> Iterator[int]:
    at, size = text.find(word), len(word)
    while at >= 0:
        before = text[at - 1] if at else " "
        after = text[at + size : at + size + 1] or " "
        if not (before.isalnum() or before == "_" or after.isalnum() or after == "_"):
            yield at
        at = text.find(word, at + 1)
