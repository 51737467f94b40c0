"""The scan pipeline: specs → sources → host APIs + client uses → checks → findings."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import cast

from driftcheck.checks import MERGING, PER_USE, WHOLE_CLIENT, CheckContext
from driftcheck.checks.context import side, site_of
from driftcheck.checks.fallbacks import admitted, keep_baseline
from driftcheck.client.package import Client, load_client
from driftcheck.client.uses import Use
from driftcheck.collect import collect_uses
from driftcheck.errors import UsageError
from driftcheck.findings import Finding
from driftcheck.gates import Gate
from driftcheck.host.api import UNKNOWN, HostAPI
from driftcheck.host.load import load_baseline, load_host, save_snapshots
from driftcheck.host.release import release_of
from driftcheck.host.served_model import ServedModel
from driftcheck.kinds import Severity
from driftcheck.models.configs import served_for
from driftcheck.registry import check_ids, is_disabled
from driftcheck.result import ScanResult
from driftcheck.rules.ruleset import RuleSet, load_rules
from driftcheck.sources.specs import PackageSpec, parse_spec
from driftcheck.sources.versions import exact_spec, is_version_spec, stale_listing

Progress = Callable[[str], None]


def run_checks(
    uses: list[Use],
    target: HostAPI,
    baseline: HostAPI | None,
    client: Client,
    rules: RuleSet,
    served: ServedModel | None = None,
) -> list[Finding]:
    """Run every registered check on every use; findings sorted by place.

    For releases (immutable) the result is cached under everything it depends on: the client
    analysis key (client files, rules, driftcheck's code) and both hosts' snapshot identities.
    """
    from driftcheck.client.cache import findings_key, load_findings, save_findings

    key = findings_key(client.uses_key, target, baseline)
    if key is not None:
        cached = load_findings(key)
        if isinstance(cached, dict) and isinstance(cached.get("findings"), list):
            target.undecided = list(cached.get("undecided", []))
            return cached["findings"]
    findings = _run_checks(uses, target, baseline, client, rules, served)
    target.undecided = _undecided(uses, target)
    if key is not None:
        save_findings(key, {"findings": findings, "undecided": target.undecided})
    return findings


def _undecided(uses: list[Use], target: HostAPI) -> list[str]:
    """Host names the client reaches that the checks could not decide on the target (a
    compiled module without a stub, a dynamic ``__all__``, a ``__getattr__`` that computes).
    Read off the lookups the checks made: nothing is resolved for the count alone."""
    looked = target.__dict__.get("_resolved", {})
    return sorted(
        {u.symbol for u in uses if not u.receiver and looked.get(u.symbol, None) is UNKNOWN}
    )


def _run_checks(
    uses: list[Use],
    target: HostAPI,
    baseline: HostAPI | None,
    client: Client,
    rules: RuleSet,
    served: ServedModel | None,
) -> list[Finding]:
    lines = client.lines
    running, fresh, conditional = _gated(uses, target, baseline)
    ctx = CheckContext(
        target=target,
        baseline=baseline,
        uses=running,
        mixed_methods=client.mixed_methods(),
        client_names=client.names(),
        rules=rules,
        fresh=fresh,
        served=served,
        client_lines=lines,
    )
    unbased = replace(ctx, baseline=None)  # shares ``reported``: each drift is reported once
    findings: list[Finding] = []
    on_target, on_base = side(target), side(baseline) if baseline is not None else None
    for use in running:
        use_ctx = unbased if id(use) in fresh else ctx
        for check in PER_USE:
            got = check(use, use_ctx)
            if got and use.dead:
                got = [_demoted(f, use.dead) for f in got]
            if got:
                site = site_of(use, on_target, on_base if use_ctx is ctx else None)
                findings.extend(
                    replace(f, site=replace(site, declared=f.site.declared) if f.site else site)
                    for f in got
                )
    for whole in WHOLE_CLIENT:
        findings.extend(whole(ctx))
    for merging in MERGING:
        findings = merging(findings, ctx)
    out = []
    for f in findings:
        src = lines.get(f.file, [])
        context = src[f.line - 1] if 0 < f.line <= len(src) else ""
        gate = conditional.get((f.file, *f.fix_at))
        if gate is not None:
            f = replace(f, message=f"{f.message} (conditional: runs only if {gate.text()})")
        out.append(_with_context(f, context))
    return sorted(_dedupe(out), key=lambda f: (f.file, f.line, f.column, f.kind))


def _demoted(f: Finding, why: str) -> Finding:
    """A finding in dead client code: at most info, saying why."""
    if f.severity == Severity.INFO:
        return f
    return replace(f, severity=Severity.INFO, message=f"{f.message} ({why})")


def _with_context(f: Finding, context: str) -> Finding:
    return replace(f, context=context)


def _gated(
    uses: list[Use], target: HostAPI, baseline: HostAPI | None
) -> tuple[list[Use], set[int], dict[tuple[str, int, int], Gate]]:
    """The uses that run on the target; those the baseline never runs; and where a use's gate
    cannot be decided on the target (its findings say so)."""
    on_target, on_base = side(target), side(baseline) if baseline is not None else None
    running: list[Use] = []
    fresh: set[int] = set()
    conditional: dict[tuple[str, int, int], Gate] = {}
    for use in uses:
        gate = use.gate
        if gate is None:
            running.append(use)
            continue
        holds = gate.holds(on_target)
        if holds is False:
            continue
        running.append(use)
        if holds is None:
            conditional[(use.file, use.line, use.column)] = gate
        if on_base is not None and gate.holds(on_base) is False:
            fresh.add(id(use))
    return running, fresh, conditional


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen: set[tuple] = set()
    out: list[Finding] = []
    for f in findings:
        key = (f.rule, f.file, f.line, f.column, f.symbol)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def resolve_specs(
    client: str, against: str | None, baseline: str | None, host: str | None
) -> tuple[PackageSpec, PackageSpec, str | None]:
    """Turn the user's strings into specs; the host name comes from --against or --host."""
    client_spec = parse_spec(client)
    target_spec = exact_spec(against or "installed", default_name=host)
    if target_spec.kind == "installed" and not target_spec.name:
        raise UsageError("name the host: --against NAME==VERSION, --against NAME, or --host NAME")
    if host and target_spec.name and target_spec.key != PackageSpec("x", name=host).key:
        raise UsageError(f"--host {host} does not match --against {against}")
    return client_spec, target_spec, baseline


def scan(
    client: str | PackageSpec,
    against: str | None = None,
    *,
    baseline: str | None = None,
    host: str | None = None,
    progress: Progress | None = None,
    exclude: tuple[str, ...] | list[str] = (),
    disable: Iterable[str] = (),
    rules: RuleSet | None = None,
    model: str | None = None,
    include: tuple[str, ...] | list[str] = (),
) -> ScanResult:
    """Scan a client against a target host release (a folder of several packages: each as
    its own client, reported together, :mod:`driftcheck.workspace`).

    Args:
        client: Client spec (``name==version``, installed name, or directory).
        against: Target host spec; default: the host installed in this environment.
        baseline: Baseline host version (or spec); default: the client's own pin on the host.
        host: Host name when ``against`` does not carry one.
        progress: Callback receiving short progress messages.
        exclude: Globs of client files (relative to its root) not to read.
        include: Globs of client files to read beyond what its packaging says.
        disable: Ids not to report (:mod:`driftcheck.registry`): a check or rule id drops
            its findings (a disabled rule is not run), a kind every finding of that kind.
        rules: The rules to use; default: the built-in rules (:func:`driftcheck.load_rules`).
        model: The model the host serves (a folder, a ``config.json``, a cached model id or a
            built-in tiny model); default: the probe's tiny Llama. Only for hosts whose binding
            rules say where they keep their models.

    Raises:
        UsageError: A bad spec, an unknown id in ``disable``, or a host without a name.
        DriftcheckError: Fetching or reading a package failed.
    """
    from driftcheck.workspace import members_of, scan_members

    members = members_of(client)
    with fewer_gc_passes():
        if members:
            return scan_members(
                client, members,
                lambda path, ex, inc, own_base, own_off: _scan(
                    path, against, baseline or own_base, host, progress, ex,
                    [*disable, *own_off], rules, model, inc,
                ),
                exclude=exclude, include=include, say=progress or (lambda _m: None),
            )  # fmt: skip
        return _scan(
            client, against, baseline, host, progress, exclude, disable, rules, model, include
        )


#: The kinds of :class:`driftcheck.client.http.use.HttpUse` (named here so the pipeline need
#: not import the HTTP modules).
HTTP_KINDS = frozenset({"http-request", "http-read", "launch"})


@contextmanager
def fewer_gc_passes() -> Iterator[None]:
    """A scan builds large, long-lived graphs (syntax trees, the host model) and frees little
    on the way: with the default thresholds the cyclic GC walks them again and again (a
    quarter of a cold scan). Its first generation is collected a hundred times less often
    for the scan's duration, then the thresholds are restored."""
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], 70_000), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


