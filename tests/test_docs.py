"""The README is the front door and docs/ the manual: the README's set-up commands are what CI
runs, its links resolve, the site builds strictly, and the pages made from the checks and the
rule files (docs/hooks.py) cover every one of them."""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from conftest import need_module

from driftcheck.compat import tomllib
from driftcheck.registry import CHECK_IDS, KINDS

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text()


def _hooks() -> ModuleType:
    """docs/hooks.py, the generator mkdocs runs (loaded by path: docs/ is no package)."""
    spec = importlib.util.spec_from_file_location("driftcheck_docs_hooks", DOCS / "hooks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    return _hooks().pages()


# -- the README ------------------------------------------------------------------------------------


def test_readme_is_a_front_door():
    assert len(README.splitlines()) <= 220, "the reference belongs in docs/, not the README"


def test_readme_set_up_commands_are_what_ci_runs():
    scan = "python -m pip install -e . && driftcheck scan speculators==0.3.0 --against vllm==0.16.0"
    # the matrix page's browser test needs Debian's chromium; both install it when missing
    chromium = "[ -x /usr/bin/chromium ] || { apt-get update && apt-get install -y chromium; }"
    tests = "python -m pip install -e '.[test,ray]' && python -m pytest"
    assert f"```bash\n{scan}\n```" in README
    assert f"```bash\n{chromium}\n{tests}\n```" in README
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python -m pip install -e '.[test,ray]'\n" in ci and "python -m pytest" in ci
    assert f"\n{chromium}\npython -m pip install -e '.[test,ray]'\n" in ci
    assert "mkdocs build --strict" in ci
    wheels = (ROOT / ".ci" / "wheels.py").read_text()
    main = re.search(r"^MAIN = (\[.*\])$", wheels, re.M)
    assert main and f"driftcheck {' '.join(ast.literal_eval(main.group(1)))}" in scan
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert any(dep.startswith("mkdocs") for dep in extras["optional-dependencies"]["test"])


def test_readme_links_resolve():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    local = [link for link in links if "://" not in link]
    assert local, "the README links to no page of the manual"
    for link in local:
        assert (ROOT / link).is_file(), f"README links to {link}, which is not a file"


def test_readme_and_docs_show_the_same_ci_job():
    def job(text: str) -> str:
        return text.split("```yaml\n", 1)[1].split("```", 1)[0]

    assert job(README) == job((DOCS / "ci.md").read_text())


# -- the manual ------------------------------------------------------------------------------------


def test_library_page_shows_the_public_api():
    import driftcheck

    page = (DOCS / "library.md").read_text()
    for name in ("scan", "fix", "timeline", "probe", "load_rules"):
        assert name in driftcheck.__all__
        assert f"driftcheck.{name}(" in page, f"docs/library.md does not show driftcheck.{name}()"


def test_every_written_page_is_in_the_nav():
    yaml = need_module("yaml")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["strict"] is True

    def targets(nav: list) -> set[str]:
        out: set[str] = set()
        for entry in nav:
            value = next(iter(entry.values())) if isinstance(entry, dict) else entry
            out |= targets(value) if isinstance(value, list) else {value}
        return out

    written = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert written <= targets(config["nav"])


def test_check_pages_come_from_the_registry(pages: dict[str, str]):
    index = pages["checks/index.md"]
    rows = re.findall(r"^\| \[`([\w-]+)`\]\(\1\.md\) \| `([\w-]+)` \| (\w+) \|", index, re.M)
    assert {i: (k, s) for i, k, s in rows} == {
        c.id: (c.kind, c.severity) for c in CHECK_IDS.values()
    }
    assert re.findall(r"^\| `([\w-]+)` \| [^`|]", index, re.M) == list(KINDS)
    for check in CHECK_IDS.values():
        page = pages[f"checks/{check.id}.md"]
        doc = sys.modules[check.module].__doc__ or ""
        assert doc.strip().splitlines()[0].split("``")[0] in page, check.id
        assert f"fixes: {', '.join(check.fixes) or 'none'}" in page, check.id
        assert "## Cases" in page and f"### {check.id}-" in page, check.id


def test_rule_pages_come_from_the_rule_files(pages: dict[str, str]):
    files = sorted((ROOT / "rules").glob("*/*.toml"))
    assert files
    for path in files:
        page = pages[f"rules/{path.parent.name}/{path.stem}.md"]
        data = tomllib.loads(path.read_text())
        assert f"({path.parent.name}/{path.stem}.md)" in pages["rules/index.md"]
        for ref in data["references"]:
            assert ref in page
        for case in data["cases"]:
            assert case["code"].strip() in page
            if case.get("fixed"):
                assert case["fixed"].strip() in page


def test_home_page_is_the_readme(pages: dict[str, str]):
    assert pages["index.md"].splitlines()[0] == README.splitlines()[0]
    assert "](docs/" not in pages["index.md"]


def test_docs_build_strictly(tmp_path: Path):
    need_module("mkdocs")
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (site / "checks" / "missing-symbol" / "index.html").is_file()
    assert (site / "rules" / "vllm" / "prefix-caching-default" / "index.html").is_file()
