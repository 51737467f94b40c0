"""The codemods, ``fix_code``, the patch format and the patch snapshots of our own fixtures.

Each codemod's cases are data, ``tests/fixes/cases/<codemod>.toml``, run by one test
(``test_codemod_case``), django-upgrade style: first the code it must leave alone (it raises
``Decline`` with a reason), then the rewrites, as exact text before and after. ``at`` names the
text the finding points at (its first character is the finding's line and column, as the scan
reports them). Every rewrite must parse and compile. Tests that are no before/after pair stay
code here.

Known bugs are written as the behaviour we want and marked ``xfail(strict=True)``: when one is
fixed, its test passes and the strict marker makes the run fail until the marker is removed.

Patch snapshots live in ``tests/snapshots/<client>__<file>.patch``. ``DRIFTCHECK_UPDATE_SNAPSHOTS=1``
(re)writes them from the current output; review the diff of that folder like code. The snapshots of
``KNOWN_WRONG`` files hold the reviewed, correct patch, not the current output, and are not
overwritten.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import libcst as cst
import pytest
from conftest import need_tool

from driftcheck.compat import tomllib
from driftcheck.findings import Finding, Fix
from driftcheck.fixes.base import Decline
from driftcheck.fixes.codemods import CODEMODS
from driftcheck.fixes.patches import FileFix, FixPlan, fix_code, plan, unified_diff, write_patches
from driftcheck.pipeline import ScanResult, scan
from driftcheck.rules import Rule, RuleSet, load_rules, rule_problems

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SNAPSHOTS = Path(__file__).resolve().parents[1] / "snapshots"

# -- helpers ----------------------------------------------------------------------------------


def position(code: str, at: str) -> tuple[int, int]:
    """Line and 1-based column of the first occurrence of ``at`` (``at`` must be unique)."""
    assert code.count(at) == 1, f"{at!r} must occur once in the code"
    before = code[: code.index(at)]
    line = before.count("\n") + 1
    return line, len(before) - (before.rfind("\n") + 1) + 1


def finding(
    codemod: str,
    line: int,
    column: int,
    *,
    safety: str = "safe",
    file: str = "pkg/mod.py",
    **fix_params: str,
) -> Finding:
    """A finding whose fix runs ``codemod`` with ``fix_params`` at ``line``:``column``."""
    return Finding(
        rule=f"test-{codemod}",
        kind="call-signature",
        severity="error",
        file=file,
        line=line,
        column=column,
        symbol="host.symbol",
        message="drift",
        fix=Fix(safety, f"apply {codemod}", codemod, tuple(sorted(fix_params.items()))),
    )


def finding_at(codemod: str, code: str, at: str, **fix_params: str) -> Finding:
    return finding(codemod, *position(code, at), **fix_params)


def rewrite(codemod: str, code: str, at: str, **fix_params: str) -> str:
    return CODEMODS[codemod](code, [finding_at(codemod, code, at, **fix_params)])


def assert_valid_python(code: str) -> None:
    """libcst parses it and CPython compiles it (duplicate keywords and the like fail here)."""
    cst.parse_module(code)
    compile(code, "<fixed>", "exec")


def params(*args):
    """pytest.param rows with an id from the first element."""
    return [pytest.param(*row[1:], id=row[0]) for row in args]


#: Fix parameters the tests of several findings at once share (each codemod's own cases carry
#: theirs in their case file).
FOLLOW = {"method": "sample_tokens", "args": "None"}
MOVE = {"old": "pkg.core.helper", "new": "pkg.utils.helper"}
FAST = {"keyword": "fast_mode", "value": "False"}
DROP = {"keyword": "retries"}


def fix_all(code: str, *sites: tuple[str, dict[str, str]], codemod: str = "rename-import") -> str:
    """``fix_code`` with one finding per (text it points at, fix parameters); all must apply."""
    findings = [finding_at(codemod, code, at, **p) for at, p in sites]
    new, applied, declined = fix_code(code, findings)
    assert declined == [] and len(applied) == len(findings), declined
    assert_valid_python(new)
    return new


# -- the codemods' cases (tests/fixes/cases/<codemod>.toml) ------------------------------------

CASES_FOLDER = Path(__file__).resolve().parent / "cases"
CASE_KEYS = {"id", "note", "params", "at", "why", "sites", "before", "after"}


def _codemod_cases() -> list:
    """Every case of every codemod's case file, as pytest params ``<codemod>-<id>``."""
    out = []
    for path in sorted(CASES_FOLDER.glob("*.toml")):
        data = tomllib.loads(path.read_text())
        codemod = data["codemod"]
        assert path.stem == codemod, f"{path.name} holds the cases of {codemod}"
        for case in data["cases"]:
            assert set(case) <= CASE_KEYS, (path.name, case["id"], set(case) - CASE_KEYS)
            case = {"params": data["params"], **case}
            out.append(pytest.param(codemod, case, id=f"{codemod}-{case['id']}"))
    return out


