"""One client across many host releases: where each drift first appears.

Each release in the range is fetched (in parallel, into the cache) and checked as ``scan``
checks one target (:class:`driftcheck.pipeline.ClientReading`): the client is read once and,
with a baseline, its uses collected once for the whole range.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import cast

from packaging.version import Version

from driftcheck.errors import DriftcheckError, UsageError
from driftcheck.findings import Finding, severity_rank
from driftcheck.host.load import load_host, release_host, save_snapshots
from driftcheck.pipeline import ClientReading
from driftcheck.registry import check_ids
from driftcheck.rules.ruleset import RuleSet, load_rules
from driftcheck.sources.fetch import fetch_release
from driftcheck.sources.specs import PackageSpec, parse_spec
from driftcheck.sources.versions import releases_between, stale_listing
from driftcheck.workspace import members_of, package_settings


@dataclass
class TimelineResult:
    """Findings per release, oldest release first."""

    client_name: str
    client_version: str
    host: str
    baseline: str | None
    versions: list[str]
    findings: dict[str, list[Finding]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    #: Where ``--to latest`` was resolved from when the index could not be reached (its age).
    release_list: dict | None = None
    #: Where the baseline came from (:attr:`driftcheck.result.ScanResult.baseline_origin`).
    baseline_origin: dict = field(default_factory=lambda: {"source": "none"})

    def first_breaking(self) -> dict[str, tuple[str, Finding]]:
        """Fingerprint → (first release where it appears, the finding there)."""
        out: dict[str, tuple[str, Finding]] = {}
        for v in self.versions:
            for f in self.findings.get(v, []):
                out.setdefault(f.fingerprint, (v, f))
        return out

    def newest_clean(self, fail_on: str = "warning") -> str | None:
        """The newest release before the first one with a finding at or above ``fail_on``."""
        clean = None
        for v in self.versions:
            if v in self.errors:
                continue
            if any(
                severity_rank(f.severity) >= severity_rank(fail_on)
                for f in self.findings.get(v, [])
            ):
                break
            clean = v
        return clean

    def to_dict(self) -> dict:
        """JSON form: per release the findings' fingerprints."""
        first = self.first_breaking()
        return {
            "client": {"name": self.client_name, "version": self.client_version},
            "host": {
                "name": self.host,
                "baseline": self.baseline,
                "baseline_source": self.baseline_origin.get("source", "none"),
                **({"release_list": self.release_list} if self.release_list else {}),
            },
            "releases": [
                {
                    "version": v,
                    "error": self.errors.get(v),
                    "fingerprints": [f.fingerprint for f in self.findings.get(v, [])],
                }
                for v in self.versions
            ],
            "drifts": [
                {
                    "fingerprint": fp,
                    "first_breaking": v,
                    "rule": f.rule,
                    "kind": f.kind,
                    "severity": f.severity,
                    "file": f.file,
                    "line": f.line,
                    "symbol": f.symbol,
                }
                for fp, (v, f) in first.items()
            ],
            "newest_clean": self.newest_clean(),
            "seconds": round(self.seconds, 2),
        }


