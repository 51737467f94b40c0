"""What a signature diff cannot see, on our own fixtures: protoclient against protohost 1.0 → 2.0.

Mechanisms: a call protocol mined from a host raise-guard (no rule), ``types.MethodType``
bindings, a client class the host mixes into its worker (named by a dotted string), method names
dispatched as strings, a config default that flipped (a rule), and an override the host now calls
with one more argument. Host knowledge the code does not show lives in fixture rules under
``fixtures/rules/protohost``; every scan here is given exactly those rules (no built-in ones).

As in ``test_checks.py``, a line that must be reported ends with ``# drift: <case>`` and a near
miss that must stay quiet with ``# ok: <case>``. A truth test runs every case against both host
versions in a subprocess, so the fixture cannot claim a drift the host does not really have.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import libcst as cst
import pytest
from conftest import read_markers

from driftcheck.findings import Finding
from driftcheck.pipeline import ScanResult, scan
from driftcheck.rules import Rule, RuleSet, load_rules, rule_problems
from driftcheck.sources.specs import parse_spec
from driftcheck.sources.trees import open_tree

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
HOST_V1 = FIXTURES / "hosts" / "protohost" / "1.0"
HOST_V2 = FIXTURES / "hosts" / "protohost" / "2.0"
CLIENT = FIXTURES / "clients" / "protoclient"
PACKAGE = CLIENT / "protoclient"
RULES = FIXTURES / "rules"
#: The fixture rules alone: the built-in (vLLM) rules never apply to protohost.
FIXTURE_RULES = load_rules(RULES, builtin=False)

#: case → (kind, rule id, host symbol, what the message must say, error on 2.0)
DRIFTS = {
    "run_without_finish": ("call-protocol", "call-protocol", "protohost.executor.Executor.run", "self.executor.finish(...)", "RuntimeError"),
    "method_type_constructor": ("attribute-missing", "attribute-missing", "protohost.model.Model.old_name", "'old_name'", "AttributeError"),
    "method_type_attribute": ("attribute-missing", "attribute-missing", "protohost.model.Model.old_name", "'old_name'", "AttributeError"),
    "extension_attribute": ("attribute-missing", "attribute-missing", "protohost.worker.Runner.gone_attr", "'gone_attr'", "AttributeError"),
    "dispatch_removed": ("string-ref", "string-ref", "protohost.worker.Worker.removed_method", '"removed_method"', "AttributeError"),
    "fast_mode_default": ("behaviour-change", "fast-mode-default", "protohost.config.RunConfig", "fast_mode", "ValueError"),
    "override_signature": ("override-signature", "override-signature", "protohost.hooks.Base.hook", "2 positional", "TypeError"),
}  # fmt: skip

#: Near misses: same behaviour on both host versions, nothing to report.
NEAR_MISSES = {
    "run_then_finish",
    "lookalike_receiver",
    "follow_up_predates_baseline",
    "method_type_client_object",
    "extension_not_named",
    "dispatch_to_extension",
    "dispatch_kept",
    "dispatch_lookalike",
    "fast_mode_explicit",
    "fast_mode_in_kwargs",
    "batch_size_default_unchanged",
    "override_takes_varargs",
}

#: Binding rule → the drift cases only it reveals.
REVEALED_BY = {
    "extension-mixin": {"extension_attribute", "method_type_attribute"},
    "rpc-dispatch": {"dispatch_removed"},
    "worker-model-type": {"method_type_attribute"},
}

#: Drift cases that come from drift rules (not mined from host code).
FROM_DRIFT_RULES = {"fast_mode_default"}
#: ... of which the checks mine some too, under another symbol: the default-change check finds
#: the flipped default (the rule adds the ValueError the host raises further on).
MINED_TOO = {"fast_mode_default": "protohost.config.RunConfig(fast_mode=)"}

MARKERS = read_markers(PACKAGE, CLIENT)


def _at(case: str) -> tuple[str, int]:
    _, file, line = MARKERS[case]
    return file, line


def _key(f: Finding) -> tuple[str, str, int, str]:
    return (f.kind, f.file, f.line, f.symbol)


def _expected(cases: set[str] | dict) -> set[tuple[str, str, int, str]]:
    return {(DRIFTS[c][0], *_at(c), DRIFTS[c][2]) for c in cases}


def _host_line(version: Path, rel: str, needle: str) -> int:
    """The 1-based line of the first line of a host file containing ``needle``."""
    lines = (version / rel).read_text().splitlines()
    return next(i for i, text in enumerate(lines, start=1) if needle in text)


def _scan(
    client: Path,
    against: Path = HOST_V2,
    baseline: Path | None = HOST_V1,
    rules: RuleSet = FIXTURE_RULES,
) -> ScanResult:
    return scan(
        str(client),
        against=str(against),
        baseline=str(baseline) if baseline else None,
        host="protohost",
        rules=rules,
    )


def _rules_without(tmp_path: Path, *rule_ids: str, extra: dict[str, str] | None = None) -> RuleSet:
    """The fixture rules without ``rule_ids``, plus ``extra`` rule files (written under
    ``tmp_path``)."""
    folders: list[Path] = [RULES]
    if extra:
        root = tmp_path / "extra-rules"
        (root / "protohost").mkdir(parents=True)
        for rule_id, text in extra.items():
            (root / "protohost" / f"{rule_id}.toml").write_text(text)
        folders.append(root)
    rules = load_rules(*folders, builtin=False).without(set(rule_ids))
    assert not rules.ids & set(rule_ids)
    return rules


@pytest.fixture(scope="module")
def drift() -> ScanResult:
    return _scan(CLIENT)


def _one(result: ScanResult, case: str) -> Finding:
    file, line = _at(case)
    here = [f for f in result.findings if (f.file, f.line) == (file, line)]
    assert len(here) == 1, [(f.kind, f.message) for f in here]
    return here[0]


# -- the fixture itself ---------------------------------------------------------------------------


def test_markers_match_the_tables():
    assert {c for c, (s, _, _) in MARKERS.items() if s == "drift"} == set(DRIFTS)
    assert {c for c, (s, _, _) in MARKERS.items() if s == "ok"} == NEAR_MISSES
    assert set().union(*REVEALED_BY.values()) <= set(DRIFTS)


_RUN_CASES = """
import importlib, inspect, json, pkgutil, sys, protoclient
cases = json.loads(sys.argv[1])
modules = [importlib.import_module("protoclient." + m.name)
           for m in pkgutil.iter_modules(protoclient.__path__)]
