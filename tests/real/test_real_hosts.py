"""Real hosts, our own clients: numpy 2, pydantic 2, Django 4.2/5.0 and pandas 2.

Each client under ``fixtures/clients/real/`` was written from its host's migration guide and
release notes, every marked line checked against the host's source on both sides (the
client's ``evidence.toml`` says where). ``tests/real/hosts.toml`` lists the scans and, for
each, the drift lines driftcheck is known to miss, with why. Markers:

* ``# drift`` — reported on every target; ``# drift@5.0`` — only on that target;
* ``-> TEXT`` — the finding's message names the replacement the host's own source names
  (``-> TEXT@4.2``: only on that target);
* ``# ok`` — must stay quiet (a name on both sides, a guarded shim, a look-alike).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from driftcheck.compat import tomllib
from driftcheck.pipeline import ScanResult, scan

pytestmark = [pytest.mark.network, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = ROOT / "fixtures" / "clients" / "real"
PLAN = tomllib.loads((ROOT / "tests" / "real" / "hosts.toml").read_text())["scan"]
_DRIFT = re.compile(r"#\s*drift(?:@([\d.]+))?(?:\s*->\s*(.+?))?\s*$")
_OK = re.compile(r"#\s*ok\b")


def markers(client: str, version: str) -> tuple[dict[tuple[str, int], str], set[tuple[str, int]]]:
    """(drift line -> replacement text or "", ok lines) of a client for one target version."""
    root = CLIENTS / client
    drift: dict[tuple[str, int], str] = {}
    ok: set[tuple[str, int]] = set()
    for path in sorted((root / client).rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for n, line in enumerate(path.read_text().splitlines(), start=1):
            m = _DRIFT.search(line)
            if m:
                if m.group(1) and not _on(version, m.group(1)):
                    continue
                text = (m.group(2) or "").strip()
                if "@" in text:
                    text, only = text.rsplit("@", 1)
                    text = text if _on(version, only) else ""
                drift[(rel, n)] = text
            elif _OK.search(line):
                ok.add((rel, n))
    return drift, ok


def _on(version: str, prefix: str) -> bool:
    return version == prefix or version.startswith(prefix + ".")


_SCANS: dict[str, ScanResult] = {}


def _scan(entry: dict) -> ScanResult:
    key = f"{entry['client']}@{entry['against']}"
    if key not in _SCANS:
        _SCANS[key] = scan(str(CLIENTS / entry["client"]), entry["against"])
    return _SCANS[key]


PARAMS = [pytest.param(e, id=f"{e['client']}-{e['against']}") for e in PLAN]


def test_plan_is_well_formed():
    assert {e["client"] for e in PLAN} == {p.name for p in CLIENTS.iterdir() if p.is_dir()}
    for entry in PLAN:
        drift, _ = markers(entry["client"], entry["against"].split("==")[1])
        for missed in entry.get("missed", []) + entry.get("missed_text", []):
            assert (missed["file"], missed["line"]) in drift, missed
            assert missed["reason"].strip(), missed


@pytest.mark.parametrize("entry", PARAMS)
def test_every_drift_line_is_reported_and_nothing_else(entry: dict):
    result = _scan(entry)
    drift, ok = markers(entry["client"], entry["against"].split("==")[1])
    missed = {(m["file"], m["line"]) for m in entry.get("missed", [])}
    # The markers say what breaks or warns. An info finding claims neither: a default whose
    # value changed with no evidence of another path (default-change), an implementation swap.
    infos = [f for f in result.findings if f.severity == "info"]
    assert {f.rule for f in infos} <= {"default-change", "implementation-swap"}, infos
    reported = {(f.file, f.line) for f in result.findings if f.severity != "info"}
    assert not reported & ok, sorted(reported & ok)
    assert reported - set(drift) == set(), sorted(reported - set(drift))
    assert set(drift) - missed - reported == set(), sorted(set(drift) - missed - reported)
    assert not missed & reported, f"now found, drop from hosts.toml: {sorted(missed & reported)}"


@pytest.mark.parametrize("entry", PARAMS)
def test_messages_name_the_replacement_the_host_names(entry: dict):
    result = _scan(entry)
    drift, _ = markers(entry["client"], entry["against"].split("==")[1])
    skip = {(m["file"], m["line"]) for m in entry.get("missed", []) + entry.get("missed_text", [])}
    wrong = []
    for where, text in drift.items():
        if not text or where in skip:
            continue
        messages = [f.message for f in result.findings if (f.file, f.line) == where]
        if not any(text in m for m in messages):
            wrong.append((where, text, messages[:1]))
    assert wrong == []


@pytest.mark.parametrize("entry", PARAMS)
def test_scanning_against_the_baseline_itself_is_clean(entry: dict):
    result = _scan(entry)
    name = entry["against"].split("==")[0]
    again = scan(str(CLIENTS / entry["client"]), f"{name}=={result.baseline}")
    assert again.findings == []


def test_every_name_in_numpys_expired_table_is_reported_with_numpys_words():
    """numpy 2.0 ships its removals as data: each name with its migration note."""
    from driftcheck.host.load import load_host
    from driftcheck.host.served import Interpreter
    from driftcheck.sources.specs import parse_spec

    [entry] = [e for e in PLAN if e["against"] == "numpy==2.0.0"]
    host = load_host(parse_spec("numpy==2.0.0"))
    table = Interpreter(host, "numpy._expired_attrs_2_0").global_value(
        "numpy._expired_attrs_2_0", "__expired_attributes__", 0
    )
    assert isinstance(table, dict) and len(table) > 40
    by_symbol: dict[str, list[str]] = {}
    for f in _scan(entry).findings:
        by_symbol.setdefault(f.symbol, []).append(f.message)
    for name, note in table.items():
        messages = by_symbol.get(f"numpy.{name}", [])
        assert any(note in m for m in messages), (name, note, messages[:1])


def test_the_host_dropping_a_keyword_in_its_own_call_is_the_fixs_evidence():
    """Django 5.0 removed make_aware(is_dst=); its own TruncBase.convert_value passed
    ``is_dst=self.is_dst`` on 3.2.25, the client's pin (datetime.py:250), and passes nothing in
    its place on 5.0.4 (datetime.py:351). The drop is cited on both releases; it stays unsafe
    because is_dst had a default and the client passes another value (what pytz zones read)."""
    result = _scan({"client": "djclient", "against": "Django==5.0.4"})
    [f] = [f for f in result.findings if f.file == "djclient/views.py" and f.line == 57]
    assert f.fix is not None and f.fix.codemod == "remove-keyword"
    assert f.fix.safety == "unsafe"
    cited = {(e.version, e.file, e.line) for e in f.evidence if e.note}
    path = "django/db/models/functions/datetime.py"
    assert {("3.2.25", path, 250), ("5.0.4", path, 351)} <= cited