CODEMOD_CASES = _codemod_cases()


@pytest.mark.parametrize(("codemod", "case"), CODEMOD_CASES)
def test_codemod_case(codemod: str, case: dict):
    """A case without ``after`` declines (with a reason that matches ``why``); one with it
    rewrites ``before`` to exactly ``after``, which parses and compiles. ``sites`` are several
    findings at once, through ``fix_code``, as a scan's findings go."""
    before, fix_params = case["before"], case["params"]
    if "after" not in case:
        with pytest.raises(Decline, match=case.get("why")):
            rewrite(codemod, before, case["at"], **fix_params)
    elif "sites" in case:
        sites = [(site["at"], site["params"]) for site in case["sites"]]
        assert fix_all(before, *sites, codemod=codemod) == case["after"]
    else:
        got = rewrite(codemod, before, case["at"], **fix_params)
        assert got == case["after"]
        assert_valid_python(got)


def test_every_codemod_has_cases_that_rewrite_and_cases_that_decline():
    """django-upgrade's rule: each codemod shows what it rewrites and what it leaves alone."""
    by_codemod: dict[str, set[bool]] = {}
    for p in CODEMOD_CASES:
        codemod, case = p.values
        by_codemod.setdefault(codemod, set()).add("after" in case)
    assert set(by_codemod) <= set(CODEMODS)
    declining = {c: kinds for c, kinds in by_codemod.items() if c != "positional-to-keyword"}
    assert all(kinds == {True, False} for kinds in declining.values()), by_codemod


# -- cases that are not a before/after pair ----------------------------------------------------

MULTI_LINE_IMPORT = """\
from pkg.core import (
    other,
    helper,
    third,
)

helper(other, third)
"""


def _imported(code: str) -> set[tuple[str, str, str | None]]:
    """(module, name, alias) of every from-import, wherever it is."""
    out = set()
    for node in cst.parse_module(code).body:
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                if isinstance(small, cst.ImportFrom) and not isinstance(
                    small.names, cst.ImportStar
                ):
                    module = cst.Module(body=[]).code_for_node(small.module)
                    for alias in small.names:
                        asname = alias.asname.name.value if alias.asname else None
                        out.add((module, alias.name.value, asname))
    return out


def test_rename_import_one_of_several_in_a_parenthesized_import():
    got = rewrite("rename-import", MULTI_LINE_IMPORT, "helper,", **MOVE)
    assert_valid_python(got)
    assert _imported(got) == {
        ("pkg.core", "other", None),
        ("pkg.core", "third", None),
        ("pkg.utils", "helper", None),
    }
    assert got.endswith("\nhelper(other, third)\n")


def test_rename_import_keeps_the_layout_of_a_parenthesized_import():
    got = rewrite("rename-import", MULTI_LINE_IMPORT, "helper,", **MOVE)
    assert got.startswith("from pkg.core import (\n    other,\n    third,\n)\n")


BLOCK = {"keyword": "block_size", "value": "{arg:vllm_config}.cache_config.block_size"}


