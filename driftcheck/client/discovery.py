"""Which of a client's files are read, and the module name each has, as its packaging says.

A release's wheel or an installed distribution: what it installs (its top-level packages). A
project (a directory or an sdist): the packages its ``pyproject.toml`` / ``setup.cfg`` /
``setup.py`` declare (:mod:`driftcheck.client.packaging`), or, where they declare none, its
layout (``src/``, top-level packages, PEP 420 namespace packages); plus its loose scripts
(``scripts/``, ``examples/``, top-level ``*.py``) and notebooks (``*.ipynb``). A script is a
top-level module of its own, named as Python names it when run (its file's stem; where two
scripts share a stem, the later ones by their path, ``examples.a.main``). ``include`` globs add
files, ``exclude`` globs remove them (:func:`driftcheck.config.is_excluded` matching).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath

from driftcheck.client.packaging import (
    ImportRoot,
    Packaging,
    read_pyproject,
    read_setup_cfg,
    read_setup_py,
)
from driftcheck.config import is_excluded
from driftcheck.sources.metadata import DistMetadata
from driftcheck.sources.trees import SKIP_DIRS, DirectoryTree, SourceTree, TarTree

SCRIPT_DIRS = ("scripts", "examples")
#: Top-level folders that hold no package of the project when its packaging does not say.
NOT_PACKAGES = {"tests", "test", "docs", "doc", "benchmarks", "notebooks", "configs", *SCRIPT_DIRS}
PACKAGING_FILES = ("pyproject.toml", "setup.cfg", "setup.py")
SUFFIXES = (".py", ".ipynb")


@dataclass
class Discovered:
    """The files a scan reads and their module names, and where they came from."""

    #: Relative path → dotted module name.
    modules: dict[str, str] = field(default_factory=dict)
    #: Where the files came from: {"folder", "kind" (packages | modules | scripts | notebooks |
    #: installed | include), "names", "files"}.
    roots: list[dict] = field(default_factory=list)
    #: The packaging file that decided the packages ("layout": none did).
    source: str = "layout"
    #: Dependencies from setup.cfg / setup.py / poetry, for trees without other metadata.
    metadata: DistMetadata | None = None
    #: The packaging files' texts (a fixed copy of the client is scanned with them).
    packaging: dict[str, str] = field(default_factory=dict)
    #: Relative path → the entry of ``roots`` it came from.
    owner: dict[str, dict] = field(default_factory=dict, repr=False)

    def add(self, got: dict[str, str], root: dict) -> None:
        """Files found under one root."""
        self.modules.update(got)
        self.owner.update(dict.fromkeys(got, root))
        self.roots.append(root)


def discover(
    tree: SourceTree,
    include: tuple[str, ...] | list[str] = (),
    exclude: tuple[str, ...] | list[str] = (),
) -> Discovered:
    """The files of ``tree`` a scan reads (see the module's docstring)."""
    files = sorted(tree._file_set())
    found = Discovered()
    if _installed(tree, files):
        _installed_files(tree, files, found)
    else:
        _project_files(tree, files, found)
    if include:
        _included(files, include, found)
    if exclude:
        kept = {r: m for r, m in found.modules.items() if not is_excluded(r, exclude)}
        gone = [r for r in found.modules if r not in kept]
        found.modules = kept
        for root in found.roots:
            root["files"] -= sum(1 for r in gone if found.owner.get(r) is root)
        found.roots = [r for r in found.roots if r["files"] > 0]
    return found


def _installed(tree: SourceTree, files: list[str]) -> bool:
    if isinstance(tree, DirectoryTree) and tree.only:
        return True
    if isinstance(tree, (DirectoryTree, TarTree)):
        return any(f.count("/") == 1 and ".dist-info/" in f for f in files)
    return True


def _installed_files(tree: SourceTree, files: list[str], found: Discovered) -> None:
    """What a wheel installs: its top-level packages, or every module outside its metadata."""
    listed = any(f.endswith(".dist-info/top_level.txt") and f.count("/") == 1 for f in files)
    tops = set(tree.top_level_packages()) if listed else None
    for rel in files:
        head = rel.split("/", 1)[0]
        if not rel.endswith(".py") or head.endswith((".dist-info", ".data", ".egg-info")):
            continue
        if tops is not None and head.removesuffix(".py") not in tops:
            continue
        if rel == "setup.py" and tops is None:
            continue
        found.modules[rel] = tree.module_name(rel)
    names = sorted({r.split("/", 1)[0].removesuffix(".py") for r in found.modules})
    root = {"folder": "", "kind": "installed", "names": names, "files": len(found.modules)}
    found.roots.append(root)
    found.owner.update(dict.fromkeys(found.modules, root))
    found.source = "installed"


def _project_files(tree: SourceTree, files: list[str], found: Discovered) -> None:
    packaging = _packaging(tree, found)
    roots = packaging.roots or _layout_roots(files)
    found.source = packaging.source if packaging.roots else "layout"
    dirs = _dirs(files)
    taken: set[str] = set()
    for root in roots:
        folder = root.folder if root.folder in dirs or not root.folder else ""
        if root.folder and folder != root.folder and not isinstance(tree, TarTree):
            continue  # declared but absent (a tar tree has src/ stripped already)
        got = _root_files(files, dirs, root, folder)
        got = {r: m for r, m in got.items() if r not in found.modules}
        if not got:
            continue
        taken.update(m.split(".", 1)[0] for m in got.values())
        names = sorted({m.split(".", 1)[0] for m in got.values()})
        kind = "packages" if root.packages != () else "modules"
        found.add(got, {"folder": folder, "kind": kind, "names": names, "files": len(got)})
    _scripts(files, found, taken, fallback=not found.modules)


def _packaging(tree: SourceTree, found: Discovered) -> Packaging:
    readers = {"pyproject.toml": read_pyproject, "setup.cfg": read_setup_cfg}
    readers["setup.py"] = read_setup_py
    chosen = Packaging()
    for name in PACKAGING_FILES:
        if not tree.exists(name):
            continue
        try:
            text = tree.read_text(name)
        except Exception:  # an unreadable packaging file: the layout decides
            continue
        found.packaging[name] = text
        got = readers[name](text)
        if found.metadata is None and got.metadata is not None:
            found.metadata = got.metadata
        if got.roots and not chosen.roots:
            chosen = got
    return chosen


def _dirs(files: list[str]) -> set[str]:
    out: set[str] = set()
    for rel in files:
        parts = rel.split("/")[:-1]
        out.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    return out


def _layout_roots(files: list[str]) -> list[ImportRoot]:
    """No packaging says: ``src/`` when it holds packages, else the top-level packages
    (``__init__.py``) and namespace packages (a folder whose sub-folders are packages)."""
    for folder in ("src", ""):
        prefix = f"{folder}/" if folder else ""
        inits = [
            f[len(prefix) :] for f in files if f.startswith(prefix) and f.endswith("/__init__.py")
        ]
        regular = {p.split("/")[0] for p in inits if p.count("/") == 1}
        spaces = {p.split("/")[0] for p in inits if p.count("/") >= 2} - regular
        names = regular | {n for n in spaces if n not in NOT_PACKAGES and not n.startswith(".")}
        if names:
            return [ImportRoot(folder=folder, packages=tuple(sorted(names)))]
    return []


def _root_files(files: list[str], dirs: set[str], root: ImportRoot, folder: str) -> dict[str, str]:
    prefix = f"{folder}/" if folder else ""
    out: dict[str, str] = {}
    modules = {m.replace(".", "/") + ".py" for m in root.modules}
    packages = None if root.packages is None else {p.replace(".", "/") for p in root.packages}
    inits = {
        f[len(prefix) : -len("/__init__.py")]
        for f in files
        if f.startswith(prefix) and f.endswith("/__init__.py")
    }
    for rel in files:
        if not rel.endswith(".py") or not rel.startswith(prefix):
            continue
        inner = rel[len(prefix) :]
        if inner in modules:
            out[rel] = inner[:-3].replace("/", ".")
            continue
        pkg_dir = inner.rpartition("/")[0]
        if not pkg_dir or any(p in SKIP_DIRS or p.startswith(".") for p in pkg_dir.split("/")):
            continue
        if packages is None:
            if not _found(pkg_dir, inits, root):
                continue
        elif root.exact:
            if pkg_dir not in packages:
                continue
        elif not any(pkg_dir == p or pkg_dir.startswith(p + "/") for p in packages):
            continue
        out[rel] = _dotted(inner)
    return out


def _found(pkg_dir: str, inits: set[str], root: ImportRoot) -> bool:
    """``find_packages`` semantics: a package is a folder with ``__init__.py`` (any folder with
    ``namespaces``) under folders that are packages too, matched by include/exclude."""
    parts = pkg_dir.split("/")
    if not root.namespaces and not all(
        "/".join(parts[: i + 1]) in inits for i in range(len(parts))
    ):
        return False
    dotted = ".".join(parts)
    if root.include and not any(fnmatchcase(dotted, p) for p in root.include):
        return False
    return not any(fnmatchcase(dotted, p) for p in root.exclude)


def _dotted(inner: str) -> str:
    parts = list(PurePosixPath(inner).with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _hidden(rel: str) -> bool:
    return any(p in SKIP_DIRS or p.startswith(".") for p in rel.split("/")[:-1])


def _scripts(files: list[str], found: Discovered, taken: set[str], *, fallback: bool) -> None:
    """Loose scripts and notebooks: each a top-level module named by its stem."""
    groups: dict[str, list[str]] = {}
    for rel in files:
        if rel in found.modules or not rel.endswith(SUFFIXES) or _hidden(rel):
            continue
        head = rel.split("/", 1)[0] if "/" in rel else ""
        if rel.endswith(".ipynb"):
            groups.setdefault("\0notebooks", []).append(rel)
        elif head in SCRIPT_DIRS or (head == "" and rel != "setup.py") or fallback:
            groups.setdefault(head if not fallback or head in SCRIPT_DIRS else "", []).append(rel)
    for key in sorted(groups):
        got = {}
        for rel in groups[key]:
            name = script_name(rel, taken)
            taken.add(name)
            got[rel] = name
        kind = "notebooks" if key == "\0notebooks" else "scripts"
        folder = "" if key == "\0notebooks" else key
        found.add(got, {"folder": folder, "kind": kind, "names": [], "files": len(got)})


def script_name(rel: str, taken: set[str]) -> str:
    """A script's module name: its stem, or its dotted path where the stem is taken."""
    stem = PurePosixPath(rel).stem
    if stem.isidentifier() and stem not in taken:
        return stem
    return ".".join(PurePosixPath(rel).with_suffix("").parts)


def _included(files: list[str], include: tuple[str, ...] | list[str], found: Discovered) -> None:
    taken = {m.split(".", 1)[0] for m in found.modules.values()}
    got = {}
    for rel in files:
        if rel in found.modules or not rel.endswith(SUFFIXES) or not is_excluded(rel, include):
            continue
        got[rel] = script_name(rel, taken)
        taken.add(got[rel])
    if got:
        found.add(got, {"folder": "", "kind": "include", "names": [], "files": len(got)})


def find_members(root: Path, depth: int = 3) -> list[Path]:
    """The distributions below ``root`` (folders with a ``pyproject.toml`` naming a project,
    a ``setup.py`` or a ``setup.cfg``), not looking inside one; [] when ``root`` is itself
    one (then it is one client, not a monorepo)."""
    if _is_distribution(root):
        return []
    out: list[Path] = []

    def walk(folder: Path, level: int) -> None:
        try:
            children = sorted(p for p in folder.iterdir() if p.is_dir())
        except OSError:
            return
        for child in children:
            if child.name in SKIP_DIRS or child.name.startswith("."):
                continue
            if _is_distribution(child):
                out.append(child)
            elif level < depth:
                walk(child, level + 1)

    walk(root, 1)
    return out if len(out) >= 2 else []


def _is_distribution(folder: Path) -> bool:
    if (folder / "setup.py").is_file():
        return True
    cfg = folder / "setup.cfg"
    if cfg.is_file() and "[metadata]" in cfg.read_text(encoding="utf-8", errors="replace"):
        return True
    py = folder / "pyproject.toml"
    if not py.is_file():
        return False
    from driftcheck.compat import tomllib

    try:
        data = tomllib.loads(py.read_text(encoding="utf-8", errors="replace"))
    except (tomllib.TOMLDecodeError, ValueError):
        return False
    return "name" in data.get("project", {}) or "name" in data.get("tool", {}).get("poetry", {})
