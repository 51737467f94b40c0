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
from dataclasses import dataclass

from driftcheck.host.api import HostAPI
from driftcheck.host.values import absolute, dotted

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


def reads(api: HostAPI, name: str) -> list[Read]:
    """Every read of ``name`` through some module of the host, in file and line order."""
    rows = api.fact(
        f"reads:{FORMAT}:{name}",
        lambda: [[r.file, r.line, r.via, r.how] for r in _mine(api, name)],
    )
    return [Read(str(f), int(n), str(v), str(h)) for f, n, v, h in rows]


def _mine(api: HostAPI, name: str) -> list[Read]:
    word = re.compile(rf"\b{re.escape(name)}\b")
    out: list[Read] = []
    for rel, text in api.source_texts().items():
        if not word.search(text):
            continue
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        out.extend(_in_file(api, tree, rel, name))
    return out


def _in_file(api: HostAPI, tree: ast.Module, rel: str, name: str) -> list[Read]:
    """The reads of ``name`` in one file; imports anywhere in it bind its names (a function's
    own ``import`` included: a local name is read the same way)."""
    module = api.tree.module_name(rel)
    copies: dict[str, str] = {}  # local name -> module it was copied from
    modules: dict[str, str] = {}  # local name -> the module (or package) it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = absolute(module, node.module, node.level, api)
            if base is None:
                continue
            for alias in node.names:
                local = alias.asname or alias.name
                if alias.name == name:
                    copies[local] = base
                elif alias.name != "*":
                    modules[local] = f"{base}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    modules[alias.asname] = alias.name
                else:
                    head = alias.name.split(".")[0]
                    modules[head] = head
    out: list[Read] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == name:
            chain = dotted(node.value)
            if not chain:
                continue
            head, _, rest = chain.partition(".")
            if head in modules:
                via = modules[head] + (f".{rest}" if rest else "")
                out.append(Read(rel, node.lineno, via, "attribute"))
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id in copies:
                out.append(Read(rel, node.lineno, copies[node.id], "imported"))
            elif node.id == name:
                # A global read through the file's own module (or a local of the same name:
                # counted too, which can only make a patch look read, never unread).
                out.append(Read(rel, node.lineno, module, "global"))
    return sorted(out, key=lambda r: (r.line, r.via))