def timeline(
    client: str,
    host: str,
    first: str,
    last: str = "latest",
    *,
    baseline: str | None = None,
    progress: Callable[[str], None] | None = None,
    workers: int = 4,
    rules: RuleSet | None = None,
    exclude: Iterable[str] = (),
    include: Iterable[str] = (),
    disable: Iterable[str] = (),
    model: str | None = None,
) -> TimelineResult:
    """Scan ``client`` against every final release of ``host`` from ``first`` to ``last``.

    Each release is checked as :func:`driftcheck.scan` checks it (one code path,
    :class:`driftcheck.pipeline.ClientReading`): a release's findings are the ones ``scan
    --against HOST==RELEASE`` reports with the same baseline, model and settings.

    Args:
        client: Client spec (``name==version``, installed name, or directory).
        host: The host's distribution name.
        first: First release of the range.
        last: Last release, or ``"latest"``.
        baseline: Baseline host version; default: the client's own pin on the host.
        progress: Callback receiving short progress messages.
        workers: Releases fetched in parallel.
        rules: The rules to use; default: the built-in rules.
        exclude: Globs of client files not to read (as :func:`driftcheck.scan`).
        include: Globs of client files to read beyond what its packaging says.
        disable: Check, kind or rule ids not to report.
        model: The model the host serves (as :func:`driftcheck.scan`); default: the one the
            host's binding rule names.

    In a monorepo each package also reads its own ``exclude`` / ``include`` / ``disable`` /
    ``baseline`` settings, as :func:`driftcheck.scan` does (:mod:`driftcheck.workspace`).
    """
    say = progress or (lambda _m: None)
    t0 = time.perf_counter()
    rules = load_rules() if rules is None else rules
    disabled = frozenset(disable)
    check_ids(disabled, rules, where="disable")
    exclude, include = list(exclude), list(include)
    try:
        Version(first)
        if last != "latest":
            Version(last)
    except ValueError:
        raise UsageError(
            f"--from/--to must be versions (or 'latest'): {first!r}, {last!r}"
        ) from None
    versions = releases_between(host, first, last)
    listed = stale_listing(host) if last == "latest" else None
    say(f"{len(versions)} releases of {host}: {versions[0]} … {versions[-1]}")
    client_spec = parse_spec(client)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        fetches = {v: pool.submit(fetch_release, host, v) for v in versions}
        first_api = load_host(PackageSpec(kind="release", name=host, version=versions[0]))
        # A monorepo: each package with its own pin, paths from the monorepo's top.
        members = members_of(client_spec)
        parts: list[tuple[str, ClientReading]] = []
        bases = []  # each package's client and baseline: the result's names, before any release
        for prefix, spec_, (ex, inc, base, off) in _packages(
            client_spec, members, exclude, include, baseline, disabled
        ):
            check_ids(off, rules, where=f"{prefix or client}: 'disable'")
            reading = ClientReading(
                spec_, host, baseline=base, rules=rules.without(off), disabled=off,
                model=model, exclude=ex, include=inc, say=say,
            )  # fmt: skip
            bases.append(reading.prepare(first_api))
            parts.append((prefix, reading))
        if members:
            versions_of = {b[2] for b in bases}
            # Members: the client is a directory, which has a path.
            name, version = cast(Path, client_spec.path).resolve().name, ""
            base_version = next(iter(versions_of)) if len(versions_of) == 1 else None
        else:
            name, version, base_version = bases[0][0].name, bases[0][0].version, bases[0][2]
        kept = [first_api, *(b[1] for b in bases)]
        result = TimelineResult(name, version, host, base_version, versions, release_list=listed)
        if base_version is not None:
            result.baseline_origin = parts[0][1].baseline_origin
        for v in versions:
            try:
                fetches[v].result()
                spec = PackageSpec(kind="release", name=host, version=v)
                target = load_host(spec)
                result.findings[v] = [
                    replace(f, file=prefix + f.file) if prefix else f
                    for prefix, reading in parts
                    for f in reading.against(target).findings
                ]
                save_snapshots()
                if all(target is not api for api in kept):
                    release_host(spec)  # one release at a time in memory
                say(f"{host} {v}: {len(result.findings[v])} finding(s)")
            except UsageError:
                raise  # the run's own input (a --model without a config.json), as scan says it
            except DriftcheckError as exc:
                result.errors[v] = str(exc)
                say(f"{host} {v}: {exc}")
    result.seconds = time.perf_counter() - t0
    return result


def _packages(
    client: PackageSpec,
    members: list[Path],
    exclude: list[str],
    include: list[str],
    baseline: str | None,
    disabled: frozenset[str],
) -> list[tuple[str, PackageSpec, tuple[list[str], list[str], str | None, frozenset[str]]]]:
    """The clients a timeline reads: (path prefix, spec, (exclude, include, baseline, disabled
    ids)); each package of a monorepo with its own settings added."""
    if not members:
        return [("", client, (exclude, include, baseline, disabled))]
    out = []
    root = client.path
    assert root is not None
    for member in members:
        own, _unused = package_settings(root, member, exclude, include)
        settings = (own.exclude, own.include, baseline or own.baseline, disabled | set(own.disable))
        out.append((member.relative_to(root).as_posix() + "/", parse_spec(str(member)), settings))
    return out
