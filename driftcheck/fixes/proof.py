"""Fix safety, derived: a fix stays applied only when the host's evidence proves it.

A codemod's fix is offered as ``safe`` only when the host's own evidence names the replacement
(the check or rule says where it read it). Before anything is written, :func:`prove` then holds
every planned fix to two more tests and declines the ones that fail, with the reason:

1. **It binds statically on the target.** The client is copied with the fixes applied and
   scanned again against the same target and baseline: every rewritten file must parse, each
   fixed finding must be gone, and no new finding may appear. A name a fix moves the client to
   is new to it, so its uses are also checked against the target alone (a second scan without
   the baseline): ``url(regex=...)`` moved to ``re_path`` would not bind. A fix that leaves its
   finding or brings a new one is declined and the rest are planned again (a few rounds at
   most). A new finding the fixed code brings into reach (a served wrapper's inner model, once
   the client reads it, binds the code it hands that model) is fixed in turn when it has a
   codemod of its own: it is applied on top in the next round, and the whole chain must then
   re-scan clean; otherwise the fix that brought it is declined.
2. **Its witness passes** (with ``verify``): the original use's witness must fail on the target
   (a refuted finding needs no fix) and the rewritten use's witness must work there
   (:func:`driftcheck.witness.programs.rewritten`). Fixes whose use no witness can perform keep
   the first two grounds alone, and say so.
"""

from __future__ import annotations

import ast
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from driftcheck.findings import Finding
from driftcheck.fixes.notebook_fix import on_disk
from driftcheck.fixes.patches import FileFix, FixPlan, plan
from driftcheck.result import ScanResult

Key = tuple[str, str, str]
ROUNDS = 4


@dataclass
class Proof:
    """What the re-scan and the witnesses said about a plan."""

    plan: FixPlan
    #: The re-scan of the fixed copy (None when nothing changed).
    rescan: ScanResult | None = None
    #: Applied fixes whose rewritten use a witness ran on the target: finding id -> outcome.
    witnessed: dict[int, str] = field(default_factory=dict)
    rounds: int = 0


def _key(f: Finding) -> Key:
    return (f.file, f.rule, f.symbol)


def prove(
    result: ScanResult,
    rescan: Callable[..., ScanResult],
    *,
    unsafe: bool = False,
    verify: bool = False,
) -> Proof:
    """Plan the fixes of ``result`` and keep only those the re-scan (and, with ``verify``, the
    witnesses) bear out. ``rescan(folder, unbased)`` scans a folder as the original scan did
    (``unbased``: without its baseline; ``on_baseline=True``: against the baseline itself, for
    fixes that keep a release the client allows working)."""
    declined: dict[int, str] = {}
    if verify:
        declined.update(_witness_declines(result, unsafe=unsafe))
    proof = Proof(FixPlan([], [], []))
    follow: list[Finding] = []  # found in a fixed copy, applied on top of the plan
    adopted: set[Key] = set()
    for n in range(1, ROUNDS + 1):
        fix_plan = _replan(result, declined, unsafe=unsafe)
        if follow:
            _stack(fix_plan, result, follow, unsafe=unsafe)
        proof.plan, proof.rounds = fix_plan, n
        broken = _unparsable(fix_plan)
        if broken:
            declined.update(broken)
            continue
        if not fix_plan.pending:
            proof.rescan = None
            break
        with tempfile.TemporaryDirectory(prefix="driftcheck-fixed-") as tmp:
            _write_copy(result, fix_plan, Path(tmp))
            proof.rescan = again = rescan(Path(tmp), False)
            more = _brought(fix_plan, result, again.findings, adopted, unsafe=unsafe)
            if more and n < ROUNDS:
                follow += more
                adopted.update(_key(f) for f in more)
                continue
            bad = _not_borne_out(fix_plan, result.findings, again.findings)
            moved = _moved_to(fix_plan)
            if moved and result.baseline is not None:
                bad.update(_new_names_fail(moved, rescan(Path(tmp), True).findings))
            kept = _falling_back(fix_plan)
            if kept and result.baseline is not None:
                on_base = rescan(Path(tmp), False, on_baseline=True).findings
                bad.update(_baseline_breaks(fix_plan, kept, on_base, result.baseline))
        if not bad:
            break
        declined.update(bad)
        follow, adopted = [], set()  # found on code this plan no longer writes
    else:
        # Rounds exhausted: nothing unproven is applied.
        left = {id(f): "the re-scan did not bear it out" for f in result.findings if f.fix}
        proof.plan = _replan(result, {**left, **declined}, unsafe=unsafe)
    return proof


