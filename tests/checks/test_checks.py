"""The signature-level checks on our own fixtures: miniclient against minihost 1.0 → 2.0.

Each case in ``fixtures/clients/miniclient`` is one function named after it; the line a finding
must point at ends with ``# drift: <case>``, a near miss that must stay quiet with ``# ok: <case>``.
A truth test runs every case against both host versions, so the fixture cannot claim a drift the
host does not really have.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import build_wheel, need_module, read_markers

from driftcheck.findings import Finding
from driftcheck.pipeline import ScanResult, scan
from driftcheck.sources.specs import parse_spec
from driftcheck.sources.trees import open_tree

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
HOST_V1 = FIXTURES / "hosts" / "minihost" / "1.0"
HOST_V2 = FIXTURES / "hosts" / "minihost" / "2.0"
CLIENT = FIXTURES / "clients" / "miniclient"
PACKAGE = CLIENT / "miniclient"  # the package alone: no dist-info, so no pin on the host

#: case → (expected kind, expected host symbol, what the message must say, error on 2.0)
DRIFTS = {
    "missing_symbol": ("missing-symbol", "minihost.core.removed_helper", "does not exist", "ImportError"),
    "moved_symbol": ("moved-symbol", "minihost.core.relocated_helper", "minihost.utils", "ImportError"),
    "unexpected_keyword": ("call-signature", "minihost.core.connect", "'retries'", "TypeError"),
    "missing_required": ("call-signature", "minihost.core.build", "'mode'", "TypeError"),
    "too_many_positional": ("call-signature", "minihost.core.combine", "3 were given", "TypeError"),
    "dataclass_field_lost_default": ("call-signature", "minihost.config.Settings", "'level'", "TypeError"),
    "initvar_without_default": ("call-signature", "minihost.config.EngineConfig", "'warmup'", "TypeError"),
    "gained_none": ("return-semantics", "minihost.core.find_item", "may now return None", "AttributeError"),
    "became_none": ("return-semantics", "minihost.core.flush", "now returns None", "TypeError"),
    "container_to_item": ("return-semantics", "minihost.core.load_items", "single item", "TypeError"),
    "attribute_missing": ("attribute-missing", "minihost.engine.Engine.old_method", "'old_method'", "AttributeError"),
}  # fmt: skip

#: Near misses that must not be reported with a baseline.
NEAR_MISSES = {
    "guarded_import",
    "moved_but_reexported",
    "param_added_with_default",
    "dataclass_field_added_with_default",
    "keywords_survive_reorder",
    "renamed_param_not_passed",
    "result_discarded",
    "existing_method",
    "already_broken",
    "already_broken_call",
}

#: Near misses that fail on 1.0 already: not drift, but without a baseline they cannot work.
ALREADY_BROKEN = {
    "already_broken": ("missing-symbol", "minihost.core.never_existed", "ImportError"),
    "already_broken_call": ("call-signature", "minihost.core.connect", "TypeError"),
}

MARKERS = read_markers(PACKAGE, CLIENT)


def _at(case: str) -> tuple[str, int]:
    _, file, line = MARKERS[case]
    return file, line


def _key(f: Finding) -> tuple[str, str, int, str]:
    return (f.kind, f.file, f.line, f.symbol)


def _expected(cases: dict[str, tuple]) -> set[tuple[str, str, int, str]]:
    return {(row[0], *_at(case), row[1]) for case, row in cases.items()}


def _scan(client: Path, against: Path, baseline: Path | None) -> ScanResult:
    return scan(
        str(client),
        against=str(against),
        baseline=str(baseline) if baseline else None,
        host="minihost",
    )


@pytest.fixture(scope="module")
def drift() -> ScanResult:
    return _scan(CLIENT, HOST_V2, HOST_V1)


# -- the fixture itself ---------------------------------------------------------------------------


def test_markers_match_the_tables():
    assert {c for c, (s, _, _) in MARKERS.items() if s == "drift"} == set(DRIFTS)
    assert {c for c, (s, _, _) in MARKERS.items() if s == "ok"} == NEAR_MISSES
    assert set(ALREADY_BROKEN) <= NEAR_MISSES


_RUN_CASES = """
import importlib, inspect, json, pkgutil, miniclient
out = {}
for info in pkgutil.iter_modules(miniclient.__path__):
    mod = importlib.import_module("miniclient." + info.name)
    for name, obj in vars(mod).items():
        if getattr(obj, "__module__", None) != mod.__name__:
            continue
        if inspect.isfunction(obj):
            calls = [(name, obj)]
        elif inspect.isclass(obj):
            calls = [(m, getattr(obj(), m)) for m, f in vars(obj).items()
                     if inspect.isfunction(f) and not m.startswith("_")]
        else:
            continue
        for case, func in calls:
            try:
                func()
                out[case] = "ok"
            except Exception as exc:
                out[case] = type(exc).__name__