@pytest.mark.parametrize("argument", ["a if b else c", "x or y", "-n", "lambda: c", "lambda: 1"])
def test_add_keyword_template_keeps_operator_precedence(argument: str):
    code = f"s = Scheduler(vllm_config={argument})\n"
    try:
        got = rewrite("add-keyword", code, "Scheduler", **BLOCK)
    except Decline:
        return
    assert f"block_size=({argument}).cache_config.block_size" in got


def test_rename_keyword_declines_a_keyword_already_passed():
    code = "connect('h', retries=5, attempts=3)\n"
    new, applied, declined = fix_code(
        code, [finding_at("rename-keyword", code, "connect", keyword="retries", new="attempts")]
    )
    assert (new, applied, len(declined)) == (code, [], 1)


def test_accept_kwargs_declines_a_name_clash():
    code = "def hook(self, _kwargs):\n    return _kwargs\n"
    new, applied, declined = fix_code(code, [finding_at("accept-kwargs", code, "hook")])
    assert (new, applied, len(declined)) == (code, [], 1)


# -- fix_code: several findings in one file ----------------------------------------------------

MANY = """\
from pkg.core import helper, RunConfig


def go(ex, s):
    ex.execute_model(s)
    c = RunConfig(batch_size=3)
    return helper(c)[0]
"""

MANY_FIXED = """\
from pkg.core import RunConfig
from pkg.utils import helper


def go(ex, s):
    ex.execute_model(s)
    ex.sample_tokens(None)
    c = RunConfig(batch_size=3, fast_mode=False)
    return helper(c)
"""


def _many_findings(code: str) -> list[Finding]:
    return [
        finding_at("rename-import", code, "helper,", **MOVE),
        finding_at("follow-up-call", code, "ex.execute", **FOLLOW),
        finding_at("add-keyword", code, "RunConfig(batch", **FAST),
        finding_at("unwrap-result", code, "helper(c)"),
    ]


def test_fix_code_applies_edits_bottom_up_and_the_import_move_last():
    findings = _many_findings(MANY)
    new, applied, declined = fix_code(MANY, findings)
    assert new == MANY_FIXED
    assert declined == []
    assert [f.fix.codemod for f in applied] == [
        "unwrap-result",
        "add-keyword",
        "follow-up-call",
        "rename-import",
    ]
    assert_valid_python(new)


def test_fix_code_order_of_findings_does_not_matter():
    findings = _many_findings(MANY)
    assert fix_code(MANY, findings[::-1])[0] == fix_code(MANY, findings)[0] == MANY_FIXED


def test_fix_code_two_edits_on_one_line():
    code = "def go(e):\n    return RunConfig(batch_size=3)[0], connect('h', retries=5)\n"
    new, applied, declined = fix_code(
        code,
        [
            finding_at("unwrap-result", code, "RunConfig"),
            finding_at("add-keyword", code, "RunConfig", **FAST),
            finding_at("remove-keyword", code, "connect", **DROP),
        ],
    )
    assert new == "def go(e):\n    return RunConfig(batch_size=3, fast_mode=False), connect('h')\n"
    assert len(applied) == 3 and declined == []


def test_fix_code_keeps_the_others_when_one_declines():
    code = "def go(ex, s):\n    x = 1 + ex.execute_model(s)\n    connect('h', retries=5)\n"
    follow = finding_at("follow-up-call", code, "ex.", **FOLLOW)
    drop = finding_at("remove-keyword", code, "connect", **DROP)
    new, applied, declined = fix_code(code, [follow, drop])
    assert new == "def go(ex, s):\n    x = 1 + ex.execute_model(s)\n    connect('h')\n"
    assert applied == [drop]
    assert [f for f, _ in declined] == [follow]
    assert "not the shape" in declined[0][1]


def test_fix_code_unknown_codemod_is_declined():
    code = "x = 1\n"
    f = finding("no-such-codemod", 1, 1)
    assert fix_code(code, [f]) == (code, [], [(f, "no codemod 'no-such-codemod'")])


