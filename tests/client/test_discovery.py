"""Discovery: which files of a client are read, and the module name each has.

Each layout under ``fixtures/clients/layouts`` is a small project of ours, scanned against
minihost 1.0 → 2.0 (``fixtures/hosts/minihost``); ``# drift:`` marks what must be reported and
files that must not be read hold a drift that would show if they were.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
from conftest import build_wheel, run_cli

from driftcheck.client.discovery import discover, script_name
from driftcheck.client.package import load_client
from driftcheck.client.packaging import read_pyproject, read_setup_cfg, read_setup_py
from driftcheck.config import load_config
from driftcheck.pipeline import scan
from driftcheck.sources.specs import parse_spec
from driftcheck.sources.trees import open_archive

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
HOST = FIXTURES / "hosts" / "minihost"
LAYOUTS = FIXTURES / "clients" / "layouts"

#: layout → {file: module name} (every file read, nothing else)
MODULES = {
    "srclayout": {
        "src/srcpkg/__init__.py": "srcpkg",
        "src/srcpkg/core.py": "srcpkg.core",
        "src/srcpkg/sub/__init__.py": "srcpkg.sub",
        "src/srcpkg/sub/moved.py": "srcpkg.sub.moved",
        "scripts/train.py": "train",
    },
    "flat": {
        "flatpkg/__init__.py": "flatpkg",
        "flatpkg/run.py": "flatpkg.run",
        "train.py": "train",
        "scripts/prepare.py": "prepare",
        "examples/demo/main.py": "main",
        "examples/other/main.py": "examples.other.main",
    },
    "namespace": {
        "acme/plugin/__init__.py": "acme.plugin",
        "acme/plugin/hooks.py": "acme.plugin.hooks",
        "acme/tools/__init__.py": "acme.tools",
        "acme/tools/moved.py": "acme.tools.moved",
    },
    "setuppy": {"source/legacy/__init__.py": "legacy", "source/legacy/api.py": "legacy.api"},
    "setupcfg": {"lib/cfgpkg/__init__.py": "cfgpkg", "lib/cfgpkg/api.py": "cfgpkg.api"},
    "hatch": {"code/hatchpkg/__init__.py": "hatchpkg", "code/hatchpkg/api.py": "hatchpkg.api"},
    "poetry": {"lib/poetrypkg/__init__.py": "poetrypkg", "lib/poetrypkg/api.py": "poetrypkg.api"},
    "flit": {"flit_mod.py": "flit_mod"},
    "notebooks": {
        "nbpkg/__init__.py": "nbpkg",
        "nbpkg/helpers.py": "nbpkg.helpers",
        "analysis.ipynb": "analysis",
        "notes/other.ipynb": "other",
    },
}
SOURCES = {
    "srclayout": "pyproject.toml [tool.setuptools.packages.find]",
    "flat": "layout",
    "namespace": "layout",
    "setuppy": "setup.py setup(packages=find_packages(...))",
    "setupcfg": "setup.cfg [options] packages",
    "hatch": "pyproject.toml [tool.hatch.build.targets.wheel]",
    "poetry": "pyproject.toml [tool.poetry] packages",
    "flit": "pyproject.toml [tool.flit.module]",
    "notebooks": "layout",
}


def _drift_markers(root: Path, files: list[str]) -> set[tuple[str, int, str]]:
    """(file, line, kind) of every ``# drift: KIND`` in the files read (not notebooks)."""
    out = set()
    for rel in files:
        if rel.endswith(".py"):
            for n, line in enumerate((root / rel).read_text().splitlines(), 1):
                if "# drift: " in line:
                    out.add((rel, n, line.split("# drift: ")[1].strip()))
    return out


@pytest.mark.parametrize("layout", sorted(MODULES))
def test_each_layout_reads_what_its_packaging_installs_and_its_scripts(layout: str):
    client = load_client(parse_spec(str(LAYOUTS / layout)))
    assert client.discovered.modules == MODULES[layout]
    assert client.discovered.source == SOURCES[layout]
    assert client.files_read == len(MODULES[layout])


