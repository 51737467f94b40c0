"""The verdict data on real clients, read offline (no scan): every false verdict says why it is
false, and the counts in docs/verdicts.md are the data's, once per distinct finding.

A false verdict's evidence names a place (``path:line``) other than the finding's own (the gate
that keeps the line from running, or where the host has the name) and does not repeat
driftcheck's message: the message says what driftcheck saw, not why that is wrong.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest
from verdict_counts import ROOT, STATES, distinct_counts, per_scan_counts, recorded_scans

#: ``path:line`` (or ``path:line-line``) in an evidence text.
PLACE = re.compile(r"([\w./-]+\.(?:py|pyi|pyx|ipynb|toml|cfg|txt|json)):(\d+)")
#: Wording only driftcheck's messages use (checks/call_signature.py, override_signature.py,
#: missing_symbol.py); a message also names the target as "in <host> <version>".
MESSAGE_WORDS = ("no longer binds", "stands in for", "is no longer there in", "(present in ")


def evidence_problem(finding: dict, scan: dict) -> str | None:
    """Why ``finding``'s evidence does not say why it is false, or None when it does."""
    evidence = finding["evidence"]
    own_path, _, own_line = finding["where"].rpartition(":")
    places = [
        (path, line)
        for path, line in PLACE.findall(evidence)
        if not (own_path.endswith(path) and line == own_line)
    ]
    if not places:
        return "names no place (path:line) other than the finding's own"
    name, _, version = scan["against"].partition("==")
    repeated = [w for w in MESSAGE_WORDS if w in evidence]
    if f" in {name.lower()} {version}" in evidence.lower():
        repeated.append(f"in {name} {version}")
    if repeated:
        return f"repeats driftcheck's message ({', '.join(repeated)})"
    return None


def false_verdicts() -> list[tuple[dict, dict]]:
    return [
        (scan, f)
        for scan in recorded_scans()
        for f in scan.get("finding", [])
        if f["verdict"] == "false"
    ]


def test_every_false_verdict_says_why():
    assert false_verdicts()
    bad = [
        f"{scan['client']} vs {scan['against']} {f['where']} {f['rule']}: {problem}"
        for scan, f in false_verdicts()
        if (problem := evidence_problem(f, scan))
    ]
    assert not bad, f"{len(bad)} false verdicts without their reason:\n" + "\n".join(bad)


SCAN = {"client": "c==1.0", "against": "vllm==0.11.0", "baseline": "0.8.5"}
WHERE = "c/vendored/v054/arg_utils.py:25"


@pytest.mark.parametrize(
    "evidence",
    [
        "vllm.config.DecodingConfig does not exist in vllm 0.11.0 (present in 0.8.5)",
        "ParallelConfig(...) no longer binds in vllm 0.11.0: no parameter named 'x'",
        "self.m: ModelConfig has no attribute 'm' in vllm 0.11.0",
        "never runs: the body of the elif at arg_utils.py:25",
        "the else-branch call; the taken call at :425 is reported separately",
        "load_model() stands in for BaseModelLoader.load_model (c/vendored/__init__.py:36)",
    ],
)
def test_a_false_verdict_that_only_repeats_the_message_is_rejected(evidence: str):
    assert evidence_problem({"evidence": evidence, "where": WHERE}, SCAN)


@pytest.mark.parametrize(
    "evidence",
    [
        'dead on vllm 0.11.0: c/vendored/v054/ is imported only under `if v == "0.5.4":` '
        "(c/vendored/__init__.py:36)",
        "the elif after `if hasattr(model, 'get_language_model')` (arg_utils.py:21): never runs",
        "0.11.0: vllm/engine/async_llm_engine.py:6 `AsyncLLMEngine = AsyncLLM`",
    ],
)
def test_a_false_verdict_that_names_its_gate_passes(evidence: str):
    assert evidence_problem({"evidence": evidence, "where": WHERE}, SCAN) is None


DOCS_ROW = re.compile(r"^\| (\w+) \| [^|]* \| (\d+) \| (\d+) \| (\d+) \|$", re.M)
DOCS_PER_SCAN = re.compile(r"Counted once per scan instead.*?they are (\d+) real,\s+(\d+) fixed")


def docs_page() -> str:
    """The docs page "Measured on real clients", where the table lives."""
    return (ROOT / "docs" / "verdicts.md").read_text()


def test_the_docs_count_each_finding_once():
    """The docs' table of verdicts is the data counted per distinct finding, host by host,
    with the total row."""
    table = {host.lower(): tuple(map(int, n)) for host, *n in DOCS_ROW.findall(docs_page())}
    counts = distinct_counts(recorded_scans())
    expected = {host: tuple(c[s] for s in STATES) for host, c in counts.items()}
    expected["all"] = tuple(sum(row[i] for row in expected.values()) for i in range(3))
    assert table == expected


def test_the_docs_per_scan_counts_are_the_data():
    found = DOCS_PER_SCAN.search(docs_page())
    assert found, "the per-scan sentence of docs/verdicts.md is gone"
    total = sum(per_scan_counts(recorded_scans()).values(), Counter())
    assert tuple(map(int, found.groups())) == (total["real"], total["false, fixed"])


def test_a_finding_on_several_releases_counts_once():
    """Near miss: the same fingerprint at another place, or in another client, is another one."""
    finding = {"fingerprint": "f1", "rule": "r", "where": "a.py:1", "verdict": "real"}
    scans = [
        {"client": "c==1", "against": "h==2", "finding": [finding]},
        {"client": "c==2", "against": "h==3", "finding": [finding, {**finding, "where": "a.py:2"}]},
        {"client": "d==1", "against": "h==3", "finding": [finding]},
    ]
    assert distinct_counts(scans)["h"]["real"] == 3
    assert per_scan_counts(scans)["h"]["real"] == 4