def test_fix_code_import_below_a_line_adding_edit():
    code = (
        "def go(ex, s):\n    ex.execute_model(s)\n\n\n"
        "def later():\n    from pkg.core import helper\n\n    return helper(1)\n"
    )
    findings = [
        finding_at("follow-up-call", code, "ex.", **FOLLOW),
        finding_at("rename-import", code, "helper\n", **MOVE),
    ]
    _, applied, declined = fix_code(code, findings)
    assert declined == []
    assert len(applied) == 2


# -- plan --------------------------------------------------------------------------------------


def test_plan_sorts_findings_into_fixed_manual_and_skipped_unsafe():
    code = "connect('h', retries=5)\nbuild('w')\n"
    unsafe = finding_at("remove-keyword", code, "connect", safety="unsafe", **DROP)
    manual = finding("", 2, 1, safety="manual")
    no_fix = Finding("r", "missing-symbol", "error", "pkg/mod.py", 2, 1, "s", "m")
    elsewhere = finding("remove-keyword", 1, 1, file="pkg/gone.py", **DROP)
    texts = {"pkg/mod.py": code}

    p = plan([unsafe, manual, no_fix, elsewhere], texts)
    assert p.skipped_unsafe == [unsafe]
    assert p.manual == [manual, no_fix]
    assert p.pending == []  # elsewhere's file was not read: nothing to fix there

    p = plan([unsafe, manual, no_fix], texts, unsafe=True)
    assert [(ff.file, ff.new, ff.applied) for ff in p.pending] == [
        ("pkg/mod.py", "connect('h')\nbuild('w')\n", [unsafe])
    ]


# -- unified diffs apply with git apply and patch -p1 ------------------------------------------

APPLY_TOOLS = [
    pytest.param(["git", "apply", "--check"], ["git", "apply"], id="git-apply"),
    pytest.param(["patch", "-p1", "--dry-run"], ["patch", "-p1"], id="patch-p1"),
]

DIFF_INPUTS = params(
    ("many", MANY, _many_findings(MANY)),
    (
        "no-newline-at-end",
        "def g(ex, s):\n    ex.execute_model(s)",
        [finding("follow-up-call", 2, 5, **FOLLOW)],
    ),
    (
        "crlf",
        "def g(ex, s):\r\n    ex.execute_model(s)\r\n    return 1\r\n",
        [finding("follow-up-call", 2, 5, **FOLLOW)],
    ),
    (
        "non-ascii",
        "# café\ndef g(ex, s):\n    ex.execute_model(s)  # ünïcode\n",
        [finding("follow-up-call", 3, 5, **FOLLOW)],
    ),
)


def _run(cmd: list[str], cwd: Path, patch: bytes) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, input=patch, cwd=cwd, capture_output=True, check=False)


@pytest.mark.parametrize(("check", "apply"), APPLY_TOOLS)
@pytest.mark.parametrize(("old", "findings"), DIFF_INPUTS)
def test_unified_diff_applies(tmp_path: Path, check, apply, old: str, findings):
    need_tool(check[0])
    new, applied, declined = fix_code(old, findings)
    assert new != old and declined == []
    rel = "pkg/sub/mod.py"
    target = tmp_path / rel
    target.parent.mkdir(parents=True)
    target.write_bytes(old.encode())
    patch = unified_diff(rel, old, new).encode()
    assert patch.startswith(f"--- a/{rel}\n+++ b/{rel}\n".encode())
    done = _run(check, tmp_path, patch)
    assert done.returncode == 0, done.stderr.decode()
    assert target.read_bytes() == old.encode()  # a check changes nothing
    done = _run(apply, tmp_path, patch)
    assert done.returncode == 0, done.stderr.decode()
    assert target.read_bytes() == new.encode()
    assert sorted(p.name for p in target.parent.iterdir()) == ["mod.py"]  # no .orig / .rej


def test_unified_diff_of_identical_text_is_empty():
    assert unified_diff("a.py", "x = 1\n", "x = 1\n") == ""


