"""Accepted drift: ``--write-baseline`` records findings, later scans silence exactly those,
survive edits that shift lines, and report entries that no longer occur (stale)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import tomllib
from conftest import assert_one_error_line, run_cli
from hypothesis import given
from hypothesis import strategies as st

from driftcheck.accepted import (
    DEFAULT_NAME,
    Accepted,
    load_accepted,
    render_accepted,
    toml_string,
    triage,
)
from driftcheck.errors import UsageError
from driftcheck.findings import Finding

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
HOST_V1 = FIXTURES / "hosts" / "minihost" / "1.0"
HOST_V2 = FIXTURES / "hosts" / "minihost" / "2.0"
HOST = ("--against", str(HOST_V2), "--baseline", str(HOST_V1), "--host", "minihost")
ALL_FINDINGS = 11


@pytest.fixture
def client(tmp_path: Path) -> Path:
    """A copy of miniclient that tests may edit."""
    dest = tmp_path / "client"
    shutil.copytree(FIXTURES / "clients" / "miniclient", dest)
    return dest


def _scan(client: Path, *args: str) -> tuple[int, dict, list[str]]:
    result = run_cli("scan", str(client), *HOST, "--format", "json", "--quiet", *args)
    assert result.exception is None, repr(result.exception)
    assert result.exit_code in (0, 1), result.stderr
    return result.exit_code, json.loads(result.stdout), result.stderr_lines


def _record(client: Path, path: Path | None = None) -> Path:
    path = path or client / DEFAULT_NAME
    result = run_cli("scan", str(client), *HOST, "--write-baseline", str(path), "--quiet")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    assert f"recorded {ALL_FINDINGS} accepted finding(s)" in result.stderr
    return path


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_write_baseline_records_every_finding_with_an_empty_reason(client: Path):
    path = _record(client)
    data = tomllib.loads(path.read_text())
    assert data["version"] == 1
    entries = data["accepted"]
    assert len(entries) == ALL_FINDINGS
    for e in entries:
        assert list(e) == ["fingerprint", "rule", "file", "symbol", "message", "reason"]
        assert e["reason"] == ""
    assert {e["file"] for e in entries} >= {"miniclient/calls.py", "miniclient/symbols.py"}


def test_accepted_findings_are_silenced(client: Path):
    _record(client)
    code, data, stderr = _scan(client)  # .driftcheck-accepted.toml in the client is read
    assert code == 0
    assert data["findings"] == []
    assert len(data["accepted"]) == ALL_FINDINGS
    assert data["stale"] == [] and stderr == []
    assert data["accepted_file"] == str(client / DEFAULT_NAME)


def test_exactly_the_recorded_findings_are_silenced(client: Path):
    """Drop one entry from the file: that finding, and only it, is reported again."""
    path = _record(client)
    entries = load_accepted(path)
    dropped = next(e for e in entries if e.rule == "moved-symbol")
    path.write_text(render_accepted([e for e in entries if e is not dropped]))
    code, data, _ = _scan(client)
    assert code == 1
    assert [(f["rule"], f["fingerprint"]) for f in data["findings"]] == [
        ("moved-symbol", dropped.fingerprint)
    ]
    assert len(data["accepted"]) == ALL_FINDINGS - 1


def test_an_edit_that_shifts_lines_keeps_findings_accepted(client: Path):
    _record(client)
    _, plain, _ = _scan(client, "--accepted", str(_empty_file(client)))
    calls = client / "miniclient" / "calls.py"
    _edit(calls, '"""Call-signature', '# one\n# two\n# three\n\n"""Call-signature')
    code, data, stderr = _scan(client)
    assert (code, data["findings"], data["stale"], stderr) == (0, [], [], [])
    before = {f["fingerprint"]: f["line"] for f in plain["findings"]}
    after = {f["fingerprint"]: f["line"] for f in data["accepted"]}
    assert before.keys() == after.keys()
    moved = [fp for fp in before if after[fp] != before[fp]]
    assert len(moved) == 5 and all(after[fp] == before[fp] + 4 for fp in moved)


