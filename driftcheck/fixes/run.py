"""``fix()``: scan a client, fix what can be fixed, and say what is left for a person."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from driftcheck.findings import Finding, Fix
from driftcheck.fixes.confirmed import Confirmation, mark_confirmed, read_confirmations
from driftcheck.fixes.patches import (
    FixPlan,
    apply_in_place,
    require_directory,
    write_patches,
)
from driftcheck.fixes.proof import Proof, prove
from driftcheck.pipeline import scan
from driftcheck.result import ScanResult
from driftcheck.rules.ruleset import RuleSet


@dataclass
class FixResult:
    """What a fix run did: the scan, the plan, the files written or rewritten."""

    scan: ScanResult
    plan: FixPlan
    #: Patch files written (with ``out``).
    written: list[Path] = field(default_factory=list)
    #: Patch files an earlier run wrote into ``out``, removed (its manifest listed them).
    removed: list[Path] = field(default_factory=list)
    #: Client files rewritten in place (with ``apply``).
    rewritten: list[str] = field(default_factory=list)
    #: Client files not rewritten, with the reason.
    refused: list[tuple[str, str]] = field(default_factory=list)
    #: How the plan was proven (the re-scan of the fixed copy, witnesses).
    proof: Proof | None = None
    #: Unsafe fixes made safe by ``confirmed_by`` (a workload confirmed them on the target).
    confirmed: list[Finding] = field(default_factory=list)
    #: Confirmations of the reports that named no finding of this scan.
    unmatched: list[Confirmation] = field(default_factory=list)

    @property
    def remaining(self) -> list[Finding]:
        """Error findings that no applied fix addresses: they need a person."""
        fixed = {id(f) for ff in self.plan.files for f in ff.applied if ff.changed}
        return [f for f in self.scan.findings if f.severity == "error" and id(f) not in fixed]

    @property
    def exit_code(self) -> int:
        """0 when nothing is pending or left; 1 when patches wait to be applied, a rewrite
        was refused, or error findings remain without a fix."""
        if self.refused or self.remaining:
            return 1
        return 1 if self.plan.pending and not self.rewritten else 0


def fix(
    client: str,
    against: str | None = None,
    *,
    baseline: str | None = None,
    host: str | None = None,
    out: str | Path | None = None,
    apply: bool = False,
    unsafe: bool = False,
    verify: bool = False,
    exclude: Iterable[str] = (),
    disable: Iterable[str] = (),
    rules: RuleSet | None = None,
    progress: Callable[[str], None] | None = None,
    model: str | None = None,
    confirmed_by: Iterable[str | Path] = (),
    include: Iterable[str] = (),
) -> FixResult:
    """Scan ``client`` and fix its drift: patches into ``out``, or rewrites with ``apply``.

    Args:
        client: Client spec (``name==version``, installed name, or directory).
        against: Target host spec (as for :func:`driftcheck.scan`).
        baseline: Baseline host version; default: the client's own pin on the host.
        host: Host name when ``against`` does not carry one.
        out: Folder for one ``.patch`` per file and ``all.patch`` (nothing written when None);
            the patches an earlier run wrote there are removed first.
        apply: Rewrite the client's files in place (directory clients only), each atomically
            and only when unchanged since the scan read it.
        unsafe: Also apply fixes marked unsafe.
        verify: Run the witnesses: fixes of refuted findings and fixes whose rewritten use
            fails on the target are declined (see :mod:`driftcheck.fixes.proof`).
        exclude: Globs of client files not to read.
        include: Globs of client files to read beyond what its packaging says.
        disable: Ids not to report or fix (as for :func:`driftcheck.scan`).
        rules: The rules to use; default: the built-in rules.
        progress: Callback receiving short progress messages.
        model: The served model (as for :func:`driftcheck.scan`).
        confirmed_by: Probe JSON reports (``probe --fix --unsafe-fixes``): the unsafe fixes
            their workload run confirmed on this exact target are applied as safe.

    Raises:
        UsageError: ``apply`` on a client that is not a directory, bad arguments, or a
            ``confirmed_by`` report for another client or host release.
    """
    result = scan(
        client,
        against,
        baseline=baseline,
        host=host,
        exclude=list(exclude),
        include=list(include),
        disable=disable,
        rules=rules,
        progress=progress,
        model=model,
    )
    if verify:
        from driftcheck.witness.verify import verify_result

        result = verify_result(result, progress=progress)
        result.findings = [_witnessed(f) for f in result.findings]
    confirmations = [
        c
        for path in confirmed_by
        for c in read_confirmations(
            path,
            client_name=result.client_name,
            client_version=result.client_version,
            host_version=result.target,
        )
    ]
    unmatched: list[Confirmation] = []
    if confirmations:
        before = {id(f) for f in result.findings}
        result.findings, unmatched = mark_confirmed(result.findings, confirmations)
        made_safe = [f for f in result.findings if id(f) not in before]
    else:
        made_safe = []

    def rescan(folder: Path, unbased: bool, on_baseline: bool = False) -> ScanResult:
        # The baseline as given (a folder stays a folder), else the one the scan found (a
        # monorepo's packages: each its own pin again, read from the copy's packaging files).
        again = baseline or (None if result.packages else result.baseline or "none")
        where = against
        if on_baseline:  # the release the client still allows, as the target, alone
            given = baseline if baseline and Path(baseline).exists() else None
            where, unbased = given or f"{result.host_name}=={result.baseline}", True
        return scan(
            str(folder),
            where,
            baseline="none" if unbased else again,
            host=host,
            exclude=list(exclude),
            include=list(include),
            disable=disable,
            rules=rules,
            model=model,
        )

    proof = prove(result, rescan, unsafe=unsafe, verify=verify)
    fix_plan = proof.plan
    done = FixResult(
        scan=result, plan=fix_plan, proof=proof, confirmed=made_safe, unmatched=unmatched
    )
    if apply:
        if fix_plan.pending:
            root = require_directory(result.client_root, client)
            done.rewritten, done.refused = apply_in_place(fix_plan, root)
    elif out is not None:
        from driftcheck.patch_folder import FIXES_FILE, LEFT_FILE, previous

        earlier = previous(Path(out))
        fixes, left = fix_records(done)
        # A fix that is only a flag for the server's command line is worth a folder too
        # (``probe --patches`` starts the patched run's server with it).
        flags = any(d.get("launch_flag") for d in left)
        records = {FIXES_FILE: fixes, LEFT_FILE: left}
        done.written = write_patches(fix_plan, Path(out), records, make=flags)
        done.removed = [p for p in earlier if p not in done.written and not p.exists()]
    return done


def _witnessed(f: Finding) -> Finding:
    """A fix offered as safe once witnessed (``witnessed = safe``) whose finding a witness
    confirmed: safe (its rewritten use is still witnessed before it is applied)."""
    from dataclasses import replace

    from driftcheck.kinds import FixSafety

    fix_ = f.fix
    if fix_ is None or dict(fix_.params).get("witnessed") != "safe" or fix_.safety == "safe":
        return f
    if f.verification is None or f.verification.status != "confirmed":
        return f
    said = f"{fix_.description} (witnessed: {f.verification.reason})"
    return replace(f, fix=replace(fix_, safety=FixSafety.SAFE, description=said))


@dataclass
class PatchSet:
    """The patches of a fix run and the fixes in them (what a probe applies and reports)."""

    #: Relative path -> patch text, for every file the fixes change.
    patches: dict[str, str]
    #: Each applied fix: file, line, use_line (where the use starts), rule, symbol, safety,
    #: description (the plan's order).
    fixes: list[dict]
    #: Findings no applied fix addresses (manual, unsafe skipped, declined): file, line,
    #: use_line and use_text (where the use starts: its line and that line's code), rule,
    #: symbol, why.
    left: list[dict] = field(default_factory=list)


def plan_patches(
    client: str,
    against: str | None = None,
    *,
    baseline: str | None = None,
    unsafe: bool = False,
    model: str | None = None,
) -> PatchSet:
    """Scan a client and return its patches with the fixes they apply (the fixes the re-scan
    of the fixed copy bears out, as ``driftcheck fix`` applies them); ``model``: the served
    model (as for :func:`driftcheck.scan`)."""
    done = fix(client, against, baseline=baseline, unsafe=unsafe, model=model)
    fixes, left = fix_records(done)
    return PatchSet({ff.file: ff.patch() for ff in done.plan.pending}, fixes, left)


def fix_records(done: FixResult) -> tuple[list[dict], list[dict]]:
    """The fixes a run's patches apply and the findings they leave (``PatchSet.fixes`` and
    ``PatchSet.left``: what a patch folder's ``fixes.json`` and ``left.json`` hold)."""
    fixes = [
        {
            "file": f.file,
            "line": f.line,
            "end_line": max(f.end_line, f.line),
            "use_line": min(f.fix_at[0], f.line),
            "rule": f.rule,
            "symbol": f.symbol,
            "safety": f.fix.safety if f.fix else "manual",
            "description": f.fix.description if f.fix else "",
        }
        for ff in done.plan.pending
        for f in sorted(ff.applied, key=lambda g: g.line)
    ]
    plan_ = done.plan
    left = [(f, f"manual: {f.fix.description if f.fix else f.message}") for f in plan_.manual]
    left += [
        (f, f"unsafe fix not applied: {cast(Fix, f.fix).description}")  # skipped: it has one
        for f in plan_.skipped_unsafe
    ]
    left += [(f, f"fix declined: {why}") for ff in plan_.files for f, why in ff.declined]
    return fixes, [
        {
            "file": f.file,
            "line": f.line,
            "end_line": max(f.end_line, f.line),
            "use_line": f.anchor[0] if f.anchor else f.line,
            "use_text": _line_text(done.scan, f.file, f.anchor[0] if f.anchor else f.line),
            "rule": f.rule,
            "symbol": f.symbol,
            "why": why,
            **_launch_flag(f),
        }
        for f, why in left
    ]


def _launch_flag(f: Finding) -> dict:
    """``launch_flag``: the flag a manual fix says to add to the server's command line (what
    the probe starts a served workload's server with)."""
    flag = dict(f.fix.params).get("launch-flag") if f.fix else None
    return {"launch_flag": flag} if flag else {}


def _line_text(result: ScanResult, file: str, line: int) -> str:
    lines = result.client_texts.get(file, "").splitlines()
    return lines[line - 1].strip() if 0 < line <= len(lines) else ""


def make_patches(
    client: str,
    against: str | None = None,
    *,
    baseline: str | None = None,
    unsafe: bool = False,
    model: str | None = None,
) -> dict[str, str]:
    """Scan a client and return ``{relative path: patch text}`` for every file the fixes change
    (as :func:`plan_patches`, without the list of fixes)."""
    return plan_patches(client, against, baseline=baseline, unsafe=unsafe, model=model).patches
