"""What a project's packaging says about where its importable code lies, read without running it.

Readers for ``pyproject.toml`` (setuptools, hatch, pdm, poetry, flit), ``setup.cfg`` and
``setup.py`` (read with :mod:`ast`; never executed). Each turns its configuration into
:class:`ImportRoot` entries: a folder that is put on ``sys.path`` and the packages or modules
the distribution installs from it. Anything a reader cannot decide (a computed value) is left
out, and discovery falls back to the layout.
"""

from __future__ import annotations

import ast
import configparser
from dataclasses import dataclass, field, replace

from driftcheck.compat import tomllib
from driftcheck.sources.metadata import DistMetadata


@dataclass(frozen=True)
class ImportRoot:
    """A folder on ``sys.path`` (``""``: the project's top) and what is installed from it.

    Attributes:
        folder: The folder, relative to the project, POSIX.
        packages: Dotted packages installed from it (each with its sub-packages unless
            ``exact``); ``None``: every package found there (``find_packages``).
        modules: Single-file modules (``py-modules``), by dotted name.
        include: ``find`` include patterns (dotted, fnmatch); empty: all.
        exclude: ``find`` exclude patterns.
        namespaces: ``find`` also takes folders without ``__init__.py`` (PEP 420).
        exact: only the files directly in each of ``packages`` (no reader sets it now: see
            ``_mapped``).
    """

    folder: str
    packages: tuple[str, ...] | None = None
    modules: tuple[str, ...] = ()
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    namespaces: bool = False
    exact: bool = False


@dataclass
class Packaging:
    """The import roots a project declares, and which file declared them."""

    roots: list[ImportRoot] = field(default_factory=list)
    source: str = ""
    #: Dependencies read from setup.cfg / setup.py / poetry (where ``[project]`` is absent).
    metadata: DistMetadata | None = None


def _norm(name: str) -> str:
    return name.replace("-", "_").replace(".", "_").lower()


def _strs(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list):
        return tuple(v for v in value if isinstance(v, str))
    return ()


def read_pyproject(text: str) -> Packaging:
    """The import roots ``pyproject.toml`` declares (empty: it declares none)."""
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError):
        return Packaging()
    tool = data.get("tool", {}) if isinstance(data.get("tool"), dict) else {}
    project = data.get("project", {}) if isinstance(data.get("project"), dict) else {}
    backend = str(data.get("build-system", {}).get("build-backend", ""))
    name = project.get("name") if isinstance(project.get("name"), str) else None
    for reader in (_setuptools, _hatch, _pdm, _poetry, _flit):
        found = reader(tool, backend, name)
        if found is not None and found.roots:
            return found
    return Packaging()


def _setuptools(tool: dict, _backend: str, _name: str | None) -> Packaging | None:
    st = tool.get("setuptools")
    if not isinstance(st, dict):
        return None
    given_dir = st.get("package-dir")
    package_dir = given_dir if isinstance(given_dir, dict) else {}
    base = str(package_dir.get("", "")).strip("/").removeprefix("./")
    modules = _strs(st.get("py-modules"))
    packages = st.get("packages")
    where = "[tool.setuptools]"
    if isinstance(packages, dict) and isinstance(packages.get("find"), dict):
        find = packages["find"]
        folders = _strs(find.get("where")) or (base or ".",)
        roots = [
            ImportRoot(
                folder=f.strip("/").removeprefix("./").lstrip("."),
                include=_strs(find.get("include")),
                exclude=_strs(find.get("exclude")),
                namespaces=bool(find.get("namespaces", True)),
            )
            for f in folders
        ]
        if modules:
            roots.append(ImportRoot(folder=base, packages=(), modules=modules))
        return Packaging(roots, "pyproject.toml [tool.setuptools.packages.find]")
    listed = _strs(packages)
    if listed or modules:
        return Packaging(
            _mapped(listed, modules, {str(k): str(v) for k, v in package_dir.items()}), where
        )
    return None


def _mapped(packages: tuple[str, ...], modules: tuple[str, ...], dirs: dict) -> list[ImportRoot]:
    """Listed packages placed by a ``package_dir`` mapping (``{"": "src", "pkg": "lib/pkg"}``).

    A listed package is read with its sub-folders: setuptools ships them too where an SCM file
    finder and ``include-package-data`` (the default with ``pyproject.toml``) take every tracked
    file under the package (outlines 0.0.46 lists only ``outlines``, and its wheel has them all).
    """
    base = dirs.get("", "").strip("/").removeprefix("./")
    roots: list[ImportRoot] = []
    plain = []
    for pkg in packages:
        top = pkg.split(".", 1)[0]
        if top in dirs and top != "":
            folder = dirs[top].strip("/").rpartition("/")[0]
            roots.append(ImportRoot(folder=folder, packages=(pkg,)))
        else:
            plain.append(pkg)
    if plain or modules:
        roots.append(ImportRoot(folder=base, packages=tuple(plain), modules=modules))
    return roots


