"""Replays the scans of real vLLM clients whose findings were reviewed by hand.

``tests/real/verdicts/<client>.toml`` holds, per scan, every error and warning driftcheck
reported, each judged against vLLM's source on both sides: ``real`` findings must still be
reported, ``false`` ones that were fixed (``open = false``) must never come back, and every error
or warning reported must have a verdict (a new one is reviewed before it lands).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from driftcheck.compat import tomllib
from driftcheck.pipeline import scan

pytestmark = [pytest.mark.network, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
VERDICTS = ROOT / "tests" / "real" / "verdicts"
SCANS = [
    pytest.param(
        s,
        id=f"{s['client']}-{s['against'].split('==')[1]}"
        + (f"-{Path(s['model']).name}" if s.get("model") else ""),
    )
    for path in sorted(VERDICTS.glob("*.toml"))
    for s in tomllib.loads(path.read_text())["scan"]
]


def test_verdict_files_are_well_formed():
    assert SCANS, "no verdicts"
    for param in SCANS:
        s = param.values[0]
        for f in s.get("finding", []):
            assert f["verdict"] in ("real", "false"), f
            assert f["evidence"].strip(), f
            assert ("open" in f) == (f["verdict"] == "false"), f


@pytest.mark.parametrize("recorded", SCANS)
def test_replayed_scan_matches_the_verdicts(recorded: dict):
    """Findings are matched by fingerprint and place: the releases are pinned, so their lines
    do not move, and two identical lines in one file share a fingerprint."""
    model = str(ROOT / recorded["model"]) if recorded.get("model") else None
    result = scan(
        recorded["client"], recorded["against"], baseline=recorded.get("baseline"), model=model
    )
    lost, back, unreviewed = mismatches(result.findings, recorded, ("error", "warning"))
    assert not lost, f"real drifts no longer reported: {lost}"
    assert not back, f"false findings reported again: {back}"
    assert not unreviewed, f"findings without a verdict (review them): {unreviewed}"


def mismatches(
    findings: list, recorded: dict, severities: tuple[str, ...]
) -> tuple[list[str], list[str], list[str]]:
    """Real drifts no longer reported, fixed false ones reported again, and findings of
    ``severities`` without a verdict (matched by fingerprint and place)."""
    reported = {
        (f.fingerprint, f"{f.file}:{f.line}"): f for f in findings if f.severity in severities
    }
    verdicts = {(f["fingerprint"], f["where"]): f for f in recorded.get("finding", [])}
    lost = [
        w for (fp, w), f in verdicts.items() if f["verdict"] == "real" and (fp, w) not in reported
    ]
    back = [
        w
        for (fp, w), f in verdicts.items()
        if f["verdict"] == "false" and not f["open"] and (fp, w) in reported
    ]
    unreviewed = [f"{w} {f.rule}" for (fp, w), f in reported.items() if (fp, w) not in verdicts]
    return lost, back, unreviewed
