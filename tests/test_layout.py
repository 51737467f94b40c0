"""The package's shape is a contract: the public API, one registry of ids that the docs list,
the packages the wheel carries, and no import circles between modules (the checks' own
declarations are held in ``test_check_declarations.py``)."""

from __future__ import annotations

import ast
from pathlib import Path

import driftcheck
from driftcheck.compat import tomllib
from driftcheck.registry import CHECK_IDS, KINDS

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "driftcheck"


def test_public_api():
    assert set(driftcheck.__all__) >= {"scan", "fix", "timeline", "probe", "load_rules"}
    for name in driftcheck.__all__:
        assert getattr(driftcheck, name) is not None, name
    for name in ("scan", "fix", "timeline", "probe", "load_rules"):
        assert callable(getattr(driftcheck, name))
        assert (getattr(driftcheck, name).__doc__ or "").strip(), f"{name} has no docstring"


def test_every_check_has_a_known_kind():
    # The docs' table of checks and kinds is made from the registry (tests/test_docs.py).
    assert all(c.kind in KINDS for c in CHECK_IDS.values())


def test_the_wheel_lists_every_package():
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in PACKAGE.rglob("__init__.py")} | {
        "driftcheck.rules.builtin"
    }
    assert listed == found
    for folder in PACKAGE.rglob("*"):
        if folder.is_dir() and folder.name != "__pycache__" and any(folder.glob("*.py")):
            assert (folder / "__init__.py").is_file(), f"{folder} is not a package"


def _imports() -> dict[str, set[str]]:
    """Module -> the driftcheck modules it imports (anywhere in its body)."""
    modules = {
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
        for p in PACKAGE.rglob("*.py")
    }
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps = set()
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the module's own package, up level - 1
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" for a in node.names] + [base]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name and not name.startswith(target + "."):
                    deps.add(target)
        graph[name] = deps
    return graph


def test_no_import_circles():
    graph = _imports()
    # A package's face (its __init__) may re-export its own modules; a circle through it is
    # not a circle of the code.
    faces = {m for m in graph if (PACKAGE.parent / m.replace(".", "/") / "__init__.py").is_file()}
    cycles = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph[node]):
            if dep in faces and dep != "driftcheck.cli":
                continue
            if state.get(dep) == 1:
                cycles.append(stack[stack.index(dep) :] + [dep])
            elif dep not in state:
                visit(dep)
        stack.pop()
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    assert not cycles, cycles


#: The stages, in the order data flows (docs/architecture.md): a module may import its own
#: stage and the ones before it, never a later one. A module belongs to the stage of the longest
#: prefix listed. The outputs are ordered among themselves too (a witness is below the fixes
#: that prove with it, the reports that render a fix, the probe that applies one, the CLI).
STAGES: list[tuple[str, tuple[str, ...]]] = [
    # The shared leaves every stage uses.
    ("base", ("errors", "compat", "cache", "kinds", "findings", "gates", "patch_folder")),
    ("sources", ("sources", "config")),
    ("host", ("host", "http", "envs", "models")),
    ("client", ("client",)),
    ("rules", ("rules",)),
    # The registry is derived from the checks' declarations.
    ("checks", ("checks", "registry")),
    ("findings", ("collect", "pipeline", "result", "timelines", "workspace", "accepted")),
    ("outputs", ("witness", "fixes", "report", "matrix", "probes", "cli", "")),
]


def _rank(module: str) -> tuple[int, int]:
    """(stage, place among the outputs) of a module: the longest listed prefix decides."""
    best: tuple[int, tuple[int, int]] = (-1, (-1, -1))
    for stage, (_name, prefixes) in enumerate(STAGES):
        for place, prefix in enumerate(prefixes):
            full = f"driftcheck.{prefix}" if prefix else "driftcheck"
            if (module == full or module.startswith(full + ".")) and len(full) > best[0]:
                best = (len(full), (stage, place if _name == "outputs" else 0))
    assert best[0] >= 0, f"{module} belongs to no stage: add it to STAGES"
    return best[1]


def test_every_module_has_a_stage():
    for module in _imports():
        _rank(module)


def test_no_import_runs_against_the_stages():
    against = sorted(
        f"{module} ({STAGES[_rank(module)[0]][0]}) imports {dep} ({STAGES[_rank(dep)[0]][0]})"
        for module, deps in _imports().items()
        for dep in deps
        if _rank(dep) > _rank(module)
    )
    assert not against, "\n".join(against)


def test_tests_mirror_the_packages():
    """Each folder of tests is named after the package or module it tests (``real`` holds the
    replays on real packages and their reviewed verdicts); the package-wide tests stay at the top."""
    tests = Path(__file__).resolve().parent
    package = tests.parent / "driftcheck"
    data = {"snapshots", "real", "__pycache__"}
    for folder in sorted(p for p in tests.iterdir() if p.is_dir() and p.name not in data):
        if not any(folder.glob("test_*.py")):
            continue
        assert (package / folder.name).is_dir() or (package / f"{folder.name}.py").is_file(), (
            f"tests/{folder.name}/ names no package or module of driftcheck"
        )
    top = sorted(p.name for p in tests.glob("test_*.py"))
    assert top == ["test_docs.py", "test_layout.py", "test_wheel.py"], top
