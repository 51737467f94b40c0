"""Rules: the meta-test (ids, structure, negatives) and every case of every rule.

Cases run against the real host releases named in each rule's ``[test]`` table (fetched into the
cache), like Fixit's generic rule test: an invalid case gives exactly one finding of its rule, a
valid one none, and the code after the fix parses and re-scans clean.
"""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from driftcheck.fixes.patches import plan
from driftcheck.pipeline import scan
from driftcheck.rules import RuleError, load_rule, load_rules, rule_problems, rules_dir

RULES = load_rules()


def test_rules_exist_and_load():
    assert RULES, f"no rules under {rules_dir()}"
    assert len({r.id for r in RULES}) == len(RULES)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_rule_structure(rule):
    assert rule.path.stem == rule.id
    assert rule.path.parent.name == rule.host
    assert rule_problems(rule) == []


def test_meta_test_catches_a_wrong_id(tmp_path: Path):
    bad = tmp_path / "vllm" / "some-rule.toml"
    bad.parent.mkdir()
    bad.write_text('id = "other-name"\nhost = "vllm"\nversions = ">=1"\nkind = "deprecated"\n')
    with pytest.raises(RuleError, match="differs from the file name"):
        load_rule(bad)


def test_meta_test_catches_a_rule_without_negative_case(tmp_path: Path):
    path = tmp_path / "vllm" / "no-negative.toml"
    path.parent.mkdir()
    path.write_text(
        """id = "no-negative"
host = "vllm"
versions = ">=1"
kind = "deprecated"
message = "m"
references = ["r"]
[match]
symbol = "vllm.x.y"
[test]
baseline = "0.1"
target = "1.0"
[[cases]]
kind = "invalid"
code = "import vllm.x"
"""
    )
    rule = load_rule(path)
    assert rule_problems(rule) == ["no-negative: no valid (near-miss) case"]


def test_unknown_condition_is_rejected(tmp_path: Path):
    path = tmp_path / "vllm" / "odd.toml"
    path.parent.mkdir()
    path.write_text(
        'id = "odd"\nhost = "vllm"\nversions = ">=1"\nkind = "deprecated"\nmessage = "m"\n'
        '[match]\nsymbol = "vllm.x"\n[conditions]\nkeyword_presnet = "a"\n'
    )
    with pytest.raises(RuleError, match="keyword_presnet"):
        load_rule(path)


def _write_case(root: Path, code: str) -> Path:
    pkg = root / "case"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text(code)
    return pkg


def _scan_case(rule, code: str, tmp_path: Path):
    pkg = _write_case(tmp_path, code)
    return scan(
        str(pkg),
        against=f"{rule.host}=={rule.test['target']}",
        baseline=rule.test["baseline"],
    )


CASES = [
    pytest.param(rule, i, case, id=f"{rule.id}-{i}-{case.kind}")
    for rule in RULES
    for i, case in enumerate(rule.cases)
]


@pytest.mark.network
@pytest.mark.slow
@pytest.mark.parametrize(("rule", "index", "case"), CASES)
def test_rule_case(rule, index, case, tmp_path: Path):
    result = _scan_case(rule, case.code, tmp_path)
    if rule.kind == "binding":
        # A binding rule reports nothing itself: its invalid case shows a drift only it reveals.
        relevant = result.findings
    else:
        relevant = [f for f in result.findings if f.rule == rule.id]
    if case.kind == "valid":
        assert relevant == [], [f.message for f in relevant]
    else:
        assert len(relevant) == 1, [f.message for f in result.findings]
        assert relevant[0].evidence, "a finding must carry host evidence"
    if case.fixed:
        # Whether a rule can fix is shown by its cases: the fix must produce exactly the
        # expected code, which parses and re-scans clean.
        fix_plan = plan(relevant, result.client_texts, unsafe=True)
        assert [ff.new for ff in fix_plan.pending] == [case.fixed], fix_plan.files
        cst.parse_module(case.fixed)
        fixed = _scan_case(rule, case.fixed, tmp_path / "fixed")
        assert [f for f in fixed.findings if f.rule == rule.id] == []