def test_write_patches_one_per_file_and_all(tmp_path: Path):
    fixes = [
        FileFix("pkg/a.py", "x = 1\n", "x = 2\n"),
        FileFix("pkg/sub/b.py", "y = 1\n", "y = 1\n"),  # unchanged: no patch
        FileFix("pkg/c.py", "z = 1\n", "z = 3\n"),
    ]
    written = write_patches(FixPlan(fixes, [], []), tmp_path / "out")
    assert [p.name for p in written] == ["pkg__a.py.patch", "pkg__c.py.patch", "all.patch"]
    combined = (tmp_path / "out" / "all.patch").read_text()
    assert combined == fixes[0].patch() + fixes[2].patch()
    assert write_patches(FixPlan([fixes[1]], [], []), tmp_path / "none") == []
    assert not (tmp_path / "none").exists()  # nothing to patch: no folder made


# -- fix rules for the fixture hosts (fixtures/fix_rules) --------------------------------------

FIX_RULES = FIXTURES / "fix_rules"
HOSTS = FIXTURES / "hosts"


#: The fix rules alone (``load_rules`` reads only ``<host>/*.toml``: the README is no rule).
FIXTURE_FIX_RULES = load_rules(FIX_RULES, builtin=False)
#: ``fixtures/rules`` plus ``fixtures/fix_rules``: the rules the fixture clients are scanned with
#: (binding rules widen receiver inference). The built-in (vLLM) rules never apply to these hosts.
RULES_WITH_FIXES = load_rules(FIXTURES / "rules", FIX_RULES, builtin=False)
#: The same rules as CLI flags (beside the built-in ones).
RULES_WITH_FIXES_ARGS = ("--rules", str(FIXTURES / "rules"), "--rules", str(FIX_RULES))


def test_fix_rules_load():
    assert {r.id for r in FIXTURE_FIX_RULES} == {
        "engine-describe-rename",
        "load-items-unwrap",
        "run-then-finish",
    }
    assert (
        RULES_WITH_FIXES.ids
        == FIXTURE_FIX_RULES.ids | load_rules(FIXTURES / "rules", builtin=False).ids
    )


@pytest.mark.parametrize("rule", list(FIXTURE_FIX_RULES), ids=lambda r: r.id)
def test_fix_rule_structure(rule: Rule):
    assert rule.path.stem == rule.id
    assert rule.path.parent.name == rule.host
    assert rule_problems(rule) == []
    assert rule.fix is not None and rule.fix.safety == "safe"


def _scan_code(rule: Rule, code: str, root: Path, rules: RuleSet = RULES_WITH_FIXES) -> ScanResult:
    pkg = root / "case"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text(code)
    host = HOSTS / rule.host
    return scan(
        str(pkg),
        against=str(host / rule.test["target"]),
        baseline=str(host / rule.test["baseline"]),
        host=rule.host,
        rules=rules,
    )


FIX_RULE_CASES = [
    pytest.param(rule, case, id=f"{rule.id}-{i}-{case.kind}")
    for rule in FIXTURE_FIX_RULES
    for i, case in enumerate(rule.cases)
]


@pytest.mark.parametrize(("rule", "case"), FIX_RULE_CASES)
def test_fix_rule_case(rule: Rule, case, tmp_path: Path):
    result = _scan_code(rule, case.code, tmp_path)
    relevant = [f for f in result.findings if f.rule == rule.id]
    assert len(relevant) == (case.kind == "invalid"), [f.message for f in result.findings]
    if case.fixed:
        fix_plan = plan(relevant, result.client_texts)
        assert [ff.new for ff in fix_plan.pending] == [case.fixed]
        assert_valid_python(case.fixed)
        again = _scan_code(rule, case.fixed, tmp_path / "fixed")
        assert [f for f in again.findings if f.rule == rule.id] == []


# -- patch snapshots of the fixture clients ----------------------------------------------------

#: client → (host, snapshot files its fixes must produce)
SNAPSHOT_CLIENTS = {
    "miniclient": ("minihost", ["calls.py", "returns.py", "runner.py", "symbols.py"]),
    "protoclient": ("protohost", ["configs.py", "driver.py", "ext.py", "patching.py"]),
}

#: Snapshots of the correct patch that the current output does not match yet.
KNOWN_WRONG: dict[str, str] = {}