out = {}
for case in cases:
    funcs = [vars(m)[case] for m in modules if inspect.isfunction(vars(m).get(case))]
    funcs += [getattr(cls(), case) for m in modules for cls in vars(m).values()
              if inspect.isclass(cls) and cls.__module__ == m.__name__ and case in vars(cls)]
    if not funcs:
        out[case] = "no runnable function"
        continue
    try:
        funcs[0]()
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
        [sys.executable, "-c", _RUN_CASES, json.dumps(sorted(MARKERS))],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(proc.stdout)


def test_fixture_cases_really_break_on_2_0_only(tmp_path: Path):
    """Ground truth: each drift case works on 1.0 and raises on 2.0; each near miss works on both."""
    v1, v2 = _run_cases(HOST_V1, tmp_path), _run_cases(HOST_V2, tmp_path)
    assert v1 == dict.fromkeys(MARKERS, "ok")
    assert {c: e for c, e in v2.items() if e != "ok"} == {c: r[-1] for c, r in DRIFTS.items()}


def test_client_pins_the_baseline():
    assert open_tree(parse_spec(str(CLIENT))).metadata.pin_on("protohost") == "1.0"


# -- with a baseline ------------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(DRIFTS))
def test_drift_is_reported(drift: ScanResult, case: str):
    kind, rule, symbol, says, _ = DRIFTS[case]
    finding = _one(drift, case)
    assert (finding.kind, finding.rule, finding.symbol) == (kind, rule, symbol)
    assert says in finding.message
    assert "protohost 2.0" in finding.message
    assert {"1.0", "2.0"} <= {e.version for e in finding.evidence}


