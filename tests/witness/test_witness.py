"""Witnesses (--verify) on our own fixture host: each finding's use performed for real, in a
subprocess of an isolated interpreter, on both releases."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from driftcheck.cli import main
from driftcheck.pipeline import scan
from driftcheck.witness.envs import WitnessEnv
from driftcheck.witness.programs import Program, rewritten, verdict
from driftcheck.witness.verify import run_batch, verify_result

ROOT = Path(__file__).resolve().parents[2]
HOST = ROOT / "fixtures" / "hosts" / "witnesshost"
CLIENT = ROOT / "fixtures" / "clients" / "witnessclient"
ARGS = ["--against", str(HOST / "2.0"), "--baseline", str(HOST / "1.0")]


def _marked() -> dict[tuple[str, int], str]:
    out = {}
    for path in sorted(CLIENT.rglob("*.py")):
        rel = path.relative_to(CLIENT).as_posix()
        for n, line in enumerate(path.read_text().splitlines(), start=1):
            m = re.search(r"# drift: (\w+)", line)
            if m:
                out[(rel, n)] = m.group(1)
    return out


def _scan(**kw: object):
    return scan(str(CLIENT), str(HOST / "2.0"), baseline=str(HOST / "1.0"), **kw)


def test_every_finding_gets_the_verdict_its_line_names() -> None:
    result = verify_result(_scan())
    got = {(f.file, f.line): f.verification.status for f in [*result.findings, *result.refuted]}
    assert got == _marked()
    assert all(not f.refuted for f in result.findings)
    assert [f.file for f in result.refuted] == ["witnessclient/dynamic.py"]
    assert result.verification["refuted"] == 1
    counts = result.verification
    assert counts["confirmed"] + counts["unverifiable"] == len(result.findings)
    assert counts["unverifiable"] == sum(1 for v in _marked().values() if v == "unverifiable")


def test_a_refuted_finding_does_not_count_in_the_exit_code(tmp_path: Path) -> None:
    only = [
        *("--exclude", "witnessclient/jobs.py", "--exclude", "witnessclient/routes.py"),
        *("--exclude", "witnessclient/configs.py", "--exclude", "witnessclient/pools.py"),
    ]
    plain = CliRunner().invoke(main, ["scan", str(CLIENT), *ARGS, *only, "--format", "json"])
    assert plain.exit_code == 1, plain.output
    out = tmp_path / "r.json"
    verified = CliRunner().invoke(
        main, ["scan", str(CLIENT), *ARGS, *only, "--verify", "--format", "json", "-o", str(out)]
    )
    assert verified.exit_code == 0, verified.output
    data = json.loads(out.read_text())
    assert data["findings"] == []
    assert [f["verified"] for f in data["refuted"]] == ["refuted"]
    assert data["verification"]["refuted"] == 1
    text = CliRunner().invoke(main, ["scan", str(CLIENT), *ARGS, *only, "--verify"])
    assert "Refuted by their witnesses (1" in text.output
    assert "Witnesses: 0 confirmed, 1 refuted, 0 unverifiable" in text.output


def test_verify_reads_a_saved_report(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    CliRunner().invoke(main, ["scan", str(CLIENT), *ARGS, "--format", "json", "-o", str(report)])
    done = CliRunner().invoke(main, ["verify", str(report), *ARGS, "--format", "json"])
    assert done.exit_code == 1, done.output
    data = json.loads(done.output)
    got = {(f["file"], f["line"]): f["verified"] for f in [*data["findings"], *data["refuted"]]}
    assert got == _marked()
    sarif = CliRunner().invoke(main, ["verify", str(report), *ARGS, "--format", "sarif"])
    results = json.loads(sarif.output)["runs"][0]["results"]
    assert {r["properties"]["verified"] for r in results} == {
        "confirmed",
        "refuted",
        "unverifiable",
    }
    assert sum(1 for r in results if r.get("suppressions")) == 1


def test_a_report_that_is_not_one_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    done = CliRunner().invoke(main, ["verify", str(bad)])
    assert done.exit_code == 2
    assert "not a driftcheck JSON report" in done.output


def _run(*specs: dict) -> list[dict]:
    env = WitnessEnv("witnesshost 2.0", sys.executable, ("-I", "-S"), (str(HOST / "2.0"),))
    got = run_batch(env, ["witnesshost"], list(specs))
    return [got[json.dumps(s, sort_keys=True)] for s in specs]


def test_the_runner_performs_uses_the_way_python_runs_them() -> None:
    served, missing_dep, tomb, gone_mod, field, default, params, marker = _run(
        {"check": "warns", "path": "witnesshost.old_connect", "reads": 1},
        {"check": "resolve", "path": "witnesshost.extra.VALUE"},
        {"check": "resolve", "path": "witnesshost.tombstone"},
        {"check": "resolve", "path": "witnesshost.gone"},
        {"check": "member", "receiver": "witnesshost.core.Settings", "member": "cache"},
        {"check": "default", "path": "witnesshost.core.Settings", "field": "cache"},
        {"check": "params", "receiver": "witnesshost.core.Engine", "member": "step"},
        {"check": "marker", "path": "witnesshost.core.connect"},
    )
    assert served["outcome"] == "ok"
    assert served["data"]["warnings"][0][0] == "DeprecationWarning"
    assert missing_dep["outcome"] == "env"  # a dependency of the host, not the use, is missing
    assert "witnesshost_missing_dependency" in missing_dep["detail"]
    assert tomb == {"outcome": "fail", "detail": tomb["detail"]}
    assert "was removed" in tomb["detail"]
    assert gone_mod["outcome"] == "fail"
    assert field["outcome"] == "ok"
    assert default["data"] == {"value": "True"}
    assert params["data"]["params"] == [["batch", "positional_or_keyword", False]]
    assert marker["data"] == {"marker": ""}


def test_binding_a_class_checks_its_new_and_its_init() -> None:
    token = {"check": "bind", "path": "witnesshost.core.Token", "positional": 1}
    ok, keyword_only, init_refuses, init_takes = _run(
        {
            "check": "bind",
            "path": "witnesshost.core.Engine",
            "positional": 1,
            "keywords": ["block"],
        },
        {"check": "positions", "path": "witnesshost.core.connect", "positional": 2, "keywords": []},
        # __new__(*args, **kwargs) takes anything; the __init__ it is followed by does not.
        {**token, "keywords": ["loose"]},
        {**token, "keywords": ["strict"]},
    )
    assert ok == {"outcome": "ok", "data": {"names": ["settings"]}}
    assert keyword_only["outcome"] == "fail"
    assert init_refuses["outcome"] == "fail" and "loose" in init_refuses["detail"]
    assert init_takes == {"outcome": "ok", "data": {"names": ["value"]}}


def test_the_rewritten_use_of_a_fix_is_witnessed_too() -> None:
    result = _scan()
    shift = next(f for f in result.findings if f.rule == "positional-shift")
    spec = rewritten(shift)
    assert spec is not None and spec["keywords"] == ["timeout"] and spec["positional"] == 1
    (got,) = _run(spec)
    assert got["outcome"] == "ok"


@pytest.mark.parametrize("verify", [False, True])
def test_fix_keeps_what_the_rescan_bears_out(tmp_path: Path, verify: bool) -> None:
    import shutil

    from driftcheck.fixes.run import fix

    copy = tmp_path / "client"
    shutil.copytree(CLIENT, copy)
    done = fix(str(copy), str(HOST / "2.0"), baseline=str(HOST / "1.0"), apply=True, verify=verify)
    applied = sorted(f.rule for ff in done.plan.files for f in ff.applied)
    # Passing the baseline's default is offered as safe once witnesses saw both defaults.
    witnessed = ["default-change", "default-change"] if verify else []
    mined = ["call-protocol", "host-migration"]  # pools.py: the host's own migration
    assert applied == sorted([*mined, *witnessed, "positional-shift"])
    assert done.proof is not None and done.proof.rescan is not None
    left = {(f.file, f.rule) for f in done.proof.rescan.findings}
    assert ("witnessclient/jobs.py", "positional-shift") not in left
    assert 'connect("db://", timeout=5)' in (copy / "witnessclient" / "jobs.py").read_text()
    # make() -> build(): the host names the move, but build() takes the argument as route=:
    # no drop-in, so the rename is offered as unsafe and a safe run leaves it.
    moved = [f for f in _scan().findings if f.file == "witnessclient/routes.py"]
    assert moved and all(f.fix is not None and f.fix.safety == "unsafe" for f in moved)
    assert "no parameter named 'regex'" in moved[0].fix.description
    assert "import make" in (copy / "witnessclient" / "routes.py").read_text()


def test_what_the_host_migrated_in_its_own_code_is_the_evidence_and_the_fix() -> None:
    result = _scan()
    by_line = {f.line: f for f in result.findings if f.file == "witnessclient/pools.py"}
    unwrap, follow = by_line[9], by_line[10]
    assert unwrap.rule == "host-migration" and unwrap.fix.codemod == "unwrap-result"
    assert {(e.version, e.note) for e in unwrap.evidence} == {
        ("1.0", "unwraps [0]"),
        ("2.0", "uses it whole"),
    }
    # The follow-up's argument is a variable at the host's call site; collect() takes None.
    assert follow.rule == "call-protocol" and dict(follow.fix.params) == {
        "method": "collect",
        "args": "None",
    }
    assert "witnesshost itself does (witnesshost/core.py:" in follow.fix.description
    assert follow.fix.safety == "safe"
    flush = by_line[11]
    assert (flush.rule, flush.severity) == ("host-migration", "warning")
    assert dict(flush.fix.params) == {"keyword": "drain", "value": "True"}
    assert flush.fix.safety == "unsafe"
    fetch = by_line[12]
    assert (fetch.rule, fetch.severity) == ("host-migration", "warning")
    assert "may now return None" in fetch.message
    assert {e.note for e in fetch.evidence} == {"no None test", "tests None"}


@pytest.mark.parametrize(
    ("was", "now", "status"),
    [
        ("True", "None", "unverifiable"),  # near miss: the host may read None as True
        ("None", "'auto'", "unverifiable"),
        ("<object object at 0x7f00aa>", "<object object at 0x7f00bb>", "unverifiable"),
        ("8", "8", "refuted"),
        ("False", "True", "confirmed"),
    ],
)
def test_a_confirmed_default_change_is_a_change_of_value(was: str, now: str, status: str) -> None:
    """Confirmed means the call now runs with another value, not only that the literal moved."""
    prog = Program("default", {"check": "default"}, {"check": "default"})
    got = verdict(
        None,  # type: ignore[arg-type]  # the default verdict reads only the two outcomes
        prog,
        {"outcome": "ok", "data": {"value": now}},
        {"outcome": "ok", "data": {"value": was}},
        versions=("2.0", "1.0"),
    )
    assert got.status == status, got.reason