print(json.dumps(out))
"""


def _run_cases(host: Path, tmp_path: Path) -> dict[str, str]:
    """Run every case of the client against a real host version: case → "ok" or the error."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(host), str(CLIENT)]),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    proc = subprocess.run(
        [sys.executable, "-c", _RUN_CASES],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(proc.stdout)


def test_fixture_cases_really_break_on_2_0_only(tmp_path: Path):
    """Ground truth: each drift case works on 1.0 and raises on 2.0; each near miss behaves alike."""
    need_module("typing_extensions")  # minihost's config module imports it
    v1, v2 = _run_cases(HOST_V1, tmp_path), _run_cases(HOST_V2, tmp_path)
    assert set(MARKERS) <= set(v1) == set(v2)
    broken = {case: row[-1] for case, row in ALREADY_BROKEN.items()}
    assert {c: e for c, e in v1.items() if e != "ok"} == broken
    assert {c: e for c, e in v2.items() if e != "ok"} == {
        **broken,
        **{case: row[-1] for case, row in DRIFTS.items()},
    }


# -- with a baseline ------------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(DRIFTS))
def test_drift_is_reported(drift: ScanResult, case: str):
    kind, symbol, says, _ = DRIFTS[case]
    file, line = _at(case)
    here = [f for f in drift.findings if (f.file, f.line) == (file, line)]
    assert [(f.kind, f.symbol) for f in here] == [(kind, symbol)]
    [finding] = here
    assert says in finding.message
    assert "2.0" in finding.message
    assert "1.0" in {e.version for e in finding.evidence}


@pytest.mark.parametrize("case", sorted(NEAR_MISSES))
def test_near_miss_is_not_reported(drift: ScanResult, case: str):
    file, line = _at(case)
    assert [f for f in drift.findings if (f.file, f.line) == (file, line)] == []


def test_exactly_the_drifts_are_reported(drift: ScanResult):
    assert {_key(f) for f in drift.findings} == _expected(DRIFTS)
    assert len(drift.findings) == len(DRIFTS)


def test_scan_reads_versions_from_metadata(drift: ScanResult):
    assert (drift.client_name, drift.client_version) == ("miniclient", "0.1")
    assert (drift.host_name, drift.baseline, drift.target) == ("minihost", "1.0", "2.0")
    assert drift.skipped == []


def test_moved_symbol_offers_a_safe_import_rename(drift: ScanResult):
    [moved] = [f for f in drift.findings if f.kind == "moved-symbol"]
    assert moved.fix is not None and moved.fix.safety == "safe"
    assert ("new", "minihost.utils.relocated_helper") in moved.fix.params
    notes = {(e.version, e.file, e.note) for e in moved.evidence}
    assert ("2.0", "minihost/utils.py", "new location") in notes


@pytest.mark.parametrize("version", [HOST_V1, HOST_V2], ids=["1.0", "2.0"])
def test_scanning_against_the_baseline_itself_is_clean(version: Path):
    assert _scan(CLIENT, version, version).findings == []


