"""Where the host's own code reads a module-level name, and through which module.

A patch of ``mod.fn`` reaches only the readers that look ``fn`` up through ``mod`` when they
run: ``mod.fn(...)`` (an attribute read of the module), ``mod``'s own global reads of ``fn``,
and ``from mod import fn`` in a module imported after the patch (a copy taken at import).
A reader that reaches ``fn`` through another module (the one that defines it now, behind a
re-export shim) never sees the patch. Files are searched as text first, then only those that
name ``fn`` are parsed; mined once per release and name, and kept in the host snapshot.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial

from driftcheck.host.api import HostAPI
from driftcheck.host.code_text import code_only, line_starts, spells_word, word_offsets
from driftcheck.host.values import absolute, dotted
from driftcheck.host.walk import gc_paused, statements

FORMAT = 1


@dataclass(frozen=True)
class Read:
    """One read of a module-level name in the host's own code.

    Attributes:
        file: Host file, relative to its root.
        line: 1-based line of the read.
        via: The module the name is looked up in (``mod`` of ``mod.fn``, the file's own module
            for a global read, ``X`` of ``from X import fn``).
        how: ``attribute``, ``global`` or ``imported`` (a copy taken at import).
    """

    file: str
    line: int
    via: str
    how: str


def reads(api: HostAPI, name: str, also: Iterable[str] = ()) -> list[Read]:
    """Every read of ``name`` through some module of the host, in file and line order.

    ``also``: other names likely asked for next; when the host's files have to be searched,
    they are searched for all of them in the same pass (each file parsed once; each name kept
    as its own fact).
    """
    key = f"reads:{FORMAT}:{name}"
    kept = getattr(api.tree, "data", {}).get("facts", None) or {}
    cache = api.__dict__.get("_facts", {})

    def known(k: str) -> bool:
        return k in kept or k in cache

    if not known(key):
        wanted = sorted({name, *also} - {n for n in also if known(f"reads:{FORMAT}:{n}")})
        mined = _mine(api, wanted)
        for n in wanted:
            api.fact(f"reads:{FORMAT}:{n}", partial(_rows, mined[n]))
    rows = api.fact(key, lambda: _rows(_mine(api, [name])[name]))
    return [Read(str(f), int(n), str(v), str(h)) for f, n, v, h in rows]


def _rows(found: list[Read]) -> list[list]:
    return [[r.file, r.line, r.via, r.how] for r in found]


@gc_paused()
def _mine(api: HostAPI, names: list[str]) -> dict[str, list[Read]]:
    """One pass over the host's files for every name: a file whose code holds some of them as
    words is parsed once and walked once for all of them (one that names them only in its
    comments and strings holds no node that reads one: :func:`code_only`)."""
    words = re.compile(r"\b(?:" + "|".join(re.escape(n) for n in names) + r")\b")
    wanted = set(names)
    other = any(not (n.isascii() and n.isidentifier()) for n in names)
    out: dict[str, list[Read]] = {n: [] for n in names}
    for rel, text in api.source_texts().items():
        if other:  # a name that is no identifier: each match of the pattern, as it finds them
            hits = {m.group(0) for m in words.finditer(text)} & wanted
        else:
            hits = {n for n in wanted if n in text and spells_word(text, n)}
        if not hits:
            continue
        code = code_only(text)
        if code is not None and not (
            words.search(code) if other else any(spells_word(code, n) for n in hits)
        ):
            continue  # named in its comments and strings only: no node of it reads one
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        for n, found in _in_file(api, tree, rel, hits, text).items():
            out[n].extend(found)
    return out


def _spanning(tree: ast.Module, lines: list[int]) -> list[ast.AST]:
    """The nodes of :func:`ast.walk`, in its order, left out those whose lines hold none of
    ``lines`` (sorted): a node lies within its parent's lines, but for a decorated definition's
    decorators (above its ``def``) and the parts of an f-string (whose positions older Pythons
    did not keep), which are walked whole."""
    out: list[ast.AST] = [tree]
    whole: set[int] = set()  # ids of the nodes walked without looking at their lines
    append = out.append
    for cur in out:
        free = id(cur) in whole or type(cur) is ast.JoinedStr
        for name in cur._fields:
            field = getattr(cur, name, None)
            items = field if isinstance(field, list) else (field,)
            for item in items:
                if not isinstance(item, ast.AST):
                    continue
                if free:
                    whole.add(id(item))
                else:
                    start = getattr(item, "lineno", None)
                    if start is not None:
                        decorators = getattr(item, "decorator_list", None)
                        if decorators:
                            start = min(start, *(d.lineno for d in decorators))
                        at = bisect_left(lines, start)
                        end = getattr(item, "end_lineno", None) or start
                        if at == len(lines) or lines[at] > end:
                            continue
                append(item)
    return out


def _in_file(
    api: HostAPI, tree: ast.Module, rel: str, names: set[str], text: str
) -> dict[str, list[Read]]:
    """The reads of each of ``names`` in one file; imports anywhere in it bind its names (a
    function's own ``import`` included: a local name is read the same way). Only the nodes on
    the lines that hold one of the names (or a local copy of one) as a word are walked."""
    module = api.tree.module_name(rel)
    copies: dict[str, dict[str, str]] = {}  # name -> local name -> module it was copied from
    bound: list[tuple[str, str, str]] = []  # (local name, module it is bound to, name imported)
    for node in statements(tree):
        if isinstance(node, ast.ImportFrom):
            base = absolute(module, node.module, node.level, api)
            if base is None:
                continue
            for alias in node.names:
                local = alias.asname or alias.name
                if alias.name in names:
                    copies.setdefault(alias.name, {})[local] = base
                if alias.name != "*":
                    bound.append((local, f"{base}.{alias.name}", alias.name))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bound.append((alias.asname, alias.name, ""))
                else:
                    head = alias.name.split(".")[0]
                    bound.append((head, head, ""))
    # The modules bound to local names: ``from m import NAME`` binds a copy of NAME, not a
    # module, only when NAME is the name asked for.
    every = {local: target for local, target, _ in bound}
    modules = {
        n: {local: target for local, target, imported in bound if imported != n}
        if n in copies
        else every
        for n in names
    }
    copied: dict[str, list[str]] = {}  # local name -> the names it is a copy of
    for n, locals_ in copies.items():
        for local in locals_:
            copied.setdefault(local, []).append(n)
    starts = line_starts(text)
    spelt = {*names, *copied}
    if all(w.isascii() and w.isidentifier() for w in spelt):  # each found by the string's search
        at = [i for w in spelt for i in word_offsets(text, w)]
    else:
        words = re.compile(r"\b(?:" + "|".join(re.escape(w) for w in spelt) + r")\b")
        at = [m.start() for m in words.finditer(text)]
    lines = sorted({bisect_right(starts, i) for i in at})
    out: dict[str, list[Read]] = {n: [] for n in names}
    for node in _spanning(tree, lines):
        kind = type(node)
        if kind is ast.Attribute:
            assert isinstance(node, ast.Attribute)
            if node.attr not in names:
                continue
            chain = dotted(node.value)
            if not chain:
                continue
            head, _, rest = chain.partition(".")
            mods = modules[node.attr]
            if head in mods:
                via = mods[head] + (f".{rest}" if rest else "")
                out[node.attr].append(Read(rel, node.lineno, via, "attribute"))
        elif kind is ast.Name:
            assert isinstance(node, ast.Name)
            if not isinstance(node.ctx, ast.Load):
                continue
            for n in copied.get(node.id, ()):
                out[n].append(Read(rel, node.lineno, copies[n][node.id], "imported"))
            if node.id in names and node.id not in copies.get(node.id, {}):
                # A global read through the file's own module (or a local of the same name:
                # counted too, which can only make a patch look read, never unread).
                out[node.id].append(Read(rel, node.lineno, module, "global"))
    return {n: sorted(found, key=lambda r: (r.line, r.via)) for n, found in out.items() if found}
