"""Parameters the host probes for before it passes them: a compatibility shim is evidence.

A host that adds a parameter to a method clients override often keeps old overrides working by
asking first: ``if not supports_kw(connector_cls, "kv_cache_config"): ...`` (a helper of its
own that reads ``inspect.signature``), or ``"x" in inspect.signature(f).parameters`` written
out. An override without that parameter is then called the old way, so its absence is no drift.

Read from the host's files as text, once per release (a snapshot fact): the functions whose
body reads a signature (``inspect.signature``, ``getfullargspec``) are the probes, and every
string literal passed to one of them, or tested ``in`` a signature's parameters, names a probed
parameter. One pass finds the probes and the tests; a second, only when there are probes, their
calls.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_left, bisect_right

from driftcheck.host.api import HostAPI
from driftcheck.host.code_text import code_only, line_starts, spells_word, word_offsets
from driftcheck.host.walk import gc_paused, statements

FORMAT = 1
_IN_SIGNATURE = re.compile(
    r"""["'](\w+)["']\s+(?:not\s+)?in\s+(?:inspect\.)?signature\([^()]*\)\.parameters"""
)
#: The names of the calls that read a signature, found as words by the string's own search
#: (a pattern of the three was tried at every character of the host's files).
_READER_NAMES = ("signature", "getfullargspec", "getargspec")


def probed_parameters(api: HostAPI) -> dict[str, tuple[str, int]]:
    """Parameter name -> (file, line) of one host call that probes a callable for it."""

    @gc_paused()
    def compute() -> dict[str, list]:
        texts = api.source_texts()
        # First pass: the probes, and the parameters tested ``in`` a signature (found where the
        # file reads one: plain substring tests, fast).
        probes: set[str] = set()
        tested: dict[str, list[tuple[str, int]]] = {}
        for rel, text in texts.items():
            if "signature(" in text or "getargspec(" in text:
                code = code_only(text)  # spelt in its docstrings only: no function reads one
                if code is None or any(spells_word(code, n) for n in _READER_NAMES):
                    probes.update(_probe_functions(text))
                if ".parameters" in text:
                    tested[rel] = _matches(_IN_SIGNATURE, text)
        # Second pass, only when the host has probes: the string literals passed to them (the
        # texts read back from the first pass's spill, not the release).
        called: dict[str, list[tuple[str, int]]] = {}
        if probes:
            calls = re.compile(
                r"\b(?:" + "|".join(re.escape(p) for p in sorted(probes)) + r")\("
                r"\s*[^(),]+(?:\([^()]*\))?\s*,\s*[\"'](\w+)[\"']"
            )
            for rel, text in texts.items():
                if any(f"{p}(" in text for p in probes):
                    called[rel] = _matches(calls, text)
        out: dict[str, list] = {}
        for rel in texts:  # in path order (not read again)
            for name, line in (*tested.get(rel, ()), *called.get(rel, ())):
                out.setdefault(name, [rel, line])
        return out

    raw = api.fact(f"probed-parameters:{FORMAT}", compute)
    return {k: (v[0], int(v[1])) for k, v in raw.items()}


def _matches(pattern: re.Pattern[str], text: str) -> list[tuple[str, int]]:
    """Each match's first group with its line, in the text's order."""
    return [(m.group(1), text.count("\n", 0, m.start()) + 1) for m in pattern.finditer(text)]


def _probe_functions(text: str) -> set[str]:
    """Functions of a module that read a callable's signature and look the name they are given
    second up in it (``params.get(kw_name)``, ``kw_name in params``, ``params[kw_name]``)."""
    try:
        module = ast.parse(text)
    except SyntaxError:
        return set()
    # The lines that spell a reader's name: a function (its decorators included) that spans
    # none of them calls none (an identifier outside ASCII may fold to one: then every
    # function is walked).
    starts = line_starts(text) if text.isascii() else None
    lines = None
    if starts is not None:
        spelt = [i for n in _READER_NAMES for i in word_offsets(text, n)]
        lines = sorted({bisect_right(starts, i) for i in spelt})
    out = set()
    for node in statements(module):  # a definition is a statement
        if type(node) is not ast.FunctionDef:
            continue
        assert isinstance(node, ast.FunctionDef)
        if len(node.args.args) < 2:
            continue
        if lines is not None:
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            at = bisect_left(lines, first)
            if at == len(lines) or lines[at] > (node.end_lineno or node.lineno):
                continue
        reads = any(
            isinstance(call, ast.Call)
            and (getattr(call.func, "attr", None) or getattr(call.func, "id", None))
            in ("signature", "getfullargspec", "getargspec")
            for call in ast.walk(node)
        )
        if reads and _looks_up(node, node.args.args[1].arg):
            out.add(node.name)
    return out


def _looks_up(func: ast.FunctionDef, name: str) -> bool:
    """Whether ``name`` is looked up in something in the function's body."""
    for n in ast.walk(func):
        if isinstance(n, ast.Compare) and isinstance(n.left, ast.Name) and n.left.id == name:
            if any(isinstance(op, ast.In | ast.NotIn) for op in n.ops):
                return True
        if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Name) and n.slice.id == name:
            return True
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "get"
            and n.args
            and isinstance(n.args[0], ast.Name)
            and n.args[0].id == name
        ):
            return True
    return False
