"""Rules: the meta-test (ids, structure, negatives), rule sets (the built-in rules and a user's
folders), and every case of every rule.

Cases run against the real host releases named in each rule's ``[test]`` table (fetched into the
cache), like Fixit's generic rule test: an invalid case gives exactly one finding of its rule, a
valid one none, and the code after the fix parses and re-scans clean.
"""

from __future__ import annotations

import json
from pathlib import Path

import libcst as cst
import pytest
from conftest import assert_one_error_line, read_markers, run_cli

from driftcheck.fixes.patches import plan
from driftcheck.pipeline import scan
from driftcheck.rules import RuleError, RulesMissing, load_rule, load_rules, rule_problems

#: The built-in rules: the repository's ``rules/`` folder, shipped as package data.
RULES = load_rules()
#: The files of that folder, ``<host>/<rule-id>.toml``.
RULES_FOLDER = Path(__file__).resolve().parents[2] / "rules"
RULE_FILES = sorted(RULES_FOLDER.glob("*/*.toml"))
ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"


def test_rules_exist_and_load():
    assert RULES, f"no built-in rules (the rule files are under {RULES_FOLDER})"
    assert len({r.id for r in RULES}) == len(RULES)


def test_the_built_in_rules_are_the_rule_files_of_the_repository():
    assert RULE_FILES
    assert RULES.ids == {p.stem for p in RULE_FILES}


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.stem)
def test_rule_structure(path: Path):
    rule = load_rule(path)
    assert rule.path.stem == rule.id
    assert rule.path.parent.name == rule.host
    assert rule_problems(rule) == []
    assert RULES.get(rule.id) is not None


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


# -- rule sets ----------------------------------------------------------------------------------

MY_RULE = """id = "my-rule"
host = "vllm"
versions = ">=0.16"
kind = "deprecated"
message = "m"
references = ["r"]
[match]
symbol = "vllm.x.y"
"""


def _folder(root: Path, files: dict[str, str]) -> Path:
    """A rule folder holding ``files`` (``<host>/<rule-id>.toml`` → text)."""
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.mark.parametrize("package", ["driftcheck.fixes", "driftcheck.no_such_package"])
def test_broken_built_in_rules_are_an_error_not_no_rules(
    monkeypatch: pytest.MonkeyPatch, package: str
):
    """A package without rule files (or none at all) is a broken installation."""
    monkeypatch.setattr("driftcheck.rules.ruleset.BUILTIN_PACKAGE", package)
    with pytest.raises(RulesMissing, match="reinstall driftcheck"):
        load_rules()
    assert len(load_rules(builtin=False)) == 0  # only the built-in rules are needed


def test_broken_built_in_rules_fail_the_cli_with_one_line(monkeypatch: pytest.MonkeyPatch):
    """``run_cli`` runs in-process, so the monkeypatched package is the one the CLI reads."""
    monkeypatch.setattr("driftcheck.rules.ruleset.BUILTIN_PACKAGE", "driftcheck.fixes")
    assert_one_error_line(run_cli("rules", "list"), "built-in rules", "reinstall driftcheck")


def test_a_rule_id_defined_twice_is_an_error(tmp_path: Path):
    """A user's rule cannot silently replace a built-in one."""
    builtin = RULES_FOLDER / "vllm" / "execute-model-sample-tokens.toml"
    text = builtin.read_text()
    folder = _folder(tmp_path / "mine", {"vllm/execute-model-sample-tokens.toml": text})
    with pytest.raises(RuleError, match="'execute-model-sample-tokens' is defined twice"):
        load_rules(folder)
    assert load_rules(folder, builtin=False).ids == {"execute-model-sample-tokens"}


def test_a_missing_rule_folder_is_an_error(tmp_path: Path):
    with pytest.raises(RuleError, match="does not exist"):
        load_rules(tmp_path / "nope")


def test_a_user_folder_extends_the_built_in_rules(tmp_path: Path):
    folder = _folder(tmp_path / "mine", {"vllm/my-rule.toml": MY_RULE})
    extended = load_rules(folder)
    assert extended.ids == RULES.ids | {"my-rule"}
    assert extended.get("my-rule").path == folder / "vllm" / "my-rule.toml"
    assert extended.digest != RULES.digest  # cached analyses are keyed by the rules
    assert load_rules(folder, builtin=False).ids == {"my-rule"}
    assert extended.without({"my-rule"}).ids == RULES.ids

    listed = run_cli("rules", "list", "--rules", str(folder))
    assert listed.exit_code == 0, listed.stderr
    assert "my-rule" in listed.stdout and "execute-model-sample-tokens" in listed.stdout
    assert "my-rule" not in run_cli("rules", "list").stdout
    shown = run_cli("rules", "show", "my-rule", "--rules", str(folder))
    assert shown.exit_code == 0, shown.stderr
    assert str(folder / "vllm" / "my-rule.toml") in shown.stdout