@pytest.mark.parametrize("case", sorted(NEAR_MISSES))
def test_near_miss_is_not_reported(drift: ScanResult, case: str):
    file, line = _at(case)
    assert [f.message for f in drift.findings if (f.file, f.line) == (file, line)] == []


#: Near misses that are host uses (quiet because nothing changed for them): case → (kind, symbol).
HOST_USE_NEAR_MISSES = {
    "run_then_finish": ("call", "protohost.executor.Executor.run"),
    "follow_up_predates_baseline": ("call", "protohost.executor.LegacyExecutor.run"),
    "dispatch_to_extension": ("string-ref", "protohost.executor.Executor.rpc"),
    "dispatch_kept": ("string-ref", "protohost.executor.Executor.rpc"),
    "fast_mode_explicit": ("call", "protohost.config.RunConfig"),
    "fast_mode_in_kwargs": ("call", "protohost.config.RunConfig"),
    "batch_size_default_unchanged": ("call", "protohost.config.RunConfig"),
    "override_takes_varargs": ("override", "protohost.hooks.Base.hook"),
}


@pytest.mark.parametrize("case", sorted(NEAR_MISSES))
def test_near_miss_is_near(drift: ScanResult, case: str):
    """A near miss that touches the host is seen as a host use; a lookalike is no host use."""
    file, line = _at(case)
    here = {(u.kind, u.symbol) for u in drift.uses if (u.file, u.line) == (file, line)}
    if case in HOST_USE_NEAR_MISSES:
        assert HOST_USE_NEAR_MISSES[case] in here
    else:
        assert here == set()


def test_exactly_the_drifts_are_reported(drift: ScanResult):
    assert {_key(f) for f in drift.findings} == _expected(DRIFTS)
    assert len(drift.findings) == len(DRIFTS)
    assert drift.skipped == []
    assert (drift.client_name, drift.baseline, drift.target) == ("protoclient", "1.0", "2.0")


@pytest.mark.parametrize("version", [HOST_V1, HOST_V2], ids=["1.0", "2.0"])
def test_scanning_against_the_baseline_itself_is_clean(version: Path):
    assert _scan(CLIENT, version, version).findings == []


# -- 1. call protocol, mined from the host's raise-guard -----------------------------------------


def test_call_protocol_cites_the_guard_and_the_follow_up(drift: ScanResult):
    finding = _one(drift, "run_without_finish")
    guard = _host_line(HOST_V2, "protohost/worker.py", "raise RuntimeError(")
    finish = _host_line(HOST_V2, "protohost/executor.py", "def finish(")
    run_v1 = _host_line(HOST_V1, "protohost/executor.py", "def run(")
    evidence = {(e.version, e.file, e.line, e.note) for e in finding.evidence}
    assert ("2.0", "protohost/worker.py", guard, "guard") in evidence
    assert ("2.0", "protohost/executor.py", finish, "Executor.finish") in evidence
    assert ("1.0", "protohost/executor.py", run_v1, "Executor.run") in evidence
    assert "finish() must be called after run() returns None." in finding.message
    assert finding.fix is not None and finding.fix.safety == "manual"


def test_call_protocol_needs_no_rule(tmp_path: Path):
    """With no rules at all, only the mined drifts remain (the protocol among them)."""
    empty = tmp_path / "no-rules"
    empty.mkdir()
    no_rules = load_rules(empty, builtin=False)
    assert len(no_rules) == 0
    result = _scan(CLIENT, rules=no_rules)
    needs_rules = FROM_DRIFT_RULES.union(*REVEALED_BY.values())
    mined = {(DRIFTS[c][0], *_at(c), symbol) for c, symbol in MINED_TOO.items()}
    assert {_key(f) for f in result.findings} == _expected(set(DRIFTS) - needs_rules) | mined