def _split_path(path: str) -> tuple[str, str]:
    """``src/pkg`` → (``src``, ``pkg``); ``mod.py`` → (``""``, ``mod.py``)."""
    folder, _, leaf = path.strip("/").removeprefix("./").rpartition("/")
    return folder, leaf


def _paths_to_roots(paths: tuple[str, ...]) -> list[ImportRoot]:
    by_folder: dict[str, tuple[list[str], list[str]]] = {}
    for path in paths:
        folder, leaf = _split_path(path)
        pkgs, mods = by_folder.setdefault(folder, ([], []))
        (mods if leaf.endswith(".py") else pkgs).append(leaf.removesuffix(".py"))
    return [
        ImportRoot(folder=f, packages=tuple(p), modules=tuple(m)) for f, (p, m) in by_folder.items()
    ]


def _hatch(tool: dict, backend: str, name: str | None) -> Packaging | None:
    wheel = tool.get("hatch", {}).get("build", {}).get("targets", {}).get("wheel", {})
    paths = _strs(wheel.get("packages")) if isinstance(wheel, dict) else ()
    if paths:
        return Packaging(_paths_to_roots(paths), "pyproject.toml [tool.hatch.build.targets.wheel]")
    if "hatchling" in backend and name:
        return _by_name(name, "hatch (project name)")
    return None


def _pdm(tool: dict, backend: str, name: str | None) -> Packaging | None:
    build = tool.get("pdm", {}).get("build", {})
    if not isinstance(build, dict):
        return None
    folder = str(build.get("package-dir", "")).strip("/")
    paths = _strs(build.get("includes"))
    if paths:
        roots = [replace(r, folder=r.folder or folder) for r in _paths_to_roots(paths)]
        return Packaging(roots, "pyproject.toml [tool.pdm.build]")
    if folder:
        return Packaging([ImportRoot(folder=folder)], "pyproject.toml [tool.pdm.build]")
    return None


def _poetry(tool: dict, _backend: str, _name: str | None) -> Packaging | None:
    poetry = tool.get("poetry")
    if not isinstance(poetry, dict):
        return None
    roots: list[ImportRoot] = []
    for entry in poetry.get("packages", []) if isinstance(poetry.get("packages"), list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("include"), str):
            folder = str(entry.get("from", "")).strip("/")
            leaf = entry["include"].strip("/")
            inner, _, leaf = leaf.rpartition("/")
            folder = "/".join(p for p in (folder, inner) if p)
            if leaf.endswith(".py"):
                roots.append(ImportRoot(folder=folder, packages=(), modules=(leaf[:-3],)))
            else:
                roots.append(ImportRoot(folder=folder, packages=(leaf,)))
    md = _poetry_metadata(poetry)
    if roots:
        return Packaging(roots, "pyproject.toml [tool.poetry] packages", md)
    if isinstance(poetry.get("name"), str):
        found = _by_name(poetry["name"], "poetry (project name)")
        found.metadata = md
        return found
    return None


def _poetry_metadata(poetry: dict) -> DistMetadata | None:
    deps = poetry.get("dependencies")
    if not isinstance(poetry.get("name"), str) or not isinstance(deps, dict):
        return None
    requires = []
    for dep, spec in deps.items():
        version = spec.get("version") if isinstance(spec, dict) else spec
        if dep != "python" and isinstance(version, str):
            exact = version.strip()
            op = "" if exact[:1] in "<>=!~^*" else "=="
            requires.append(f"{dep}{op}{exact}" if exact not in ("*", "") else dep)
    return DistMetadata(
        name=poetry["name"], version=str(poetry.get("version", "")), requires=requires
    )


def _flit(tool: dict, backend: str, name: str | None) -> Packaging | None:
    module = tool.get("flit", {}).get("module", {})
    mod = module.get("name") if isinstance(module, dict) else None
    if isinstance(mod, str):
        return _by_name(mod, "pyproject.toml [tool.flit.module]", raw=True)
    if "flit" in backend and name:
        return _by_name(name, "flit (project name)")
    return None


