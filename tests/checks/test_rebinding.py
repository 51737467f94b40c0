"""Positional arguments that bind to another parameter on the target (``positional-shift``),
on our own fixture host ``shifthost``: near-misses first (a positional-only parameter renamed, a
parameter renamed in place, one appended with a default, calls by keyword), then inserted,
reordered and keyword-only parameters, a validated one, ``*args``, and a decorator that still
took keyword-only parameters by position at baseline."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from driftcheck.fixes.run import fix
from driftcheck.host.positions import rebindings
from driftcheck.host.signature import Param, Signature
from driftcheck.pipeline import ScanResult, scan

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
HOST = FIXTURES / "hosts" / "shifthost"
CLIENT = FIXTURES / "clients" / "shiftclient"
_DRIFT = re.compile(r"#\s*drift(?:\s*->\s*(.+?))?\s*$")


def _markers() -> tuple[dict[int, str], set[int]]:
    drift, ok = {}, set()
    for n, line in enumerate((CLIENT / "shiftclient" / "calls.py").read_text().splitlines(), 1):
        m = _DRIFT.search(line)
        if m:
            drift[n] = (m.group(1) or "").strip()
        elif "# ok" in line:
            ok.add(n)
    return drift, ok


@pytest.fixture(scope="module")
def forward() -> ScanResult:
    return scan(str(CLIENT), str(HOST / "2.0"), baseline=str(HOST / "1.0"), host="shifthost")


def test_exactly_the_shifted_calls_are_reported(forward: ScanResult):
    drift, ok = _markers()
    lines = {f.line for f in forward.findings}
    assert lines == set(drift), sorted(lines ^ set(drift))
    assert not lines & ok
    assert all(f.rule == "positional-shift" for f in forward.findings)  # one finding per cause


def test_messages_say_where_each_argument_went(forward: ScanResult):
    drift, _ = _markers()
    for f in forward.findings:
        assert drift[f.line] in f.message, (f.line, f.message)


def test_severity_follows_the_evidence(forward: ScanResult):
    by_line = {f.line: f for f in forward.findings}
    drift, _ = _markers()
    line_of = {text: n for n, text in drift.items()}
    assert by_line[line_of["silently"]].severity == "warning"  # int -> int, int -> int
    assert by_line[line_of["stop"]].severity == "warning"  # swapped, annotated alike
    assert by_line[line_of["factor"]].severity == "error"  # float now lands on an int
    assert by_line[line_of["checks"]].severity == "error"  # the host raises on its value
    assert by_line[line_of["*args"]].severity == "error"


def test_the_fix_passes_them_by_keyword_with_their_old_names(tmp_path: Path):
    client = tmp_path / "shiftclient"
    shutil.copytree(CLIENT, client)
    fix(str(client), str(HOST / "2.0"), baseline=str(HOST / "1.0"), host="shifthost", apply=True)
    code = (client / "shiftclient" / "calls.py").read_text()
    assert "scale(data, factor=2.0)  # drift" in code
    assert "span(start=1, stop=5)  # drift" in code
    assert "Model(depth=4, rate=0.2)  # drift" in code
    assert "gather(data, 3)  # drift" in code  # manual: *args has no name to pass it by
    again = scan(str(client), str(HOST / "2.0"), baseline=str(HOST / "1.0"), host="shifthost")
    assert [f.line for f in again.findings] == [21, 22]  # both manual: take needs its new axis


def test_scanning_against_the_baseline_itself_is_clean():
    for v in ("1.0", "2.0"):
        result = scan(str(CLIENT), str(HOST / v), baseline=str(HOST / v), host="shifthost")
        assert result.findings == []


def _sig(*params: tuple[str, str]) -> Signature:
    return Signature([Param(n, k, has_default=False) for n, k in params], None)


@pytest.mark.parametrize(
    ("before", "after", "count", "expected"),
    [
        # inserted before: the second argument now fills the new parameter
        (
            [("a", "positional_or_keyword"), ("b", "positional_or_keyword")],
            [
                ("a", "positional_or_keyword"),
                ("x", "positional_or_keyword"),
                ("b", "positional_or_keyword"),
            ],
            2,
            [(1, "b", "x", "shift")],
        ),
        # renamed in place: not a rebinding
        (
            [("a", "positional_or_keyword"), ("b", "positional_or_keyword")],
            [("a", "positional_or_keyword"), ("c", "positional_or_keyword")],
            2,
            [],
        ),
        # positional-only renamed: not a rebinding
        (
            [("a", "positional_only"), ("b", "positional_or_keyword")],
            [("z", "positional_only"), ("b", "positional_or_keyword")],
            2,
            [],
        ),
        # keyword-only now
        (
            [("a", "positional_or_keyword"), ("b", "positional_or_keyword")],
            [("a", "positional_or_keyword"), ("b", "keyword_only")],
            2,
            [(1, "b", "b", "keyword-only")],
        ),
        # a parameter the call does not reach changed: nothing to say
        (
            [("a", "positional_or_keyword"), ("b", "positional_or_keyword")],
            [
                ("a", "positional_or_keyword"),
                ("c", "positional_or_keyword"),
                ("b", "positional_or_keyword"),
            ],
            1,
            [],
        ),
    ],
)
def test_rebindings(before, after, count, expected):
    got = rebindings(_sig(*before), _sig(*after), count)
    assert [
        (r.index, r.before.name, r.after.name if r.after else None, r.how) for r in got
    ] == expected