def test_a_change_to_the_line_itself_is_a_new_finding(client: Path):
    """The code of the line is part of the fingerprint: the old entry goes stale, the new
    finding is reported."""
    _record(client)
    _edit(client / "miniclient" / "calls.py", "retries=5", "retries=6")
    code, data, stderr = _scan(client)
    assert code == 1
    [new] = data["findings"]
    assert (new["rule"], new["symbol"]) == ("call-signature", "minihost.core.connect")
    [stale] = data["stale"]
    assert (stale["rule"], stale["symbol"]) == ("call-signature", "minihost.core.connect")
    assert stale["fingerprint"] != new["fingerprint"]
    [warning] = stderr
    assert warning.startswith("driftcheck: warning: stale accepted drift in ")
    assert stale["fingerprint"] in warning


def test_fixed_drift_is_reported_as_stale(client: Path):
    _record(client)
    _edit(
        client / "miniclient" / "symbols.py",
        "from minihost.core import relocated_helper",
        "from minihost.utils import relocated_helper",
    )
    code, data, stderr = _scan(client)
    assert code == 0 and data["findings"] == []
    assert [s["rule"] for s in data["stale"]] == ["moved-symbol"]
    assert len(stderr) == 1 and "moved-symbol" in stderr[0] and "remove the entry" in stderr[0]


def test_disabled_rules_do_not_make_entries_stale(client: Path):
    _record(client)
    code, data, stderr = _scan(client, "--disable", "call-signature")
    assert (code, data["findings"], data["stale"], stderr) == (0, [], [], [])


#: minihost's fix rules beside the built-in ones: ``load-items-unwrap`` (kind return-semantics)
#: reports the drift at returns.py:16 that the built-in check also finds (merged into the rule's).
FIX_RULES = ("--rules", str(FIXTURES / "fix_rules"))


def _record_with_rules(client: Path) -> list[Accepted]:
    path = client / DEFAULT_NAME
    result = run_cli("scan", str(client), *HOST, *FIX_RULES, "--write-baseline", str(path), "-q")
    assert result.exit_code == 0, result.stderr
    entries = load_accepted(path)
    assert len(entries) == ALL_FINDINGS
    assert "load-items-unwrap" in {e.rule for e in entries}
    return entries


def test_a_disabled_user_rule_does_not_make_its_entry_stale(client: Path):
    """Disabled, the rule is not run: its entry is not stale, and the general finding it had
    absorbed is reported again (a new finding, of the built-in check)."""
    _record_with_rules(client)
    code, data, stderr = _scan(client, *FIX_RULES, "--disable", "load-items-unwrap")
    assert (data["stale"], stderr) == ([], [])
    assert code == 1
    [(rule, file, line)] = [(f["rule"], f["file"], f["line"]) for f in data["findings"]]
    assert (rule, file, line) == ("return-semantics", "miniclient/returns.py", 16)


def test_a_disabled_kind_does_not_make_entries_of_its_rules_stale(client: Path):
    _record_with_rules(client)
    code, data, stderr = _scan(client, *FIX_RULES, "--disable", "return-semantics")
    assert (code, data["findings"], data["stale"], stderr) == (0, [], [], [])


def test_rewriting_keeps_the_reasons(client: Path):
    path = _record(client)
    entries = load_accepted(path)
    reasons = {
        e.fingerprint: f'reason {i}: tracked in #{i}, "quoted"' for i, e in enumerate(entries)
    }
    path.write_text(
        render_accepted(
            [Accepted(**{**e.to_dict(), "reason": reasons[e.fingerprint]}) for e in entries]
        )
    )
    _record(client)
    assert {e.fingerprint: e.reason for e in load_accepted(path)} == reasons