def _snapshot_path(client: str, rel: str) -> Path:
    return SNAPSHOTS / f"{client}__{rel.replace('/', '__')}.patch"


@pytest.fixture(scope="module")
def fixture_plans() -> dict[str, FixPlan]:
    plans = {}
    for client, (host, _) in SNAPSHOT_CLIENTS.items():
        result = scan(
            str(FIXTURES / "clients" / client),
            against=str(HOSTS / host / "2.0"),
            baseline=str(HOSTS / host / "1.0"),
            host=host,
            rules=RULES_WITH_FIXES,
        )
        plans[client] = plan(result.findings, result.client_texts, unsafe=True)
    return plans


@pytest.mark.parametrize("client", sorted(SNAPSHOT_CLIENTS))
def test_fixture_fixes_change_exactly_the_snapshot_files(fixture_plans, client: str):
    _, files = SNAPSHOT_CLIENTS[client]
    got = fixture_plans[client]
    assert [ff.file for ff in got.pending] == [f"{client}/{name}" for name in files]
    assert [d for ff in got.files for d in ff.declined] == []
    for ff in got.pending:
        assert_valid_python(ff.new)


SNAPSHOT_CASES = [
    pytest.param(
        client,
        f"{client}/{name}",
        id=f"{client}/{name}",
        marks=[pytest.mark.xfail(strict=True, reason=KNOWN_WRONG[f"{client}/{name}"])]
        if f"{client}/{name}" in KNOWN_WRONG
        else [],
    )
    for client, (_, names) in sorted(SNAPSHOT_CLIENTS.items())
    for name in names
]


@pytest.mark.parametrize(("client", "rel"), SNAPSHOT_CASES)
def test_patch_snapshot(fixture_plans, client: str, rel: str):
    [ff] = [ff for ff in fixture_plans[client].pending if ff.file == rel]
    path = _snapshot_path(client, rel)
    if os.environ.get("DRIFTCHECK_UPDATE_SNAPSHOTS") == "1":
        # Writing mode: a hand-reviewed correct patch of a known-wrong fix is never overwritten.
        if not (rel in KNOWN_WRONG and path.exists()):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(ff.patch())
        return
    assert path.exists(), f"no snapshot {path}; run with DRIFTCHECK_UPDATE_SNAPSHOTS=1"
    assert ff.patch() == path.read_text()


@pytest.mark.parametrize("client", sorted(SNAPSHOT_CLIENTS))
def test_snapshots_apply_to_the_fixture_client(tmp_path: Path, client: str):
    """The reviewed snapshots are real patches: they apply to a copy of the client."""
    need_tool("git")
    copy = tmp_path / client
    shutil.copytree(FIXTURES / "clients" / client, copy)
    for name in SNAPSHOT_CLIENTS[client][1]:
        patch = _snapshot_path(client, f"{client}/{name}").read_bytes()
        done = _run(["git", "apply", "-"], copy, patch)
        assert done.returncode == 0, done.stderr.decode()
        assert_valid_python((copy / client / name).read_text())


def test_a_follow_up_call_is_safe_only_where_the_result_is_not_read(tmp_path: Path):
    # The host's own callers show the bare form; ``out = ex.run(b)`` would get finish()'s
    # result instead of run()'s: the fix is offered, but not as safe.
    pkg = tmp_path / "readsclient"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "from protohost.executor import Executor\n\n\n"
        "def bare(ex: Executor, batch):\n"
        "    ex.run(batch)\n\n\n"
        "def reads(ex: Executor, batch):\n"
        "    out = ex.run(batch)\n"
        "    return out\n"
    )
    result = scan(
        str(tmp_path),
        against=str(HOSTS / "protohost" / "2.0"),
        baseline=str(HOSTS / "protohost" / "1.0"),
        host="protohost",
        rules=RULES_WITH_FIXES,
    )
    got = {f.line: f.fix.safety for f in result.findings if f.rule == "run-then-finish"}
    assert got == {5: "safe", 9: "unsafe"}