def _brought(
    fix_plan: FixPlan,
    result: ScanResult,
    after: list[Finding],
    adopted: set[Key],
    *,
    unsafe: bool,
) -> list[Finding]:
    """New findings of a fixed copy's re-scan that a codemod of their own can fix, in files
    the plan rewrote (notebooks left out): what the fixes brought into reach."""
    applied = [f for ff in fix_plan.pending for f in ff.applied]
    known = {_key(f) for f in result.findings} | {_key(f) for f in applied} | adopted
    rewritten = {ff.file for ff in fix_plan.pending if ff.raw is None}
    return [
        g
        for g in after
        if g.file in rewritten
        and _key(g) not in known
        and g.fix is not None
        and g.fix.codemod
        and (g.fix.safety == "safe" or (unsafe and g.fix.safety == "unsafe"))
    ]


def _stack(fix_plan: FixPlan, result: ScanResult, follow: list[Finding], *, unsafe: bool) -> None:
    """Apply ``follow`` (findings of the fixed code) on top of ``fix_plan``'s rewritten files."""
    by_file = {ff.file: ff for ff in fix_plan.files}
    texts = {ff.file: ff.new for ff in fix_plan.pending}
    top = plan([f for f in follow if f.file in texts], texts, unsafe=unsafe)
    for ff2 in top.files:
        ff = by_file[ff2.file]
        ff.new = ff2.new
        ff.applied += ff2.applied
        ff.declined += ff2.declined


def _replan(result: ScanResult, declined: dict[int, str], *, unsafe: bool) -> FixPlan:
    todo = [f for f in result.findings if id(f) not in declined]
    fix_plan = plan(todo, result.client_texts, unsafe=unsafe, raw=result.client_raw)
    by_file = {ff.file: ff for ff in fix_plan.files}
    for f in result.findings:
        why = declined.get(id(f))
        if why is None or f.fix is None or not f.fix.codemod:
            continue
        ff = by_file.get(f.file)
        if ff is None:
            text = result.client_texts.get(f.file, "")
            ff = by_file[f.file] = FileFix(f.file, text, text, raw=result.client_raw.get(f.file))
            fix_plan.files.append(ff)
        ff.declined.append((f, why))
    fix_plan.files.sort(key=lambda ff: ff.file)
    return fix_plan


def _unparsable(fix_plan: FixPlan) -> dict[int, str]:
    out: dict[int, str] = {}
    for ff in fix_plan.pending:
        try:
            ast.parse(ff.new)
        except SyntaxError as exc:
            why = f"the rewritten file does not parse (line {exc.lineno}: {exc.msg})"
            out.update((id(f), why) for f in ff.applied)
    return out


def _write_copy(result: ScanResult, fix_plan: FixPlan, root: Path) -> None:
    new = {ff.file: ff.new for ff in fix_plan.pending}
    for rel, code in {**result.client_other, **result.client_texts}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        text = on_disk(result.client_raw.get(rel), code, new.get(rel, code))[1]
        path.write_text(text, encoding="utf-8")


def _not_borne_out(
    fix_plan: FixPlan, before: list[Finding], after: list[Finding]
) -> dict[int, str]:
    """Applied fixes whose finding the re-scan still reports, or that brought new drift."""
    applied = [f for ff in fix_plan.pending for f in ff.applied]
    expected = Counter(_key(f) for f in before) - Counter(_key(f) for f in applied)
    # A drift is reported once per file: the re-scan of a fixed file may show its next site, on
    # a line no fix touched. That is the drift left, not the fix failing.
    touched = {ff.file: _changed_lines(ff.old, ff.new) for ff in fix_plan.pending}
    after = [
        g
        for g in after
        if g.file not in touched
        or g.line in touched[g.file]
        or not any(_key(f) == _key(g) for f in applied)
    ]
    seen = Counter(_key(f) for f in after)
    out: dict[int, str] = {}
    for f in applied:
        k = _key(f)
        if seen[k] > expected[k]:
            out[id(f)] = "the re-scan of the fixed code still reports it"
    for k, n in seen.items():
        if n <= expected[k] or any(_key(f) == k for f in applied):
            continue
        new = next(f for f in after if _key(f) == k)
        why = f"the rewritten code has new drift: {new.rule} {new.symbol} at line {new.line}"
        here = [f for f in applied if f.file == new.file]
        named = [
            f
            for f in here
            if f.fix is not None and any(v and v in new.symbol for _, v in f.fix.params)
        ]
        out.update((id(f), why) for f in named or here)
    return out