@pytest.mark.parametrize("layout", sorted(set(MODULES) - {"notebooks"}))
def test_each_layout_reports_exactly_its_marked_drift(layout: str):
    result = scan(str(LAYOUTS / layout), str(HOST / "2.0"), baseline=str(HOST / "1.0"))
    got = {(f.file, f.line, f.kind) for f in result.findings}
    assert got == _drift_markers(LAYOUTS / layout, list(MODULES[layout]))
    assert result.skipped == []


def test_pins_come_from_setup_cfg_setup_py_and_poetry_dependencies():
    for layout in ("setuppy", "setupcfg", "poetry"):
        tree = load_client(parse_spec(str(LAYOUTS / layout))).tree
        assert tree.metadata is not None and tree.metadata.pin_on("minihost") == "1.0", layout


def test_setup_py_is_read_never_run():
    text = (LAYOUTS / "setuppy" / "setup.py").read_text()
    assert "raise SystemExit" in text  # it would stop a scan that executed it
    found = read_setup_py(text)
    assert [(r.folder, r.exclude) for r in found.roots] == [("source", ("*.vendored",))]
    assert found.metadata is not None and found.metadata.name == "setuppy-client"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('setup(packages=["a", "a.b"], package_dir={"": "lib"})', [("lib", ("a", "a.b"), False)]),
        ('setup(packages=find_namespace_packages(where="src"))', [("src", None, False)]),
        ("setup(packages=PACKAGES)", []),  # computed: the layout decides
        ("import setuptools\nsetuptools.setup(py_modules=['tool'])", [("", (), False)]),
    ],
)
def test_setup_py_forms(text: str, expected: list):
    assert [(r.folder, r.packages, r.exact) for r in read_setup_py(text).roots] == expected


def test_pyproject_forms():
    st = read_pyproject('[tool.setuptools]\npackages = ["x"]\npackage-dir = {"" = "lib"}\n')
    assert [(r.folder, r.packages) for r in st.roots] == [("lib", ("x",))]
    pdm = read_pyproject('[tool.pdm.build]\npackage-dir = "src"\nincludes = ["src/pk"]\n')
    assert [(r.folder, r.packages) for r in pdm.roots] == [("src", ("pk",))]
    hatch = read_pyproject(
        '[build-system]\nbuild-backend = "hatchling.build"\n[project]\nname = "My-Tool"\n'
    )
    assert {r.folder for r in hatch.roots} == {"", "src"}
    assert {r.packages for r in hatch.roots} == {("my_tool",)}
    assert read_pyproject('[project]\nname = "plain"\n').roots == []  # setuptools auto: layout
    assert read_pyproject("not toml [").roots == []
    cfg = read_setup_cfg("[options]\npackages =\n  one\n  two\n")
    assert [r.packages for r in cfg.roots] == [("one", "two")]


def test_a_folder_of_scripts_without_init_is_read(tmp_path: Path):
    """The first thing a new user tried: a folder of example scripts, no package at all."""
    (tmp_path / "offline").mkdir()
    (tmp_path / "offline" / "run.py").write_text("from minihost.core import removed_helper\n")
    (tmp_path / "serve.py").write_text("from minihost.core import connect\nconnect('h')\n")
    result = scan(str(tmp_path), str(HOST / "2.0"), baseline=str(HOST / "1.0"))
    assert [(f.file, f.rule) for f in result.findings] == [("offline/run.py", "missing-symbol")]
    assert result.discovery["files"] == 2
    # without a package or metadata, the client is named after its folder, not a script
    assert result.client_name == tmp_path.name


def test_include_adds_and_exclude_removes(tmp_path: Path):
    root = LAYOUTS / "srclayout"
    client = load_client(parse_spec(str(root)), include=["tests/*.py"], exclude=["scripts"])
    assert "tests/test_core.py" in client.discovered.modules
    assert client.discovered.modules["tests/test_core.py"] == "test_core"
    assert "scripts/train.py" not in client.discovered.modules
    assert client.discovered.roots[-1]["kind"] == "include"