def test_explicit_accepted_file_and_the_other_formats(client: Path, tmp_path: Path):
    (tmp_path / "ci").mkdir()
    path = _record(client, tmp_path / "ci" / "accepted.toml")
    assert not (client / DEFAULT_NAME).exists()
    code, data, _ = _scan(client)  # not found by default
    assert code == 1 and len(data["findings"]) == ALL_FINDINGS
    text = run_cli("scan", str(client), *HOST, "--accepted", str(path), "--quiet")
    assert text.exit_code == 0
    assert f"{ALL_FINDINGS} accepted finding(s) not shown" in text.stdout
    github = run_cli("scan", str(client), *HOST, "--accepted", str(path), "--format", "github")
    assert (github.exit_code, github.stdout) == (0, "")


def test_accepted_findings_are_suppressed_in_sarif(client: Path):
    path = _record(client)
    entries = load_accepted(path)
    first = entries[0]
    path.write_text(
        render_accepted(
            [Accepted(**{**first.to_dict(), "reason": "known, upstream #1"}), *entries[1:]]
        )
    )
    result = run_cli("scan", str(client), *HOST, "--format", "sarif", "--quiet")
    assert result.exit_code == 0, result.stderr
    results = json.loads(result.stdout)["runs"][0]["results"]
    assert len(results) == ALL_FINDINGS
    assert all(r["suppressions"][0]["kind"] == "external" for r in results)
    by_print = {r["partialFingerprints"]["driftcheckFingerprint/v1"]: r for r in results}
    assert by_print[first.fingerprint]["suppressions"][0]["justification"] == "known, upstream #1"


def test_accepted_file_in_the_settings(client: Path, tmp_path: Path):
    path = _record(client, tmp_path / "elsewhere.toml")
    (client / "pyproject.toml").write_text('[tool.driftcheck]\naccepted = "../elsewhere.toml"\n')
    code, data, _ = _scan(client)
    assert code == 0 and data["accepted_file"] == str(client / ".." / "elsewhere.toml")
    assert len(data["accepted"]) == ALL_FINDINGS and path.is_file()


def test_bad_accepted_file_fails_with_one_line(client: Path):
    path = client / DEFAULT_NAME
    path.write_text('[[accepted]]\nrule = "x"\n')
    assert_one_error_line(run_cli("scan", str(client), *HOST), "entry 1 needs a fingerprint")
    path.write_text("version = 1\n[[accepted]]\nfingerprint = 'a'\nwhy = 'x'\n")
    assert_one_error_line(run_cli("scan", str(client), *HOST), "unknown key 'why'")
    path.write_text("[[accepted]\n")
    assert_one_error_line(run_cli("scan", str(client), *HOST), "invalid TOML")


def _empty_file(client: Path) -> Path:
    path = client.parent / "empty.toml"
    path.write_text("version = 1\n")
    return path


# -- pieces ---------------------------------------------------------------------------------------


def _finding(line: int, context: str, rule: str = "call-signature") -> Finding:
    return Finding(rule, rule, "error", "pkg/a.py", line, 1, "host.f", "msg", context=context)


def test_triage_matches_by_fingerprint_not_line():
    a, b = _finding(3, "f(x=1)"), _finding(9, "g()")
    entry = Accepted(fingerprint=_finding(40, "  f(x=1)  ").fingerprint)
    split = triage([a, b], [entry, Accepted(fingerprint="gone", rule="call-signature")])
    assert split.reported == [b]
    assert split.accepted == [(a, entry)]
    assert [e.fingerprint for e in split.stale] == ["gone"]
    assert triage([a], [Accepted("gone", rule="x")], disabled={"x"}).stale == []


@given(st.text())
def test_toml_strings_round_trip(text: str):
    assert tomllib.loads(f"v = {toml_string(text)}")["v"] == text


def test_toml_string_of_a_lone_surrogate():
    text = "a\udcff"  # an undecodable byte read with surrogateescape
    assert tomllib.loads("v = " + toml_string(text))["v"] == "a\ufffd"


def test_load_accepted_of_a_missing_file(tmp_path: Path):
    with pytest.raises(UsageError, match="cannot read"):
        load_accepted(tmp_path / "nope.toml")