def test_disabling_a_rule_keeps_the_general_finding_at_its_place():
    """protohost's ``run-then-finish`` rule reports the same call-protocol drift that the
    built-in check mines from the host's raise-guard, at the same call: the mined finding
    merges into the rule's. ``--disable run-then-finish`` drops the rule's finding, never the
    general ``call-protocol`` one."""
    host = FIXTURES / "hosts" / "protohost"
    client = FIXTURES / "clients" / "protoclient"
    _, file, line = read_markers(client / "protoclient", client)["run_without_finish"]
    rules = load_rules(FIXTURES / "rules", FIXTURES / "fix_rules", builtin=False)

    def at_the_call(**kwargs: object) -> list[tuple[str, str]]:
        result = scan(
            str(client),
            against=str(host / "2.0"),
            baseline=str(host / "1.0"),
            host="protohost",
            rules=rules,
            **kwargs,
        )
        return [(f.rule, f.kind) for f in result.findings if (f.file, f.line) == (file, line)]

    assert at_the_call() == [("run-then-finish", "call-protocol")]  # merged into the rule's
    assert at_the_call(disable={"run-then-finish"}) == [("call-protocol", "call-protocol")]
    assert at_the_call(disable={"call-protocol"}) == []  # the kind drops both

    # The same through the CLI, the rule folders beside the built-in rules.
    result = run_cli(
        "scan", str(client), "--against", str(host / "2.0"), "--baseline", str(host / "1.0"),
        "--host", "protohost", "--rules", str(FIXTURES / "rules"),
        "--rules", str(FIXTURES / "fix_rules"), "--disable", "run-then-finish",
        "--format", "json", "--quiet",
    )  # fmt: skip
    assert result.exit_code == 1, result.stderr
    found = json.loads(result.stdout)["findings"]
    assert [f["rule"] for f in found if (f["file"], f["line"]) == (file, line)] == ["call-protocol"]


_SWITCH_HOST = """
import os


class BlockCache:
    num_blocks = 16


class PagedCache:
    page_size = 4


class Runner:
    def __init__(self):
        if os.getenv("MHOST_PAGED", "{default}") != "1":
            self.cache = BlockCache()
        else:
            self.cache = PagedCache()
"""
_MINED_RULE = """
id = "paged-cache-blocks"
host = "mhost"
versions = ">=2.0"
kind = "behaviour-change"
severity = "error"
message = "{receiver}.num_blocks: the paged cache has none; count pages instead"
references = ["tests/rules/test_rules.py"]

[conditions]
mined = "implementation-swap"

[match]
symbol = "mhost.runner.BlockCache.num_blocks"
use = "attribute"
"""


def test_a_mined_rule_reports_only_where_its_check_does(tmp_path: Path):
    """A rule reduced to its words and severity (``mined = "implementation-swap"``) keeps its
    finding where the check finds the switch's default flipped, and drops it where the check
    is quiet (the default is the same on both releases)."""

    def host(version: str, default: str) -> Path:
        root = tmp_path / f"{default}-{version}"
        if root.exists():
            return root
        (root / "mhost").mkdir(parents=True)
        (root / "mhost" / "__init__.py").write_text("")
        (root / "mhost" / "runner.py").write_text(_SWITCH_HOST.replace("{default}", default))
        dist = root / f"mhost-{version}.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: mhost\nVersion: {version}\n")
        (dist / "top_level.txt").write_text("mhost\n")
        return root

    client = tmp_path / "client" / "mclient"
    client.mkdir(parents=True)
    (client / "__init__.py").write_text("")
    (client / "mod.py").write_text(
        "from mhost.runner import Runner\n\n\ndef blocks(runner: Runner):\n"
        "    return runner.cache.num_blocks\n"
    )
    (tmp_path / "rules" / "mhost").mkdir(parents=True)
    (tmp_path / "rules" / "mhost" / "paged-cache-blocks.toml").write_text(_MINED_RULE)
    rules = load_rules(tmp_path / "rules", builtin=False)

    def found(base: str, target: str) -> list[tuple[str, str]]:
        result = scan(
            str(client), str(host("2.0", target)), baseline=str(host("1.0", base)),
            host="mhost", rules=rules,
        )  # fmt: skip
        return [(f.rule, f.severity) for f in result.findings]

    assert found("0", "1") == [("paged-cache-blocks", "error")]  # merged into the rule's
    assert found("1", "1") == []  # the check is quiet: so is the rule


def _write_case(root: Path, code: str) -> Path:
    pkg = root / "case"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text(code)
    return pkg


def _scan_case(rule, code: str, tmp_path: Path, model: str | None = None):
    pkg = _write_case(tmp_path, code)
    return scan(
        str(pkg),
        against=f"{rule.host}=={rule.test['target']}",
        baseline=rule.test["baseline"],
        rules=RULES,
        model=str(ROOT / model) if model and (ROOT / model).exists() else model,
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
    result = _scan_case(rule, case.code, tmp_path, case.model)
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