@pytest.fixture(scope="module")
def no_baseline() -> ScanResult:
    """The package alone (no dist-info, so no pin) against 2.0, without a baseline."""
    return _scan(PACKAGE, HOST_V2, None)


def test_without_baseline_what_cannot_work_is_still_reported(no_baseline: ScanResult):
    """A default change needs a baseline to compare with; every other drift cannot work on 2.0."""
    assert no_baseline.baseline is None
    assert _expected(set(DRIFTS) - FROM_DRIFT_RULES) <= {_key(f) for f in no_baseline.findings}


def test_without_baseline_a_protocol_the_receiver_never_reaches_is_quiet(
    no_baseline: ScanResult,
):
    file, line = _at("follow_up_predates_baseline")
    assert [f.message for f in no_baseline.findings if (f.file, f.line) == (file, line)] == []


# -- 2-4. bindings: MethodType, worker extensions, string dispatch -------------------------------


@pytest.mark.parametrize("rule_id", sorted(REVEALED_BY))
def test_binding_rule_reveals_its_drifts(tmp_path: Path, rule_id: str):
    """Without one binding rule exactly the drifts only it reveals go unseen (and nothing new)."""
    result = _scan(CLIENT, rules=_rules_without(tmp_path, rule_id))
    assert {_key(f) for f in result.findings} == _expected(set(DRIFTS) - REVEALED_BY[rule_id])


@pytest.mark.parametrize(
    ("case", "says"),
    [
        ("extension_attribute", "protoclient.ext.Ext is mixed into protohost.worker.Worker"),
        ("method_type_constructor", "types.MethodType"),
        ("method_type_attribute", "types.MethodType"),
    ],
)
def test_finding_says_how_the_receiver_was_found(drift: ScanResult, case: str, says: str):
    """The receiver's type comes from a binding, not from plain code: the message says which."""
    assert says in _one(drift, case).message


def test_dispatch_finding_cites_the_method_at_baseline(drift: ScanResult):
    finding = _one(drift, "dispatch_removed")
    removed = _host_line(HOST_V1, "protohost/worker.py", "def removed_method(")
    assert ("1.0", "protohost/worker.py", removed) in {
        (e.version, e.file, e.line) for e in finding.evidence
    }


# -- 5. a default that flipped (a drift rule) -----------------------------------------------------


def test_default_change_cites_the_default_in_both_versions(drift: ScanResult):
    finding = _one(drift, "fast_mode_default")
    v1 = _host_line(HOST_V1, "protohost/config.py", "fast_mode: bool")
    v2 = _host_line(HOST_V2, "protohost/config.py", "fast_mode: bool")
    evidence = {(e.version, e.file, e.line, e.note) for e in finding.evidence}
    assert ("1.0", "protohost/config.py", v1, "fast_mode = False") in evidence
    assert ("2.0", "protohost/config.py", v2, "fast_mode = True") in evidence
    assert finding.severity == "error"
    assert finding.fix is not None and finding.fix.codemod == "add-keyword"
    assert ("keyword", "fast_mode") in finding.fix.params


def _default_rule(rule_id: str, absent: str, changed: str) -> str:
    return f"""id = "{rule_id}"
host = "protohost"
versions = ">=2.0"
kind = "behaviour-change"
message = "RunConfig() without {absent}"
references = ["fixtures/hosts/protohost/2.0/protohost/config.py"]

[match]
symbol = "protohost.config.RunConfig"
use = "call"

[conditions]
keyword_absent = "{absent}"
default_changed = "{changed}"
"""


