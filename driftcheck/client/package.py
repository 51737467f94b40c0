"""The client package: its tree, identity, and the Python files that name the host, parsed."""

from __future__ import annotations

import re
from codecs import BOM_UTF8
from collections.abc import Callable
from dataclasses import dataclass, field

from driftcheck.client import notebooks
from driftcheck.client.discovery import Discovered, discover
from driftcheck.client.index import ClientIndex, ModuleInfo, parse_module
from driftcheck.client.lines import FileLines
from driftcheck.client.texts import Kept, Texts
from driftcheck.errors import SourceError
from driftcheck.sources.specs import PackageSpec
from driftcheck.sources.trees import (
    BOM,
    DirectoryTree,
    SourceTree,
    decode_text,
    guess_name,
    open_tree,
)


@dataclass
class Client:
    """The client package: its tree, identity, parsed modules and uses."""

    tree: SourceTree
    name: str
    version: str
    modules: dict[str, ModuleInfo] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    lines: FileLines = field(default_factory=FileLines)
    texts: Texts = field(default_factory=Texts)
    #: The client's other Python files (they never name the host): only searched, not parsed.
    unread: Texts = field(default_factory=Texts)
    index: ClientIndex | None = None
    uses_key: str | None = None
    #: Which files were read and why (:mod:`driftcheck.client.discovery`).
    discovered: Discovered = field(default_factory=Discovered)
    #: Files whose text on disk is not the analysed text (notebooks: their JSON; a file that
    #: starts with a UTF-8 BOM: the BOM and its text).
    raw: dict[str, str] = field(default_factory=dict)
    #: How many files were read (those that do not name the host included).
    files_read: int = 0

    mixed: dict[str, set[str]] | None = None
    own_names: set[str] | None = None

    def mixed_methods(self) -> dict[str, set[str]]:
        """Host class -> methods that client classes mixed into it define."""
        if self.mixed is not None:
            return self.mixed
        out: dict[str, set[str]] = {}
        for cls in self.index.classes.values() if self.index else []:
            for host_cls in cls.extra_bases:
                out.setdefault(host_cls, set()).update(cls.methods)
        return out

    def names(self) -> set[str]:
        """Dotted names of the client's modules and classes."""
        if self.own_names is not None:
            return self.own_names
        if self.index is None:
            return set()
        return set(self.index.modules) | set(self.index.classes)

    def key_texts(self) -> dict[str, Kept]:
        """What the analysis depends on: every file read (as kept), and each file's module
        name."""
        names = "\n".join(f"{r}={m}" for r, m in sorted(self.discovered.modules.items()))
        kept = {rel: self.unread.kept(rel) for rel in self.unread}
        kept.update((rel, self.texts.kept(rel)) for rel in self.texts)
        kept["\0modules"] = names
        return kept

    def summary(self) -> dict:
        """The files read and the roots they came from (reports list them)."""
        d = self.discovered
        return {"files": self.files_read, "source": d.source, "roots": d.roots}


def load_client(
    spec: PackageSpec,
    roots: set[str] | None = None,
    *,
    quiet: bool = True,
    exclude: tuple[str, ...] | list[str] = (),
    include: tuple[str, ...] | list[str] = (),
) -> Client:
    """Open the client's tree and read the files its packaging says it has (with its
    scripts and notebooks: :func:`driftcheck.client.discovery.discover`).

    A file that never mentions a host top-level package cannot reach the host directly; it
    is not parsed. Files matching an ``exclude`` glob are not read at all; ``include`` globs
    add files.
    """
    tree = open_tree(spec, quiet=quiet)
    if isinstance(tree, DirectoryTree) and tree.only is None and tree.root != tree.meta_root:
        tree.root = tree.meta_root  # a src/ layout: paths from the project's top, scripts too
        tree.__dict__.pop("_files_cache", None)
    found = discover(tree, include, exclude)
    tree.module_names = found.modules
    if tree.metadata is None and found.metadata is not None:
        tree._metadata = found.metadata
    md = tree.metadata
    name = md.name if md and md.name else (spec.name or _name_of(tree, found))
    version = md.version if md and md.version else (spec.version or "")
    client = Client(tree=tree, name=name, version=version, discovered=found)
    client.skipped.extend(tree.skipped)
    if not found.modules:
        raise SourceError(f"{tree.label}: no Python files or notebooks found")
    for rel in found.modules:
        try:
            data = tree.read_bytes(rel)
            code = decode_text(data)
            if rel.endswith(".ipynb"):
                raw, code = code, notebooks.to_python(code)
                client.raw[rel] = raw
        except SourceError as exc:
            client.skipped.append((rel, str(exc)))
            continue
        client.files_read += 1
        if rel.endswith(".ipynb") and roots and not _mentions(code, roots):
            del client.raw[rel]  # a notebook that never names the host: nothing to analyse
            continue
        if roots and not _mentions(code, roots):
            client.unread[rel] = code
            continue
        client.texts[rel] = code
        client.lines.add(rel, client.texts.kept(rel))
        if data.startswith(BOM_UTF8) and rel not in client.raw:
            client.raw[rel] = BOM + code  # written back with its BOM (fixes.notebook_fix.on_disk)
    return client


def parse_client(client: Client, then: Callable[[ModuleInfo], None] | None = None) -> None:
    """Parse the client's files that name the host (syntax errors become skipped entries),
    handing each parsed module to ``then`` before the next file is parsed."""
    for rel in list(client.texts):
        try:  # parsed as kept: a text kept as UTF-8 is not decoded to be parsed
            info = parse_module(client.tree.module_name(rel), rel, client.texts.kept(rel))
        except SyntaxError as exc:
            where = f" at line {exc.lineno}" if exc.lineno else ""
            cell = notebooks.cell_of(client.texts[rel].splitlines(), exc.lineno or 0)
            if rel.endswith(".ipynb") and cell is not None:
                where = f" in cell {cell[0]}, line {cell[1]}"
            client.skipped.append((rel, f"syntax error{where}: {exc.msg}"))
            del client.texts[rel]
            continue
        except (RecursionError, ValueError, MemoryError) as exc:
            client.skipped.append((rel, f"cannot parse: {type(exc).__name__}"))
            del client.texts[rel]
            continue
        client.modules[info.name] = info
        if then is not None:
            then(info)


def _mentions(code: str, roots: set[str]) -> bool:
    # ``in`` first: a regex that starts with ``\b`` cannot use the engine's fast literal search.
    return any(r in code and re.search(rf"\b{re.escape(r)}\b", code) for r in roots)


def _name_of(tree: SourceTree, found: Discovered) -> str:
    """A name for a client without metadata: its first package, or, for a folder of scripts
    and notebooks only, the folder's own name."""
    packaged = any(r.get("kind") in ("packages", "modules") for r in found.roots)
    if isinstance(tree, DirectoryTree) and found.roots and not packaged:
        return tree.meta_root.resolve().name or guess_name(tree)
    return guess_name(tree)