def test_baseline_comes_from_the_client_pin(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """No --baseline: the client's ``Requires-Dist: minihost==1.0`` names it (fetched as a wheel)."""
    assert open_tree(parse_spec(str(CLIENT))).metadata.pin_on("minihost") == "1.0"
    files = {
        path.relative_to(HOST_V1).as_posix(): path.read_text()
        for path in sorted((HOST_V1 / "minihost").rglob("*.py"))
    }
    wheel = build_wheel(
        tmp_path / "minihost-1.0-py3-none-any.whl", files, name="minihost", version="1.0"
    )
    fetched = []

    def fake_fetch(name: str, version: str, *, quiet: bool = True) -> Path:
        fetched.append((name, version))
        return wheel

    monkeypatch.setattr("driftcheck.sources.fetch.fetch_release", fake_fetch)
    # A release another test loaded (tests/host's heirs pin minihost 1.0 too) is not this one.
    monkeypatch.setenv("DRIFTCHECK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr("driftcheck.host.load._HOSTS", {})
    result = _scan(CLIENT, HOST_V2, None)
    assert fetched == [("minihost", "1.0")]
    assert result.baseline == "1.0"
    assert {_key(f) for f in result.findings} == _expected(DRIFTS)


# -- without a baseline ---------------------------------------------------------------------------


def test_without_baseline_only_what_cannot_work_on_the_target():
    """No pin and no --baseline: return changes need a baseline; broken uses are reported."""
    result = _scan(PACKAGE, HOST_V2, None)
    assert result.baseline is None
    cannot_work = {c: r for c, r in DRIFTS.items() if r[0] != "return-semantics"}
    assert {_key(f) for f in result.findings} == _expected(cannot_work) | _expected(ALREADY_BROKEN)


def test_without_baseline_against_1_0_reports_only_the_already_broken():
    result = _scan(PACKAGE, HOST_V1, None)
    assert {_key(f) for f in result.findings} == _expected(ALREADY_BROKEN)


# -- known gaps -----------------------------------------------------------------------------------

GUARDED_USE = """\
try:
    from minihost.core import fast_path
except ImportError:
    fast_path = None


def guarded_call() -> bool:
    if fast_path is not None:
        return fast_path()
    return False
"""


def test_call_of_a_guarded_import_is_not_reported(tmp_path: Path):
    package = tmp_path / "guarded"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "use.py").write_text(GUARDED_USE)
    assert _scan(package, HOST_V2, HOST_V1).findings == []


# -- stores to host attributes (patches) -----------------------------------------------------------

PATCH_CLIENT = FIXTURES / "clients" / "patchclient"


def _patch_markers(marker: str) -> set[int]:
    text = (PATCH_CLIENT / "patchclient" / "patches.py").read_text().splitlines()
    return {n for n, line in enumerate(text, 1) if f"# {marker}:" in line}


def test_a_store_to_a_dropped_host_name_is_a_warning_that_says_where_the_host_reads_it():
    result = _scan(PATCH_CLIENT, HOST_V2, HOST_V1)
    by_line = {f.line: f for f in result.findings}
    assert set(by_line) == _patch_markers("drift")
    text = (PATCH_CLIENT / "patchclient" / "patches.py").read_text().splitlines()
    stores = {n for n in by_line if " = " in text[n - 1] or "setattr(" in text[n - 1]}
    assert {by_line[n].rule for n in stores} == {"stale-patch"}
    assert {by_line[n].severity for n in stores} == {"warning"}
    assert all("no longer has any effect" in by_line[n].message for n in stores)
    # reads (and ``+=``, which reads first) of a dropped name stay errors
    assert {(f.rule, f.severity) for n, f in by_line.items() if n not in stores} == {
        ("missing-symbol", "error"),
        ("moved-symbol", "error"),
    }
    # where the host reads the value now: a line of the target's own code that reads it
    said = [f for f in result.findings if ", which minihost 2.0 reads at " in f.message]
    assert len(said) == 2  # a copy of the config's value; a constant moved to minihost.utils
    for f in said:
        where = f.message.rsplit(" reads at ", 1)[1]
        file, line = where.rsplit(":", 1)
        read = (HOST_V2 / file).read_text().splitlines()[int(line) - 1]
        name = f.symbol.rsplit(".", 1)[1]
        assert name in read and not read.lstrip().startswith(name) and f'"{name}"' not in read
        assert any(e.note == "the host reads it" and e.file == file for e in f.evidence)


def test_patches_of_names_the_target_has_are_quiet():
    assert _scan(PATCH_CLIENT, HOST_V1, HOST_V2).findings == []
    assert _scan(PATCH_CLIENT, HOST_V1, HOST_V1).findings == []
