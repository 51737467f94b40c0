"""Findings point at the offending token: the keyword passed, the positional too many; a call
that lacks a new required parameter (no token of its own) from its callee to its closing
parenthesis, as pyright and mypy report it; every finding has an end."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from driftcheck.fixes.patches import plan
from driftcheck.pipeline import ScanResult, scan
from driftcheck.report import FORMATS

HOST = Path(__file__).parents[2] / "fixtures" / "hosts" / "minihost"

CODE = """\
from minihost.core import build, combine, connect


def far_keyword() -> str:
    return connect(
        "localhost",
        port=8080,
        timeout=2.0,
        retries=5,
    )


def missing_mode() -> str:
    return build(
        "widget",
    )


def positional_too_many() -> int:
    return combine(1,
                   2,
                   3)
"""


def _at(needle: str, nth: int = 0) -> tuple[int, int]:
    """(1-based line, 1-based column) of the ``nth`` occurrence of ``needle`` in CODE."""
    start = -1
    for _ in range(nth + 1):
        start = CODE.index(needle, start + 1)
    line = CODE.count("\n", 0, start) + 1
    column = start - (CODE.rfind("\n", 0, start) + 1) + 1
    return line, column


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> ScanResult:
    pkg = tmp_path_factory.mktemp("client") / "case"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text(CODE)
    return scan(str(pkg), str(HOST / "2.0"), baseline=str(HOST / "1.0"), host="minihost")


def _one(result: ScanResult, symbol: str):
    [f] = [f for f in result.findings if f.kind == "call-signature" and f.symbol == symbol]
    return f


def test_removed_keyword_is_reported_at_the_keyword(result: ScanResult):
    f = _one(result, "minihost.core.connect")
    assert (f.line, f.column) == _at("retries=5")
    assert (f.end_line, f.end_column) == (f.line, f.column + len("retries=5"))
    assert f.fix_at == _at("connect(\n")  # the fix still rewrites the call


def test_missing_required_spans_the_call_from_the_callee_to_the_closing_parenthesis(
    result: ScanResult,
):
    f = _one(result, "minihost.core.build")
    assert (f.line, f.column) == _at("build(\n")  # not the parenthesis two lines below
    line, column = _at("    )\n", 1)
    assert (f.end_line, f.end_column) == (line, column + 5)
    assert f.fix_at == (f.line, f.column) and f.context.strip() == "return build("
    out = io.StringIO()
    FORMATS["sarif"](result, out)
    [region] = [
        r["locations"][0]["physicalLocation"]["region"]
        for r in json.loads(out.getvalue())["runs"][0]["results"]
        if "'mode'" in r["message"]["text"]
    ]
    assert (region["startLine"], region["startColumn"]) == (f.line, f.column)
    assert (region["endLine"], region["endColumn"]) == (f.end_line, f.end_column)


def test_positional_too_many_is_reported_at_that_argument(result: ScanResult):
    f = _one(result, "minihost.core.combine")
    assert (f.line, f.column) == _at("3)")
    assert f.end_column == f.column + 1


def test_json_and_sarif_carry_the_end(result: ScanResult):
    out = io.StringIO()
    FORMATS["json"](result, out)
    data = json.loads(out.getvalue())
    for item in data["findings"]:
        assert item["end_line"] >= item["line"] >= 1
        assert item["end_column"] >= 1
    out = io.StringIO()
    FORMATS["sarif"](result, out)
    sarif = json.loads(out.getvalue())
    regions = [r["locations"][0]["physicalLocation"]["region"] for r in sarif["runs"][0]["results"]]
    f = _one(result, "minihost.core.connect")
    assert {
        "startLine": f.line,
        "startColumn": f.column,
        "endLine": f.end_line,
        "endColumn": f.end_column,
    }.items() <= next(r for r in regions if r["startLine"] == f.line).items()


def test_a_fix_at_a_far_keyword_still_applies(result: ScanResult):
    fix_plan = plan(result.findings, result.client_texts, unsafe=True)
    [changed] = fix_plan.pending
    assert "retries" not in changed.new
    assert all(f.symbol != "minihost.core.connect" for f, _ in changed.declined)