def test_a_default_that_did_not_change_is_not_reported(tmp_path: Path):
    """``batch_size``'s default is the same in both versions: a rule on it stays quiet, while a
    control rule with the same match on the flipped ``fast_mode`` fires at the same call."""
    extra = {
        "batch-size-default": _default_rule("batch-size-default", "batch_size", "batch_size"),
        "control-default": _default_rule("control-default", "batch_size", "fast_mode"),
    }
    rules = _rules_without(tmp_path, extra=extra)
    assert {"batch-size-default", "control-default"} <= rules.ids
    result = _scan(CLIENT, rules=rules)
    assert [f for f in result.findings if f.rule == "batch-size-default"] == []
    control = [(f.file, f.line) for f in result.findings if f.rule == "control-default"]
    assert control == [_at("batch_size_default_unchanged")]


# -- 6. an override the host now calls differently -----------------------------------------------


def test_override_signature_cites_the_host_method_in_both_versions(drift: ScanResult):
    finding = _one(drift, "override_signature")
    v1 = _host_line(HOST_V1, "protohost/hooks.py", "def hook(")
    v2 = _host_line(HOST_V2, "protohost/hooks.py", "def hook(")
    evidence = {(e.version, e.file, e.line) for e in finding.evidence}
    assert {("1.0", "protohost/hooks.py", v1), ("2.0", "protohost/hooks.py", v2)} <= evidence


# -- the fixture rules: structure and their own cases against the fixture host ------------------


def test_fixture_rules_load():
    assert {r.id for r in FIXTURE_RULES} == {"fast-mode-default", *REVEALED_BY}


@pytest.mark.parametrize("rule", list(FIXTURE_RULES), ids=lambda r: r.id)
def test_fixture_rule_structure(rule: Rule):
    assert rule.path.stem == rule.id
    assert rule.path.parent.name == rule.host == "protohost"
    assert rule_problems(rule) == []
    assert (rule.test["baseline"], rule.test["target"]) == ("1.0", "2.0")


_HOSTS = {"1.0": HOST_V1, "2.0": HOST_V2}


def _scan_case(rule: Rule, code: str, root: Path, rules: RuleSet = FIXTURE_RULES) -> ScanResult:
    pkg = root / "case"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text(code)
    return _scan(pkg, _HOSTS[rule.test["target"]], _HOSTS[rule.test["baseline"]], rules)


CASES = [
    pytest.param(rule, i, case, id=f"{rule.id}-{i}-{case.kind}")
    for rule in FIXTURE_RULES
    for i, case in enumerate(rule.cases)
]


@pytest.mark.parametrize(("rule", "index", "case"), CASES)
def test_fixture_rule_case(rule: Rule, index: int, case, tmp_path: Path):
    result = _scan_case(rule, case.code, tmp_path)
    if rule.kind == "binding":
        relevant = result.findings  # a binding reveals drifts; it reports nothing itself
    else:
        relevant = [f for f in result.findings if f.rule == rule.id]
    if case.kind == "valid":
        assert relevant == [], [f.message for f in relevant]
    else:
        assert len(relevant) == 1, [f.message for f in result.findings]
        assert relevant[0].evidence, "a finding must carry host evidence"
    if case.fixed:
        cst.parse_module(case.fixed)
        fixed = _scan_case(rule, case.fixed, tmp_path / "fixed")
        assert [f for f in fixed.findings if f.rule == rule.id] == []


BINDING_INVALID = [
    pytest.param(rule, case, id=f"{rule.id}-{i}")
    for rule in FIXTURE_RULES
    if rule.kind == "binding"
    for i, case in enumerate(rule.cases)
    if case.kind == "invalid"
]


@pytest.mark.parametrize(("rule", "case"), BINDING_INVALID)
def test_binding_rule_invalid_case_is_quiet_without_it(tmp_path: Path, rule: Rule, case):
    without = _rules_without(tmp_path, rule.id)
    assert _scan_case(rule, case.code, tmp_path / "scan", without).findings == []
