"""Witnesses on real releases: every finding of the real-package scans verified on the real
baseline and target, in managed environments; the reviewed verdicts are in
``tests/real/witness.toml`` (which findings cannot be shown without the workload, and why).
No finding of any of them may be refuted: a refuted finding is a false report, a bug."""

from __future__ import annotations

from pathlib import Path

import pytest

from driftcheck.compat import tomllib
from driftcheck.pipeline import scan
from driftcheck.witness.verify import verify_result

ROOT = Path(__file__).resolve().parents[2]
PLAN = tomllib.loads((ROOT / "tests" / "real" / "witness.toml").read_text())["scan"]
CLIENTS = ROOT / "fixtures" / "clients" / "real"


def _client(name: str) -> str:
    return str(CLIENTS / name) if (CLIENTS / name).is_dir() else name


def _marks(entry: dict) -> list:
    marks = [pytest.mark.network, pytest.mark.slow]
    if entry["against"].startswith("vllm"):
        marks.append(pytest.mark.probe)  # the probe's vLLM environments, built by .ci/run
    return marks


@pytest.mark.parametrize(
    "entry",
    [pytest.param(e, id=f"{e['client']}-{e['against']}", marks=_marks(e)) for e in PLAN],
)
def test_the_witnesses_confirm_every_finding_they_can_show(entry: dict) -> None:
    scanned = scan(_client(entry["client"]), entry["against"], baseline=entry.get("baseline"))
    if entry.get("target_only"):
        scanned.baseline_release = None  # no environment for the pin: the target's witnesses only
    result = verify_result(scanned)
    assert not result.refuted, [
        (f.file, f.line, f.verification.reason) for f in result.refuted if f.verification
    ]
    expected = {(u["file"], u["line"], u["rule"]): u["why"] for u in entry.get("unverifiable", [])}
    got = {
        (f.file, f.line, f.rule): f.verification.reason
        for f in result.findings
        if f.verification is not None and f.verification.status != "confirmed"
    }
    assert set(got) == set(expected), sorted(set(got) ^ set(expected))
    for key, reason in got.items():
        assert expected[key] in reason, (key, reason)
    # Two findings may share a place and a rule (two attributes on one line): count findings.
    listed = [f for f in result.findings if (f.file, f.line, f.rule) in expected]
    assert result.verification["confirmed"] == len(result.findings) - len(listed)
    print(entry["client"], entry["against"], result.verification)