@dataclass
class Checked:
    """One client checked against one target release: what a scan's result is made of."""

    client: Client
    baseline: HostAPI | None
    baseline_version: str | None
    served: ServedModel | None
    uses: list[Use]
    findings: list[Finding]
    #: ``time.perf_counter()`` when the client and its baseline were loaded, its uses
    #: collected, and the checks run.
    loaded: float = 0.0
    collected: float = 0.0
    checked: float = 0.0


class ClientReading:
    """One client of one host, read and checked against any release of that host: ``scan``
    checks it against its target, ``timeline`` against every release of a range, so both
    read the client, its baseline and the served model (``--model``) through this one path.

    The client is loaded (and its baseline found) once; its uses are collected again only
    when what they depend on changes (the hosts' roots, the API receivers are typed with, the
    served model): with a baseline, once for a whole range.
    """

    def __init__(
        self,
        spec: PackageSpec,
        host_name: str,
        *,
        baseline: str | None,
        rules: RuleSet,
        disabled: frozenset[str] = frozenset(),
        model: str | None = None,
        exclude: Iterable[str] = (),
        include: Iterable[str] = (),
        say: Progress | None = None,
    ) -> None:
        self.spec, self.host_name, self.baseline = spec, host_name, baseline
        self.rules, self.disabled, self.model = rules, disabled, model
        self.exclude, self.include = list(exclude), list(include)
        self.say = say or (lambda _msg: None)
        self._client: Client | None = None
        self._roots: frozenset[str] = frozenset()
        self._base: list | None = None  # the baseline's API and version, once found
        #: Where the baseline came from (:func:`driftcheck.host.load.load_baseline`).
        self.baseline_origin: dict = {"source": "none"}
        #: The last analysis: what its uses depend on, and the uses.
        self._analysed: tuple[tuple, list[Use]] | None = None

    def prepare(self, target: HostAPI) -> tuple[Client, HostAPI | None, str | None]:
        """The client as read for ``target``'s roots, and the baseline (API, version).

        Raises:
            UsageError: ``--model`` for a host no binding rule says serves models.
        """
        if self.model is not None and self.rules.bindings(target.name).served is None:
            raise UsageError(
                f"--model {self.model}: no binding rule says where {self.host_name} keeps the "
                "models it serves ([binding.served_model])"
            )
        roots = frozenset(target.roots)
        if self._client is None or roots != self._roots:
            self.say(f"loading client {self.spec}")
            self._client = load_client(
                self.spec, target.roots, exclude=self.exclude, include=self.include
            )
            self._roots, self._analysed = roots, None
        if self._base is None:
            released = None
            if self.spec.kind == "release" and self.spec.name and self.spec.version:
                released = (self.spec.name, self.spec.version)
            *self._base, self.baseline_origin = load_baseline(
                self._client.tree.metadata, self.host_name, self.baseline, self.say,
                alias=target.name, released=released, target_version=target.version,
                roots=frozenset(target.roots),
            )  # fmt: skip
        return self._client, *self._base

    def against(self, target: HostAPI) -> Checked:
        """The client's uses (collected as the baseline sees them) checked against
        ``target``."""
        cl, base_api, base_version = self.prepare(target)
        loaded = time.perf_counter()
        roots = target.roots | (base_api.roots if base_api else set())
        spec = self.rules.bindings(target.name).served
        served = served_for(spec, self.model, target, base_api) if spec is not None else None
        types_api = base_api or target
        depends = (
            frozenset(roots),
            types_api.name,
            types_api.version,
            getattr(types_api.tree, "path", types_api.tree.label),
            served.digest() if served is not None else "",
        )
        if self._analysed is not None and self._analysed[0] == depends:
            uses = self._analysed[1]
        else:
            if self._analysed is not None:  # collected for other hosts: read the files again
                self._client = None
                cl = self.prepare(target)[0]
            uses = collect_uses(cl, types_api, roots, self.rules, served)
            self._analysed = (depends, uses)
        collected = time.perf_counter()
        findings = run_checks(uses, target, base_api, cl, self.rules, served)
        findings = [f for f in findings if not is_disabled(f, self.disabled)]
        md = cl.tree.metadata
        allowed = (md.pin_range(self.host_name) or md.pin_range(target.name)) if md else None
        if base_api is not None and allowed is not None and admitted(allowed, base_version):
            findings = keep_baseline(findings, base_api, allowed)
        return Checked(
            cl, base_api, base_version, served, uses, findings,
            loaded=loaded, collected=collected, checked=time.perf_counter(),
        )  # fmt: skip