def _changed_lines(old: str, new: str) -> set[int]:
    """1-based lines of ``new`` that a diff from ``old`` inserts or replaces."""
    import difflib

    out: set[int] = set()
    matcher = difflib.SequenceMatcher(a=old.splitlines(), b=new.splitlines(), autojunk=False)
    for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            out.update(range(j1 + 1, max(j2, j1 + 1) + 1))
    return out


def _moved_to(fix_plan: FixPlan) -> dict[int, tuple[str, Finding]]:
    """Applied fixes that point the client at another host name: id -> (that name, finding)."""
    out = {}
    for ff in fix_plan.pending:
        for f in ff.applied:
            p = dict(f.fix.params) if f.fix else {}
            if f.fix and f.fix.codemod == "rename-import":
                out[id(f)] = (p.get("new_symbol") or p["new"], f)
            elif f.fix and f.fix.codemod == "rename-attribute" and f.symbol:
                out[id(f)] = (f.symbol.rsplit(".", 1)[0] + "." + p["new"], f)
    return out


def _falling_back(fix_plan: FixPlan) -> list[Finding]:
    """Applied import moves that fall back to the old import for the baseline's sake."""
    return [
        f
        for ff in fix_plan.pending
        for f in ff.applied
        if f.fix and dict(f.fix.params).get("fallback")
    ]


def _baseline_breaks(
    fix_plan: FixPlan, kept: list[Finding], on_base: list[Finding], version: str
) -> dict[int, str]:
    """Fallback moves whose rewritten lines do not work on the baseline they claim to keep."""
    touched = {ff.file: _changed_lines(ff.old, ff.new) for ff in fix_plan.pending}
    out: dict[int, str] = {}
    for g in on_base:
        if g.line not in touched.get(g.file, ()):
            continue
        why = f"the rewritten code does not work on {version}, which the client allows: {g.message[:200]}"
        for f in kept:
            names = [v for k, v in (f.fix.params if f.fix else ()) if k != "fallback" and v]
            if f.file == g.file and any(v in g.symbol or g.symbol in v for v in names):
                out[id(f)] = why
    return out


def _new_names_fail(
    moved: dict[int, tuple[str, Finding]], unbased: list[Finding]
) -> dict[int, str]:
    """Fixes whose new name, checked against the target alone, does not work there."""
    out: dict[int, str] = {}
    for fid, (name, fixed) in moved.items():
        for g in unbased:
            if g.file == fixed.file and (g.symbol == name or g.symbol.startswith(name + ".")):
                why = f"the rewritten code does not work on the target: {g.message[:200]}"
                out[fid] = why
                break
    return out


def _witness_declines(result: ScanResult, *, unsafe: bool) -> dict[int, str]:
    """With witnesses: decline fixes of refuted findings and fixes whose rewritten use fails
    on the target."""
    from driftcheck.witness.programs import rewritten
    from driftcheck.witness.verify import run_on_target, spec_key

    out: dict[int, str] = {}
    programs: dict[int, dict] = {}
    for f in result.findings:
        if f.fix is None or not f.fix.codemod or (f.fix.safety == "unsafe" and not unsafe):
            continue
        if f.verification is not None and f.verification.status == "refuted":
            out[id(f)] = f"no fix needed: {f.verification.reason}"
            continue
        spec = rewritten(f)
        if spec is not None:
            programs[id(f)] = spec
    outcomes = run_on_target(result, list(programs.values()))
    for fid, spec in programs.items():
        got = outcomes.get(spec_key(spec))
        if got is not None and got["outcome"] == "fail":
            out[fid] = f"the rewritten use fails on the target: {got['detail']}"
    return out
