"""Every built-in check's own cases, run by one generic test (Fixit's and cargo-semver-checks'
way; the rules' ``[[cases]]`` do the same).

A check module ``driftcheck/checks/<name>.py`` keeps its cases in
``driftcheck/checks/cases/<name>.toml``. Each ``[[cases]]`` entry is a host package
``casehost`` on two releases (``[cases.baseline]`` and ``[cases.target]``; only a target: scanned
without a baseline; file path under the
package -> source; without ``target`` the host is the same on both), a client module
(``client``, written as ``caseclient/mod.py``) and the findings the scan must give, exactly
(``expect``: ``check`` id, ``line`` in the client, and optionally a ``message`` fragment,
``severity``, ``symbol``, ``fix`` (the fix's safety, ``none`` for no fix) or ``fix_says`` (a
fragment of the fix's description)). An empty ``expect`` is a near miss: the scan must stay quiet. A
case may add rule files (``[cases.rules]``: rule id -> TOML, for binding rules) and a model
config (``model``: the ``config.json`` text) for checks that need them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from importlib.resources import files
from pathlib import Path

import pytest

from driftcheck.compat import tomllib
from driftcheck.findings import Finding
from driftcheck.pipeline import scan
from driftcheck.registry import CHECK_IDS
from driftcheck.rules import load_rules

HOST = "casehost"
CLIENT = "caseclient"
CLIENT_FILE = f"{CLIENT}/mod.py"
#: Case files: the package data beside the check modules.
CASES_FOLDER = files("driftcheck.checks") / "cases"
#: Keys a case may carry (a typo in a case file fails, never silently drops a part of it).
CASE_KEYS = {"name", "note", "client", "expect", "baseline", "target", "rules", "model"}
EXPECT_KEYS = {"check", "line", "message", "severity", "symbol", "fix", "fix_says"}


@dataclass(frozen=True)
class Expected:
    """One finding a case must give."""

    check: str
    line: int
    message: str = ""
    severity: str = ""
    symbol: str = ""
    #: The fix's safety (``safe``, ``unsafe``, ``manual``; ``none``: no fix) and a fragment of
    #: what it says.
    fix: str = ""
    fix_says: str = ""


@dataclass(frozen=True)
class CheckCase:
    """A host on two releases, a client of it, and what the scan must report."""

    module: str
    name: str
    client: str
    #: None: the case is scanned without a baseline (``--baseline none``): only ``target``.
    baseline: dict[str, str] | None
    target: dict[str, str]
    expect: tuple[Expected, ...] = ()
    note: str = ""
    rules: dict[str, str] = field(default_factory=dict)
    model: str | None = None

    @property
    def positive(self) -> bool:
        return bool(self.expect)


def load_cases(module: str) -> list[CheckCase]:
    """The cases of one check module (``missing_symbol`` reads ``cases/missing_symbol.toml``)."""
    data = tomllib.loads((CASES_FOLDER / f"{module}.toml").read_text())
    assert set(data) == {"cases"}, f"{module}.toml: only [[cases]] belong in a case file"
    out = []
    for raw in data["cases"]:
        assert set(raw) <= CASE_KEYS, (module, raw.get("name"), set(raw) - CASE_KEYS)
        expect = []
        for e in raw.get("expect", []):
            assert set(e) <= EXPECT_KEYS, (module, raw["name"], set(e) - EXPECT_KEYS)
            expect.append(Expected(**e))
        out.append(
            CheckCase(
                module=module,
                name=raw["name"],
                client=raw["client"],
                baseline=dict(raw["baseline"]) if "baseline" in raw else None,
                # A host that is the same on both releases (served-model) gives only one; a
                # case without a baseline only the target.
                target=dict(raw.get("target", raw.get("baseline", {}))),
                expect=tuple(expect),
                note=raw.get("note", ""),
                rules=dict(raw.get("rules", {})),
                model=raw.get("model"),
            )
        )
    return out


def case_modules() -> list[str]:
    """The module names that have a case file."""
    return sorted(
        p.name.removesuffix(".toml") for p in CASES_FOLDER.iterdir() if p.name.endswith(".toml")
    )


def _write(root: Path, tree: dict[str, str]) -> Path:
    for rel, text in tree.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _host(root: Path, version: str, sources: dict[str, str]) -> Path:
    """``casehost`` at ``version``: its package files, and the metadata that names the release."""
    tree = {f"{HOST}/__init__.py": ""}
    tree |= {f"{HOST}/{rel}": text for rel, text in sources.items()}
    dist = f"{HOST}-{version}.dist-info"
    tree[f"{dist}/METADATA"] = f"Metadata-Version: 2.1\nName: {HOST}\nVersion: {version}\n"
    tree[f"{dist}/top_level.txt"] = f"{HOST}\n"
    return _write(root / version, tree)


def scan_case(case: CheckCase, root: Path) -> list[Finding]:
    """Write the case to folders under ``root`` and scan its client, baseline 1.0 (or none),
    target 2.0."""
    base = _host(root, "1.0", case.baseline) if case.baseline is not None else "none"
    target = _host(root, "2.0", case.target)
    client = _write(root / "client", {f"{CLIENT}/__init__.py": "", CLIENT_FILE: case.client})
    rules_folder = _write(
        root / "rules", {f"{HOST}/{rule_id}.toml": text for rule_id, text in case.rules.items()}
    )
    rules_folder.mkdir(exist_ok=True)
    model = None
    if case.model is not None:
        model = str(_write(root / "model", {"config.json": case.model}))
    result = scan(
        str(client / CLIENT),
        str(target),
        baseline=str(base),
        host=HOST,
        rules=load_rules(rules_folder, builtin=False),
        model=model,
    )
    return result.findings


def _shown(findings: list[Finding]) -> list[str]:
    return [f"{f.rule} {f.file}:{f.line} [{f.severity}] {f.symbol}: {f.message}" for f in findings]


def check_case(case: CheckCase, findings: list[Finding]) -> None:
    """The case's findings are exactly the expected ones (id, file and line), each saying what
    its expectation says."""
    got = sorted((f.rule, f.file, f.line) for f in findings)
    want = sorted((e.check, CLIENT_FILE, e.line) for e in case.expect)
    assert got == want, _shown(findings)
    by_place = {(f.rule, f.line): f for f in findings}
    for e in case.expect:
        f = by_place[(e.check, e.line)]
        assert e.message in f.message, (e.message, f.message)
        assert e.severity in ("", f.severity), (e.severity, f.severity)
        assert e.symbol in ("", f.symbol), (e.symbol, f.symbol)
        safety = f.fix.safety.value if f.fix is not None else "none"
        assert e.fix in ("", safety), (e.fix, safety, f.fix)
        assert e.fix_says in (f.fix.description if f.fix else ""), (e.fix_says, f.fix)


CASES = [
    pytest.param(case, id=f"{module}-{case.name}")
    for module in case_modules()
    for case in load_cases(module)
]


@pytest.mark.parametrize("case", CASES)
def test_check_case(case: CheckCase, tmp_path: Path):
    findings = scan_case(case, tmp_path)
    check_case(case, findings)
    # The comparison is no formality: the case with its expectation changed fails.
    for wrong in _changed_expectations(case):
        with pytest.raises(AssertionError):
            check_case(replace(case, expect=wrong), findings)


def _changed_expectations(case: CheckCase) -> list[tuple[Expected, ...]]:
    """The case's expectation with one thing wrong: another line, another id, a message it
    does not say, a finding left out, or (for a near miss) a finding it does not give."""
    other_id = next(i for i in sorted(CHECK_IDS) if i not in {e.check for e in case.expect})
    if not case.positive:
        return [(Expected(other_id, 1),)]
    first, rest = case.expect[0], case.expect[1:]
    wrong_fix = [(replace(first, fix="none" if first.fix != "none" else "safe"), *rest)]
    return [
        *(wrong_fix if first.fix else []),
        (replace(first, line=first.line + 1), *rest),
        (replace(first, check=other_id), *rest),
        (replace(first, message="words no finding says"), *rest),
        rest,
    ]


# -- the meta-tests ------------------------------------------------------------------------------


def test_every_check_id_has_a_positive_and_a_negative_case():
    """Each built-in check's cases live in the file of its module; every id is shown firing
    and shown staying quiet on a near miss."""
    positive: dict[str, int] = {}
    negative: dict[str, int] = {}
    for module in case_modules():
        ids = {c.id for c in CHECK_IDS.values() if c.module == f"driftcheck.checks.{module}"}
        assert ids, f"cases/{module}.toml belongs to no built-in check module"
        for case in load_cases(module):
            _named(case, ids)
            for e in case.expect:
                assert e.check in ids, f"{module}.toml {case.name}: {e.check} is not its check"
                positive[e.check] = positive.get(e.check, 0) + 1
            if not case.positive:
                for check_id in _named(case, ids):
                    negative[check_id] = negative.get(check_id, 0) + 1
    assert sorted(set(CHECK_IDS) - set(positive)) == []
    assert sorted(set(CHECK_IDS) - set(negative)) == []


def _named(case: CheckCase, ids: set[str]) -> set[str]:
    """The id a case is about: the one its name starts with (``<check-id>-<what>``)."""
    named = {i for i in ids if case.name.startswith(f"{i}-")}
    assert len(named) == 1, f"{case.module}.toml: {case.name} must start with one of {sorted(ids)}"
    return named


def test_case_names_are_unique_per_module():
    for module in case_modules():
        names = [c.name for c in load_cases(module)]
        assert len(names) == len(set(names)), module
