"""The blame of a failed patched run, decided from its traceback, the patches' hunks and the
scan's findings: a fix that is wrong (the failing line is one a patch wrote, or the use a fix
changed), a drift the scan missed (the client line calls into the host, nothing reported
there), undecided otherwise; and the hunks' line arithmetic it stands on."""

from __future__ import annotations

from pathlib import Path

from driftcheck.probes.blame import blame, hunks_of, original_line, patch_hunks
from driftcheck.probes.outcome import RunOutcome

ROOT = "/tmp/driftcheck-probe-x/patched/client"
PATCH = """--- a/pkg/gen.py
+++ b/pkg/gen.py
@@ -10,4 +10,5 @@
 a = 1
-b = f(x=1)
+b = f()
+b.p.update(1)
 c = 3
 d = 4
@@ -40,3 +41,2 @@
 e = 5
-g = 6
 h = 7
"""


def _hunks() -> dict[str, list[dict]]:
    return {"pkg/gen.py": [vars(h) for h in hunks_of(PATCH)]}


def test_hunks_say_which_lines_a_patch_wrote_and_where_the_others_stood():
    [one, two] = hunks_of(PATCH)
    assert (one.old_start, one.old_len, one.new_start, one.new_len) == (10, 4, 10, 5)
    assert one.added == (11, 12) and two.added == ()
    h = _hunks()["pkg/gen.py"]
    assert original_line(h, 5) == 5  # before every hunk
    assert original_line(h, 11) is None and original_line(h, 12) is None  # written by the patch
    assert original_line(h, 13) == 12  # c = 3, one line further down
    assert original_line(h, 30) == 29  # between the hunks: the first hunk's shift
    assert original_line(h, 42) == 42  # h = 7: the second hunk took its line back
    assert original_line(h, 60) == 60


def test_patch_hunks_reads_each_file_of_a_patch_file(tmp_path: Path):
    other = PATCH.replace("pkg/gen.py", "pkg/other.py")
    (tmp_path / "001.patch").write_text(PATCH + other)
    got = patch_hunks([tmp_path / "001.patch"])
    assert sorted(got) == ["pkg/gen.py", "pkg/other.py"]
    assert got["pkg/other.py"][0]["added"] == (11, 12)


def _failed(frames: list[tuple[str, int]], kind: str = "builtins.TypeError") -> RunOutcome:
    tb = "Traceback (most recent call last):\n" + "".join(
        f'  File "{path}", line {line}, in f\n    code\n' for path, line in frames
    )
    err = {"type": kind, "message": "boom", "from_worker": False, "traceback": tb}
    run = RunOutcome("patched", False, [], failed_stage="generate-1", error=err)
    run.client_root = ROOT
    return run


HOST = "/e/lib/python3.12/site-packages/vllm/v1/request.py"
FIX = {"file": "pkg/gen.py", "line": 11, "use_line": 11, "rule": "r-eos", "safety": "unsafe"}


def test_a_failure_on_a_line_the_patch_wrote_is_the_fix():
    run = _failed([(f"{ROOT}/pkg/gen.py", 12), (HOST, 60)])
    got = blame(run, "vllm", fixes=[FIX], left=[], hunks=_hunks())
    assert got == {
        "kind": "fix-is-wrong",
        "text": "fix is wrong: pkg/gen.py:12 of the patched copy was written by r-eos "
        "(pkg/gen.py:11)",
    }


def test_a_failure_at_the_use_a_fix_changed_is_the_fix():
    fix = {**FIX, "line": 12, "use_line": 12}
    run = _failed([(f"{ROOT}/pkg/gen.py", 13), (HOST, 60)])
    got = blame(run, "vllm", fixes=[fix], left=[], hunks=_hunks())
    assert got is not None and got["kind"] == "fix-is-wrong" and "pkg/gen.py:12" in got["text"]


def test_a_call_into_the_host_nobody_reported_is_missed_by_the_scan():
    run = _failed([(f"{ROOT}/pkg/gen.py", 30), (HOST, 60)])
    got = blame(run, "vllm", fixes=[FIX], left=[], hunks=_hunks())
    assert got == {
        "kind": "missed-by-scan",
        "text": "missed by the scan: pkg/gen.py:29 calls into vllm (down to "
        "vllm/v1/request.py:60), and the scan reported nothing there",
    }
    # The call itself raised (no host frame below it): a TypeError at that line counts.
    alone = blame(_failed([(f"{ROOT}/pkg/gen.py", 30)]), "vllm", fixes=[], left=[], hunks={})
    assert alone is not None and alone["kind"] == "missed-by-scan"


