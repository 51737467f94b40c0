"""Version gates, evaluated per side: a use counts against a host release only if the code
around it runs there (``fixtures/clients/gateclient`` supports minihost 1.0 and 2.0)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from driftcheck.gates import Gate, negate
from driftcheck.pipeline import ScanResult, scan

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
CLIENT = FIXTURES / "clients" / "gateclient"
HOST = FIXTURES / "hosts" / "minihost"


def _scan(target: str, baseline: str) -> ScanResult:
    return scan(str(CLIENT), str(HOST / target), baseline=str(HOST / baseline), host="minihost")


def _marked(marker: str) -> set[tuple[str, int]]:
    out = set()
    for path in sorted((CLIENT / "gateclient").rglob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), start=1):
            if re.search(rf"#\s*{marker}\b", line):
                out.add((path.relative_to(CLIENT).as_posix(), n))
    return out


@pytest.fixture(scope="module")
def forward() -> ScanResult:
    return _scan("2.0", "1.0")


@pytest.fixture(scope="module")
def backward() -> ScanResult:
    return _scan("1.0", "2.0")


def test_only_ungated_drifts_are_reported(forward: ScanResult):
    found = {(f.file, f.line) for f in forward.findings}
    assert found == _marked("drift"), sorted(found ^ _marked("drift"))


def test_no_finding_on_code_that_only_the_other_release_runs(
    forward: ScanResult, backward: ScanResult
):
    for result in (forward, backward):
        found = {(f.file, f.line) for f in result.findings}
        assert not found & _marked("ok"), sorted(found & _marked("ok"))


def test_mutually_exclusive_branches_are_clean_in_both_directions(backward: ScanResult):
    assert backward.findings == []


def test_an_undecidable_gate_is_kept_and_said(forward: ScanResult):
    [said] = [f for f in forward.findings if "MINIHOST_CUTOFF" in f.message]
    assert "conditional: runs only if" in said.message
    others = [f for f in forward.findings if f is not said]
    assert others and all("conditional" not in f.message for f in others)


def test_no_branch_working_on_the_target_is_reported_without_baseline_history(
    forward: ScanResult,
):
    [f] = [f for f in forward.findings if f.file == "gateclient/imports.py"]
    assert f.kind == "missing-symbol" and f.symbol == "minihost.core.removed_helper"
    assert "present in" not in f.message  # the fallback never ran on the baseline


def test_a_handler_that_ends_the_program_is_no_fallback(forward: ScanResult):
    """``except ImportError: sys.exit(1)`` (or exit, quit, os._exit, SystemExit): the import is
    reported where it is; a conditional exit or a real fallback stays quiet (the markers)."""
    exits = {f.line: f for f in forward.findings if f.file == "gateclient/exits.py"}
    text = (CLIENT / "gateclient" / "exits.py").read_text().splitlines()
    ended = {n for n, line in enumerate(text, 1) if "# drift" in line and "from minihost" in line}
    assert len(ended) == 7 and ended <= set(exits)
    assert all(exits[n].kind == "missing-symbol" for n in ended)


def test_a_call_of_a_name_its_fallback_left_none_is_reported_at_the_call(forward: ScanResult):
    text = (CLIENT / "gateclient" / "exits.py").read_text().splitlines()
    calls = [
        f
        for f in forward.findings
        if f.file == "gateclient/exits.py" and "(1)," in text[f.line - 1]
    ]
    assert [f.line for f in calls] == [n for n, t in enumerate(text, 1) if "(1),  # drift" in t]
    imports = {int(re.search(r"import \(line (\d+)\)", f.message).group(1)) for f in calls}
    assert {text[n - 1].split(" as ")[-1].split()[0] for n in imports} == {"maybe", "unset"}
    assert all("nothing tests it before this call" in f.message for f in calls)


# -- evaluation, the way Python compares ------------------------------------------------------


def _side(version: str, names: set[str] = frozenset()) -> tuple:
    return version, lambda name: name in names, lambda name: None


@pytest.mark.parametrize(
    ("gate", "version", "expected"),
    [
        (Gate("version", form="str", cmp="<", value="2"), "1.0", True),
        (Gate("version", form="str", cmp=">=", value="0.9"), "0.10.0", False),  # as strings
        (Gate("version", form="version", cmp=">=", value="0.9"), "0.10.0", True),
        (Gate("version", form="tuple:2", cmp=">=", value=(0, 10)), "0.10.2", True),
        (Gate("version", form="tuple:2", cmp="==", value=(0, 10)), "0.11.0", False),
        (Gate("version", form="str", cmp="startswith", value="0.8"), "0.8.5", True),
        (Gate("version", form="version", cmp="<", value="not a version"), "1.0", None),
        (Gate("unknown", name="x"), "1.0", None),
        (Gate("never"), "1.0", False),
    ],
)
def test_version_gates(gate: Gate, version: str, expected: bool | None):
    assert gate.holds(_side(version)) is expected


def test_boolean_structure():
    new = Gate("version", form="version", cmp=">=", value="2.0")
    has = Gate("has", name="host.x")
    unknown = Gate("unknown", name="?")
    assert Gate("and", (new, has)).holds(_side("2.0", {"host.x"})) is True
    assert Gate("and", (new, unknown)).holds(_side("1.0")) is False  # decided by one part
    assert Gate("or", (new, unknown)).holds(_side("2.0")) is True
    assert Gate("or", (new, unknown)).holds(_side("1.0")) is None
    assert negate(negate(new)) == new
    assert negate(new).holds(_side("1.0")) is True


# -- imports the import system serves, behind a lazy package ----------------------------------

LAZY = FIXTURES / "clients" / "lazyclient"


def test_lazy_packages_aliases_and_record_constructors():
    result = scan(
        str(LAZY),
        str(FIXTURES / "hosts" / "lazyhost" / "2.0"),
        baseline=str(FIXTURES / "hosts" / "lazyhost" / "1.0"),
        host="lazyhost",
    )
    found = {(f.file, f.line) for f in result.findings}
    marked = {
        (path.relative_to(LAZY).as_posix(), n)
        for path in (LAZY / "lazyclient").glob("*.py")
        for n, ln in enumerate(path.read_text().splitlines(), 1)
        if "# drift" in ln
    }
    assert found == marked, sorted(found ^ marked)
    kinds = {}
    for f in result.findings:
        kinds.setdefault(f.file, set()).add(f.kind)
    # every import statement of the removed package, once each, and none of the names' uses
    lines = sorted(f.line for f in result.findings if f.file == "lazyclient/workers.py")
    assert lines == [4, 12, 22]
    assert kinds == {
        "lazyclient/workers.py": {"missing-symbol"},  # a removed package, behind __getattr__
        "lazyclient/strict.py": {"missing-symbol"},  # a handler that raises again
        "lazyclient/records.py": {"call-signature"},  # msgspec, NamedTuple, pydantic
        "lazyclient/engines.py": {"call-signature", "attribute-missing"},  # forwarded, arms
    }


# -- module reach ------------------------------------------------------------------------------


def test_module_gates_follow_cycles_and_entries():
    from driftcheck.client.reach import module_gates

    g, h = Gate("has", name="host.g"), Gate("has", name="host.h")
    mods = {"p", "p.a", "p.b", "p.c", "p.d", "p.e"}
    sites = [
        ("p.a", g, "p"),  # p imports a under g
        ("p.b", None, "p.a"),  # a and b import each other: one cycle, entered under g
        ("p.a", None, "p.b"),
        ("p.c", h, "p.b"),  # c only through b, under h
        ("p", None, "p.a"),  # a submodule importing its own package adds nothing
        ("p.d", None, "p.e"),  # d and e: a cycle nothing outside enters
        ("p.e", None, "p.d"),
    ]
    gates = module_gates(sites, mods)
    assert gates["p.a"] == g and gates["p.b"] == g
    assert gates["p.c"] == Gate("and", (h, g))
    assert "p" not in gates and "p.d" not in gates and "p.e" not in gates


def test_an_import_for_type_checkers_only_is_no_way_into_a_module():
    """``if TYPE_CHECKING:`` imports never run: a module named there is loaded some other way
    (ray's ``batch/stages/__init__.py`` imports its stage modules on first access, PEP 562, and
    names them under ``TYPE_CHECKING`` for type checkers only)."""
    from driftcheck.client.reach import module_gates
    from driftcheck.gates import TYPE_ONLY, all_of

    g = Gate("has", name="host.g")
    mods = {"p", "p.a", "p.b", "p.c"}
    sites = [
        ("p.a", TYPE_ONLY, "p"),  # near miss: a is also imported under g, its gate stays g
        ("p.a", g, "p.c"),
        ("p.b", TYPE_ONLY, "p"),  # b only for type checkers: it runs everywhere
        ("p.b.X", all_of([g, TYPE_ONLY]), "p.c"),  # nested under a version test too
    ]
    gates = module_gates(sites, mods)
    assert gates["p.a"] == g
    assert "p.b" not in gates
