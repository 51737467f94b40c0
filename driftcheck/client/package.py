"""The client package: its tree, identity, and the Python files that name the host, parsed."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from driftcheck.client.index import ClientIndex, ModuleInfo, parse_module
from driftcheck.config import is_excluded
from driftcheck.errors import SourceError
from driftcheck.sources.specs import PackageSpec
from driftcheck.sources.trees import SourceTree, guess_name, open_tree


@dataclass
class Client:
    """The client package: its tree, identity, parsed modules and uses."""

    tree: SourceTree
    name: str
    version: str
    modules: dict[str, ModuleInfo] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    lines: dict[str, list[str]] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    #: The client's other Python files (they never name the host): only searched, not parsed.
    unread: dict[str, str] = field(default_factory=dict)
    index: ClientIndex | None = None
    uses_key: str | None = None

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


def load_client(
    spec: PackageSpec,
    roots: set[str] | None = None,
    *,
    quiet: bool = True,
    exclude: tuple[str, ...] | list[str] = (),
) -> Client:
    """Open the client's tree and parse the Python files of its packages that name the host.

    A file that never mentions a host top-level package cannot reach the host directly; it
    is not parsed. Files matching an ``exclude``
    glob are not read at all.
    """
    tree = open_tree(spec, quiet=quiet)
    md = tree.metadata
    name = md.name if md and md.name else (spec.name or guess_name(tree))
    version = md.version if md and md.version else (spec.version or "")
    client = Client(tree=tree, name=name, version=version)
    client.skipped.extend(tree.skipped)
    packages = set(tree.top_level_packages())
    files = [f for f in tree.python_files() if f.split("/", 1)[0].removesuffix(".py") in packages]
    files = [f for f in files if not is_excluded(f, exclude)]
    if not files:
        raise SourceError(f"{tree.label}: no Python files found")
    for rel in files:
        try:
            code = tree.read_text(rel)
        except SourceError as exc:
            client.skipped.append((rel, str(exc)))
            continue
        if roots and not _mentions(code, roots):
            client.unread[rel] = code
            continue
        client.lines[rel] = code.splitlines()
        client.texts[rel] = code
    return client


def parse_client(client: Client) -> None:
    """Parse the client's files that name the host (syntax errors become skipped entries)."""
    for rel, code in list(client.texts.items()):
        try:
            info = parse_module(client.tree.module_name(rel), rel, code)
        except SyntaxError as exc:
            where = f" at line {exc.lineno}" if exc.lineno else ""
            client.skipped.append((rel, f"syntax error{where}: {exc.msg}"))
            del client.texts[rel]
            continue
        except (RecursionError, ValueError, MemoryError) as exc:
            client.skipped.append((rel, f"cannot parse: {type(exc).__name__}"))
            del client.texts[rel]
            continue
        client.modules[info.name] = info


def _mentions(code: str, roots: set[str]) -> bool:
    # ``in`` first: a regex that starts with ``\b`` cannot use the engine's fast literal search.
    return any(r in code and re.search(rf"\b{re.escape(r)}\b", code) for r in roots)