def _by_name(name: str, source: str, *, raw: bool = False) -> Packaging:
    """A backend that installs the package named like the project, at the top or in src/."""
    dotted = name if raw else _norm(name)
    return Packaging(
        [
            ImportRoot(folder="", packages=(dotted,), modules=(dotted,)),
            ImportRoot(folder="src", packages=(dotted,), modules=(dotted,)),
        ],
        source,
    )


def read_setup_cfg(text: str) -> Packaging:
    """``[options] packages = find: | find_namespace: | list``, ``package_dir``,
    ``[options.packages.find]`` and ``py_modules``; ``install_requires`` as metadata."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return Packaging()
    if not parser.has_section("options"):
        return Packaging()
    opts = parser["options"]
    dirs = _cfg_dict(opts.get("package_dir", ""))
    modules = tuple(_cfg_list(opts.get("py_modules", "")))
    packages = opts.get("packages", "").strip()
    md = None
    if parser.has_option("metadata", "name"):
        md = DistMetadata(
            name=parser["metadata"]["name"],
            version=parser["metadata"].get("version", ""),
            requires=_cfg_list(opts.get("install_requires", "")),
        )
    if packages in ("find:", "find_namespace:"):
        find = (
            parser["options.packages.find"] if parser.has_section("options.packages.find") else {}
        )
        where = str(find.get("where", "") or dirs.get("", "")).strip().strip("/")
        roots = [
            ImportRoot(
                folder=where,
                include=tuple(_cfg_list(find.get("include", ""))),
                exclude=tuple(_cfg_list(find.get("exclude", ""))),
                namespaces=packages == "find_namespace:",
            )
        ]
        if modules:
            roots.append(ImportRoot(folder=dirs.get("", ""), packages=(), modules=modules))
        return Packaging(roots, "setup.cfg [options] packages", md)
    listed = tuple(_cfg_list(packages))
    if listed or modules:
        return Packaging(_mapped(listed, modules, dirs), "setup.cfg [options] packages", md)
    return Packaging(metadata=md)


def _cfg_list(value: str) -> list[str]:
    return [v.strip() for v in value.replace(",", "\n").splitlines() if v.strip()]


def _cfg_dict(value: str) -> dict[str, str]:
    out = {}
    for line in _cfg_list(value):
        key, _, folder = line.partition("=")
        out[key.strip()] = folder.strip()
    return out


def read_setup_py(text: str) -> Packaging:
    """The ``setup(...)`` call's ``packages``, ``package_dir``, ``py_modules`` and
    ``install_requires`` when they are literals or ``find_packages(...)`` calls."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return Packaging()
    call = next(
        (
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.Call) and _callee(n.func) == "setup" and n.keywords
        ),
        None,
    )
    if call is None:
        return Packaging()
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    dirs = _literal(kw.get("package_dir"))
    dirs = {str(k): str(v) for k, v in dirs.items()} if isinstance(dirs, dict) else {}
    modules = _literal_strs(kw.get("py_modules"))
    md = None
    name = _literal(kw.get("name"))
    if isinstance(name, str):
        version = _literal(kw.get("version"))
        md = DistMetadata(
            name=name,
            version=version if isinstance(version, str) else "",
            requires=list(_literal_strs(kw.get("install_requires"))),
        )
    packages = kw.get("packages")
    if isinstance(packages, ast.Call) and _callee(packages.func) in (
        "find_packages",
        "find_namespace_packages",
    ):
        args = {k.arg: k.value for k in packages.keywords if k.arg}
        where = _literal(packages.args[0]) if packages.args else _literal(args.get("where"))
        exclude = _literal_strs(packages.args[1] if len(packages.args) > 1 else args.get("exclude"))
        folder = where if isinstance(where, str) else dirs.get("", "")
        roots = [
            ImportRoot(
                folder=folder.strip("/").removeprefix("./").lstrip("."),
                include=_literal_strs(args.get("include")),
                exclude=exclude,
                namespaces=_callee(packages.func) == "find_namespace_packages",
            )
        ]
        if modules:
            roots.append(ImportRoot(folder=dirs.get("", ""), packages=(), modules=modules))
        return Packaging(roots, "setup.py setup(packages=find_packages(...))", md)
    listed = _literal_strs(packages)
    if listed or modules:
        return Packaging(_mapped(listed, modules, dirs), "setup.py setup(packages=...)", md)
    return Packaging(metadata=md)


def _callee(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _literal(node: ast.expr | None) -> object:
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return None


def _literal_strs(node: ast.expr | None) -> tuple[str, ...]:
    value = _literal(node)
    if isinstance(value, (list, tuple)):
        return tuple(v for v in value if isinstance(v, str))
    return ()