def test_include_and_exclude_in_tool_driftcheck(tmp_path: Path):
    project = tmp_path / "p"
    (project / "pkg").mkdir(parents=True)
    (project / "pkg" / "__init__.py").write_text("")
    (project / "tools").mkdir()
    (project / "tools" / "gen.py").write_text("from minihost.core import removed_helper\n")
    (project / "scripts").mkdir()
    (project / "scripts" / "old.py").write_text("from minihost.core import removed_helper\n")
    (project / "pyproject.toml").write_text(
        '[project]\nname = "p"\n[tool.driftcheck]\ninclude = ["tools"]\nexclude = ["scripts"]\n'
    )
    assert load_config(project / "pyproject.toml").include == ("tools",)
    out = run_cli(
        "scan", str(project), "--against", str(HOST / "2.0"), "--baseline", str(HOST / "1.0"),
        "--format", "json", "-q",
    )  # fmt: skip
    data = json.loads(out.stdout)
    assert [f["file"] for f in data["findings"]] == ["tools/gen.py"]
    assert data["discovery"]["files"] == 2
    assert data["discovery"]["roots"] == [
        {"folder": "", "kind": "packages", "names": ["pkg"], "files": 1},
        {"folder": "", "kind": "include", "names": [], "files": 1},
    ]


def test_the_text_report_says_what_was_read():
    out = run_cli(
        "scan", str(LAYOUTS / "srclayout"), "--against", str(HOST / "2.0"),
        "--baseline", str(HOST / "1.0"), "-q",
    )  # fmt: skip
    assert out.exit_code == 1
    assert "read 5 file(s) from src/ (packages srcpkg: 4), scripts/ (scripts: 1)" in out.stdout


def test_scripts_sharing_a_stem_get_their_path_as_name():
    taken: set[str] = set()
    names = []
    for rel in ("examples/a/main.py", "examples/b/main.py", "scripts/my-tool.py"):
        names.append(script_name(rel, taken))
        taken.add(names[-1])
    assert names == ["main", "examples.b.main", "scripts.my-tool"]


def test_a_wheel_reads_only_what_it_installs(tmp_path: Path):
    files = {
        "acme/plugin/__init__.py": "",  # a namespace portion: no acme/__init__.py
        "acme/plugin/hooks.py": "from minihost.core import removed_helper\n",
    }
    wheel = build_wheel(tmp_path / "acme_plugin-1.0-py3-none-any.whl", files, name="acme-plugin")
    found = discover(open_archive(wheel))
    assert found.modules == {
        "acme/plugin/__init__.py": "acme.plugin",
        "acme/plugin/hooks.py": "acme.plugin.hooks",
    }
    assert found.source == "installed"


def test_an_sdist_reads_its_package_and_examples(tmp_path: Path):
    sdist = tmp_path / "flat_client-0.2.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        for path in sorted((LAYOUTS / "flat").rglob("*")):
            if path.is_file():
                tar.add(path, arcname=f"flat_client-0.2/{path.relative_to(LAYOUTS / 'flat')}")
    found = discover(open_archive(sdist))
    assert found.modules == MODULES["flat"]


def test_an_installed_style_directory_keeps_its_top_level_packages():
    """A directory with a ``.dist-info`` (miniclient) is read as before: its top_level.txt."""
    client = load_client(parse_spec(str(FIXTURES / "clients" / "miniclient")))
    assert client.discovered.source == "installed"
    assert all(rel.startswith("miniclient/") for rel in client.discovered.modules)


def test_nothing_to_read_is_one_clear_error(tmp_path: Path):
    (tmp_path / "README.md").write_text("no code here\n")
    out = run_cli("scan", str(tmp_path), "--against", str(HOST / "2.0"))
    assert out.exit_code == 2
    assert "no Python files or notebooks found" in out.stderr
    assert "Traceback" not in out.stderr
