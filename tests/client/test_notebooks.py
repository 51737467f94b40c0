"""Notebooks: code cells read (IPython lines skipped, lines kept), findings at cell and line,
and fixes written back into the notebook's JSON (only the changed cells' sources).

``fixtures/clients/layouts/notebooks/analysis.ipynb``: cell 3 imports a helper minihost 2.0
moved (a safe fix), cell 6 runs under ``%%time`` with a ``%time`` line and calls ``connect`` with
a keyword 2.0 dropped (an unsafe fix); cells 2 and 5 hold ``%pip``, ``!ls`` and ``%%bash``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import run_cli

from driftcheck.client.notebooks import cell_of, changed_cells, to_python, write_back
from driftcheck.fixes.patches import FileFix, FixPlan, apply_in_place
from driftcheck.pipeline import scan

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
HOST = FIXTURES / "hosts" / "minihost"
PROJECT = FIXTURES / "clients" / "layouts" / "notebooks"
NOTEBOOK = PROJECT / "analysis.ipynb"
ARGS = ("--against", str(HOST / "2.0"), "--baseline", str(HOST / "1.0"))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    copy = tmp_path / "nb"
    shutil.copytree(PROJECT, copy)
    return copy


def _result():
    return scan(str(PROJECT), str(HOST / "2.0"), baseline=str(HOST / "1.0"))


def test_code_cells_become_python_with_ipython_lines_masked_in_place():
    raw = NOTEBOOK.read_text()
    text = to_python(raw)
    lines = text.splitlines()
    compile(text, "analysis.ipynb", "exec")  # it parses: every IPython line is masked
    assert lines[0] == "# %% [cell 2]"  # cell 1 is markdown: counted, not read
    assert lines[1] == "pass  # driftcheck: ipython 1"  # %pip install
    assert "echo minihost.core.removed_helper" not in text  # a %%bash cell is not Python
    # %%time's body is Python; the indented %time line keeps its indentation and its number.
    n = lines.index("# %% [cell 6]")
    assert lines[n + 4] == "    pass  # driftcheck: ipython 4"
    assert cell_of(lines, n + 6) == (6, 5)  # 1-based: the marker is line n + 1
    assert "# %% [cell 4]" not in text


def test_findings_point_at_cell_and_line():
    result = _result()
    got = {(f.file, f.kind) + cell_of(result.client_lines[f.file], f.line) for f in result.findings}
    assert got == {
        ("analysis.ipynb", "moved-symbol", 3, 1),
        ("analysis.ipynb", "call-signature", 6, 5),
    }


def test_text_json_sarif_and_github_say_the_cell(tmp_path: Path):
    out = run_cli("scan", str(PROJECT), *ARGS, "-q")
    assert "analysis.ipynb cell 3, line 1:" in out.stdout
    assert "analysis.ipynb cell 6, line 5:" in out.stdout
    assert "%time x = 1" in out.stdout  # the code frame shows the cell as the notebook has it
    data = json.loads(run_cli("scan", str(PROJECT), *ARGS, "--format", "json", "-q").stdout)
    cells = {(f["rule"], f["cell"], f["cell_line"]) for f in data["findings"]}
    assert cells == {("moved-symbol", 3, 1), ("call-signature", 6, 5)}
    sarif = json.loads(run_cli("scan", str(PROJECT), *ARGS, "--format", "sarif", "-q").stdout)
    results = sarif["runs"][0]["results"]
    regions = {
        (
            r["ruleId"],
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].rsplit("/", 1)[-1],
            r["locations"][0]["physicalLocation"]["region"]["startLine"],
            r["properties"]["cell"],
        )
        for r in results
    }
    assert regions == {
        ("moved-symbol", "analysis.ipynb", 1, 3),
        ("call-signature", "analysis.ipynb", 5, 6),
    }
    # The safe fix as SARIF replacements edits the notebook's JSON into the fixed notebook.
    from driftcheck.report.sarif import apply_replacements

    fixed = next(r for r in results if r["ruleId"] == "moved-symbol")["fixes"][0]
    reps = fixed["artifactChanges"][0]["replacements"]
    new = json.loads(apply_replacements(NOTEBOOK.read_text(), reps))
    assert new["cells"][2]["source"][0].startswith("from minihost.utils import relocated_helper")
    gh = run_cli("scan", str(PROJECT), *ARGS, "--format", "github", "-q").stdout
    assert "analysis.ipynb,line=5," in gh and "(cell 6)" in gh


def test_fix_apply_rewrites_only_the_changed_cell(project: Path):
    before = json.loads((project / "analysis.ipynb").read_text())
    out = run_cli("fix", str(project), *ARGS, "--apply", "--unsafe-fixes")
    assert "rewrote analysis.ipynb" in out.stdout, out.stdout
    raw = (project / "analysis.ipynb").read_text()
    after = json.loads(raw)
    assert raw.startswith('{\n "cells": [\n  {\n')  # Jupyter's indent=1 kept
    changed = [
        n for n, (a, b) in enumerate(zip(before["cells"], after["cells"], strict=True), 1) if a != b
    ]
    assert changed == [3, 6]
    for a, b in zip(before["cells"], after["cells"], strict=True):
        assert {k: v for k, v in a.items() if k != "source"} == {
            k: v for k, v in b.items() if k != "source"
        }  # outputs, metadata, ids untouched
    assert after["metadata"] == before["metadata"]
    assert after["cells"][2]["source"] == [
        "from minihost.utils import relocated_helper  # drift: moved-symbol\n",
        "\n",
        "files = !ls\n",
        "print(relocated_helper(2))",
    ]
    assert "    %time x = 1\n" in after["cells"][5]["source"]  # the IPython line came back
    assert "retries" not in "".join(after["cells"][5]["source"])
    again = run_cli("scan", str(project), *ARGS, "-q")
    assert again.exit_code == 0, again.stdout


def test_the_patch_names_the_cell_and_applies_to_the_json(project: Path, tmp_path: Path):
    out = run_cli("fix", str(project), *ARGS, "--out", str(tmp_path / "patches"))
    assert out.exit_code == 1
    patch = (tmp_path / "patches" / "analysis.ipynb.patch").read_text()
    assert patch.startswith("# driftcheck: analysis.ipynb cell 3\n")
    assert "# +from minihost.utils import relocated_helper" in patch
    import subprocess

    done = subprocess.run(
        ["git", "apply", "--unsafe-paths", "--directory", ".", str(tmp_path / "patches" / "all.patch")],
        cwd=project, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    cell = json.loads((project / "analysis.ipynb").read_text())["cells"][2]
    assert cell["source"][0].startswith("from minihost.utils import")


def test_an_edited_notebook_is_refused_and_left_alone(project: Path):
    path = project / "analysis.ipynb"
    raw = path.read_text()
    text = to_python(raw)
    new = text.replace("minihost.core import relocated", "minihost.utils import relocated")
    ff = FileFix("analysis.ipynb", text, new, raw=raw)
    path.write_text(raw.replace("More text.", "Edited meanwhile."))
    done, refused = apply_in_place(FixPlan([ff], [], []), project)
    assert done == [] and refused == [
        ("analysis.ipynb", "changed since it was scanned; scan again")
    ]
    assert "Edited meanwhile." in path.read_text()


def test_write_back_keeps_unchanged_notebooks_byte_for_byte_and_string_sources():
    raw = NOTEBOOK.read_text()
    assert write_back(raw, to_python(raw)) == raw
    assert changed_cells(raw, to_python(raw)) == {}
    one = json.dumps(
        {"cells": [{"cell_type": "code", "source": "import minihost.core\nx = 1", "metadata": {},
                    "outputs": [], "execution_count": None}], "metadata": {}, "nbformat": 4,
         "nbformat_minor": 5},
        indent=2,
    )  # fmt: skip
    new = write_back(one, to_python(one).replace("x = 1", "x = 2"))
    assert json.loads(new)["cells"][0]["source"] == "import minihost.core\nx = 2"
    assert new.startswith('{\n  "cells"')  # the file's own indent


def test_a_broken_notebook_is_skipped_not_fatal(tmp_path: Path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from minihost.core import removed_helper\n")
    (tmp_path / "bad.ipynb").write_text("{ not json")
    result = scan(str(tmp_path), str(HOST / "2.0"), baseline=str(HOST / "1.0"))
    assert [f.file for f in result.findings] == ["pkg/__init__.py"]
    assert [file for file, _ in result.skipped] == ["bad.ipynb"]
    assert "not a valid notebook" in result.skipped[0][1]


def test_notebooks_are_parsed_in_the_same_pass_as_modules():
    """One pass collects the uses of the notebook and of the package beside it."""
    result = _result()
    assert {u.file for u in result.uses} >= {"analysis.ipynb", "nbpkg/helpers.py"}


def test_a_cell_that_does_not_parse_is_named(tmp_path: Path):
    cells = [
        {"cell_type": "code", "source": ["import minihost.core\n"], "metadata": {}},
        {"cell_type": "code", "source": ["x = (\n", "y = 1\n"], "metadata": {}},
    ]
    (tmp_path / "broken.ipynb").write_text(json.dumps({"cells": cells, "metadata": {}}, indent=1))
    (tmp_path / "ok.py").write_text("from minihost.core import removed_helper\n")
    result = scan(str(tmp_path), str(HOST / "2.0"), baseline=str(HOST / "1.0"))
    assert [f.file for f in result.findings] == ["ok.py"]
    [(file, why)] = result.skipped
    assert file == "broken.ipynb" and "in cell 2, line 1" in why, why