def test_a_reported_use_is_no_miss_and_the_rest_stays_undecided():
    # A use the scan reports and no fix addressed: left for a person, not missed.
    reported = {"file": "pkg/gen.py", "line": 31, "use_line": 28, "rule": "x", "why": "manual"}
    run = _failed([(f"{ROOT}/pkg/gen.py", 30), (HOST, 60)])
    left = blame(run, "vllm", fixes=[], left=[reported], hunks=_hunks())
    assert left is not None and left["kind"] == "left-for-a-person"
    # A client line that raised on its own, not calling into the host.
    own = _failed([(f"{ROOT}/pkg/gen.py", 30)], kind="builtins.KeyError")
    assert blame(own, "vllm", fixes=[], left=[], hunks={}) is None
    # No client frame at all, and a passed run.
    assert blame(_failed([(HOST, 60)]), "vllm", fixes=[], left=[], hunks={}) is None
    ok = RunOutcome("patched", True, [])
    assert blame(ok, "vllm", fixes=[], left=[], hunks={}) is None


def test_a_failure_inside_a_multi_line_finding_is_that_finding():
    # A missing argument spans its call (callee at :28, closing parenthesis at :33): a frame on
    # an argument's line inside it is the finding's; the line after the call is not.
    reported = {"file": "pkg/gen.py", "line": 28, "end_line": 33, "use_line": 28, "why": "manual"}
    inside = blame(
        _failed([(f"{ROOT}/pkg/gen.py", 30)]), "vllm", fixes=[], left=[reported], hunks={}
    )
    assert inside is not None and inside["kind"] == "left-for-a-person"
    after = blame(
        _failed([(f"{ROOT}/pkg/gen.py", 34)]), "vllm", fixes=[], left=[reported], hunks={}
    )
    assert after is not None and after["kind"] == "missed-by-scan"


def test_the_range_report_carries_the_blame_in_its_errors_and_its_json():
    import io
    import json

    from conftest import speculators_report

    from driftcheck.probes.options import ProbeOptions
    from driftcheck.probes.range_report import render_range_json, render_range_text
    from driftcheck.probes.ranges import RangeReport, ReleaseRun

    unpatched = RunOutcome("unpatched", True, [], seconds=3.0)
    patched = _failed([(f"{ROOT}/pkg/gen.py", 12), (HOST, 60)])
    report = speculators_report("0.20.0", [unpatched, patched], [FIX])
    report.hunks = _hunks()
    ranged = RangeReport("speculators==0.3.0", "0.3.0", "vllm", ProbeOptions("c", fix=True))
    ranged.releases.append(ReleaseRun("0.20.0", report=report))
    text = io.StringIO()
    render_range_text(ranged, text)
    assert "      fix is wrong: pkg/gen.py:12 of the patched copy was written by r-eos" in (
        text.getvalue()
    )
    out = io.StringIO()
    render_range_json(ranged, out)
    [row] = json.loads(out.getvalue())["releases"]
    assert row["patched"]["blame"]["kind"] == "fix-is-wrong" and row["unpatched"]["ok"]


def test_an_import_failing_in_another_package_with_no_host_frame_is_outside_the_host():
    """speculators 0.3.0 on vLLM 0.32 (transformers 5.19): its pydantic config's rebuild
    evaluates transformers' annotation ``torch.dtype`` (torch imported under TYPE_CHECKING) and
    pydantic raises; no vLLM frame anywhere: outside vLLM's API. A build failure of the same
    shape (pydantic validating a host class) is not judged so."""
    site = "/e/lib/python3.11/site-packages"
    cause = _failed([(f"{site}/typing_extra.py", 3)]).error["traceback"]
    run = _failed(
        [
            ("/tmp/w/driver.py", 249),
            (f"{ROOT}/spec/utils/pydantic_utils.py", 35),
            (f"{site}/pydantic/_internal/_model_construction.py", 613),
        ],
        kind="pydantic.errors.PydanticUndefinedAnnotation",
    )
    run.error["traceback"] = (
        cause + "\nThe above exception was the direct cause\n\n" + (run.error["traceback"])
    )
    run.failed_stage = "import"
    got = blame(run, "vllm", fixes=[], left=[], hunks={})
    assert got == {
        "kind": "outside-host",
        "text": "outside vllm's API: importing the client fails in pydantic "
        "(pydantic/_internal/_model_construction.py:613), called from "
        "spec/utils/pydantic_utils.py:35; no vllm frame is involved",
    }
    run.failed_stage = "build"
    assert blame(run, "vllm", fixes=[], left=[], hunks={}) is None
    run.failed_stage = "import"
    run.error["traceback"] += f'  File "{site}/vllm/config/scheduler.py", line 9, in f\n'
    assert blame(run, "vllm", fixes=[], left=[], hunks={})["kind"] != "outside-host"