def _scan(
    client: str | PackageSpec,
    against: str | None,
    baseline: str | None,
    host: str | None,
    progress: Progress | None,
    exclude: tuple[str, ...] | list[str],
    disable: Iterable[str],
    rules: RuleSet | None,
    model: str | None = None,
    include: tuple[str, ...] | list[str] = (),
) -> ScanResult:
    say = progress or (lambda _msg: None)
    t0 = time.perf_counter()
    rules = load_rules() if rules is None else rules
    disabled = frozenset(disable)
    check_ids(disabled, rules, where="disable")
    rules = rules.without(disabled)
    if isinstance(client, PackageSpec):
        client_spec = client
        target_spec = exact_spec(against or "installed", default_name=host)
    else:
        client_spec, target_spec, _ = resolve_specs(client, against, baseline, host)
    # A range or @latest resolved on a cached list the index could not renew: say its age.
    listed = (
        stale_listing(cast(str, target_spec.name))  # a version range names its distribution
        if against and is_version_spec(against)
        else None
    )
    say(f"loading host {target_spec}")
    target = load_host(target_spec)
    host_name = target_spec.name or target.name
    reading = ClientReading(
        client_spec, host_name, baseline=baseline, rules=rules, disabled=disabled,
        model=model, exclude=exclude, include=include, say=say,
    )  # fmt: skip
    got = reading.against(target)
    cl, base_api, base_version, uses = got.client, got.baseline, got.baseline_version, got.uses
    served, findings = got.served, got.findings
    save_snapshots()
    t1, t2, t3 = got.loaded, got.collected, time.perf_counter()
    skipped = list(cl.skipped)
    return ScanResult(
        client_name=cl.name,
        client_version=cl.version,
        host_name=host_name,
        baseline=base_version,
        baseline_origin=reading.baseline_origin,
        target=target_spec.version or target.version,
        findings=findings,
        skipped=skipped,
        uses=uses,
        client_lines=cl.lines,
        client_texts=cl.texts,
        client_other={**cl.unread, **cl.discovered.packaging},
        client_raw=dict(cl.raw),
        discovery=cl.summary(),
        client_root=getattr(cl.tree, "root", None) if client_spec.kind == "directory" else None,
        rules=rules,
        target_release=release_of(target),
        baseline_release=release_of(base_api) if base_api is not None else None,
        served=served,
        release_list=listed,
        stats={
            "load_seconds": t1 - t0,
            "uses_seconds": t2 - t1,
            "checks_seconds": t3 - t2,
            "uses": len(uses),
            "host_files_target": target.loaded_files(),
            "host_files_baseline": base_api.loaded_files() if base_api else 0,
            "undecided_names": len(getattr(target, "undecided", [])),
            "undecided": list(getattr(target, "undecided", []))[:50],
            # The client's requests to, reads from and launches of the host's server (checked
            # against the target alone without a baseline: none goes unchecked; the key stays
            # in the JSON contract).
            "http_uses": sum(1 for u in uses if u.kind in HTTP_KINDS),
            "http_unchecked": 0,
        },
    )
