"""The package's shape is a contract: the public API, one registry of ids that the docs list,
the packages the wheel carries, and no import circles between modules (the checks' own
declarations are held in ``test_check_declarations.py``)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import driftcheck
from driftcheck.compat import tomllib
from driftcheck.registry import CHECKS, KINDS

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "driftcheck"
README = (ROOT / "README.md").read_text()


def test_public_api():
    assert set(driftcheck.__all__) >= {"scan", "fix", "timeline", "probe", "load_rules"}
    for name in driftcheck.__all__:
        assert getattr(driftcheck, name) is not None, name
    for name in ("scan", "fix", "timeline", "probe", "load_rules"):
        assert callable(getattr(driftcheck, name))
        assert (getattr(driftcheck, name).__doc__ or "").strip(), f"{name} has no docstring"
        assert f"driftcheck.{name}(" in README, f"the README does not show driftcheck.{name}()"


def test_readme_lists_every_check_and_kind():
    """The README's check table is the registry's, which is derived from the checks' own
    declarations (:mod:`driftcheck.checks.catalog`)."""
    table = dict(re.findall(r"^\| `([\w-]+)` \| `([\w-]+)` \| \w+ \|$", README, flags=re.M))
    assert table == {c.id: c.kind for c in CHECKS.values()}
    severities = dict(re.findall(r"^\| `([\w-]+)` \| `[\w-]+` \| (\w+) \|$", README, flags=re.M))
    assert severities == {c.id: c.severity for c in CHECKS.values()}
    kinds_line = README.split("The kinds: ", 1)[1].split(". The other ids", 1)[0]
    assert re.findall(r"`([\w-]+)`", kinds_line) == list(KINDS)
    assert all(c.kind in KINDS for c in CHECKS.values())


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
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
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
