"""The probe across host releases: ``driftcheck probe CLIENT --host "vllm>=0.11,<=0.32"``,
``--host vllm --from X --to Y`` or ``--releases 0.11.0,0.16.0``.

Each release gets the single-release probe (:func:`driftcheck.probes.harness.probe`): the
unpatched client, then the patched one (``--fix``: driftcheck's patches for that release). The
managed environments are built on demand, at most two at a time, in the background while the
earlier releases run (one probe runs at a time: each uses the whole machine), and reused from the
cache. :class:`RangeReport` holds one :class:`ReleaseRun` per release and names the newest release
on which the patched client passes; :func:`outside_host` tells a failure that is not the host's
API (the client importing a package other than the host, which the environment has at another
version) from drift.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from packaging.version import InvalidVersion, Version

from driftcheck.errors import DriftcheckError, UsageError
from driftcheck.probes.blame import blame, outside_host
from driftcheck.probes.options import ProbeOptions
from driftcheck.probes.outcome import ProbeReport, RunOutcome, error_line, left_at

Progress = Callable[[str], None]
#: Managed environments built at once (each is pip downloads and ~6-8 GB on disk).
BUILDS_AT_ONCE = 2


@dataclass
class ReleaseRun:
    """One release of the range: its probe report, or why it could not run."""

    version: str
    report: ProbeReport | None = None
    #: The environment or the fixes could not be made (one line).
    error: str | None = None
    #: ``--fix`` made no patch for this release (nothing to fix): only the unpatched run.
    no_fix_needed: bool = False
    #: The managed environment: ``cached`` or ``built`` (with its build seconds).
    env_source: str = ""
    build_seconds: float | None = None
    seconds: float = 0.0

    def run(self, label: str) -> RunOutcome | None:
        """The unpatched or patched run, if it ran."""
        if self.report is None:
            return None
        return next((r for r in self.report.runs if r.label == label), None)

    @property
    def ok(self) -> bool:
        """The last run (patched when there is one) passed every check."""
        return self.report is not None and self.report.ok

    def blame(self, label: str, host: str) -> dict | None:
        """Where the failure of a run lies (:func:`driftcheck.probes.blame.blame`; the
        unpatched run is judged without the fixes: only a failure outside the host's API)."""
        run = self.run(label)
        if run is None or run.ok or self.report is None:
            return None
        if label != "patched":
            got = blame(run, host, fixes=[], left=[], hunks={})
            return got if got and got["kind"] == "outside-host" else None
        rep = self.report
        return blame(run, host, fixes=rep.fixes, left=rep.left, hunks=rep.hunks)

    def to_dict(self, host: str) -> dict:
        runs: dict[str, dict | None] = {}
        for label in ("unpatched", "patched"):
            r = self.run(label)
            if r is None:
                runs[label] = None
                continue
            cell = runs[label] = cell_dict(r, host)
            if not r.ok:
                cell["blame"] = self.blame(label, host)
            if label == "patched" and not r.ok and self.report is not None:
                cell["left_for_a_person"] = left_at(r, self.report.left)
        return {
            "version": self.version,
            "ok": self.ok,
            "error": self.error,
            "no_fix_needed": self.no_fix_needed,
            "env": {"source": self.env_source, "build_seconds": self.build_seconds},
            **runs,
            "fixes": self.report.fix_verdicts() if self.report else [],
            "seconds": round(self.seconds, 1),
            "report": self.report.to_dict() if self.report else None,
        }


@dataclass
class RangeReport:
    """The probe on every release of a range, oldest first."""

    client: str
    client_version: str
    host: str
    options: ProbeOptions
    releases: list[ReleaseRun] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Every release's last run passed."""
        return bool(self.releases) and all(r.ok for r in self.releases)

    def newest_patched_pass(self) -> str | None:
        """The newest release on which the patched client (or, where no fix was needed, the
        client as it is) passes every check."""
        passing = [r.version for r in self.releases if r.ok]
        return max(passing, key=_version_key) if passing else None

    def to_dict(self) -> dict:
        name = (
            self.releases[0].report.client_name if self.releases and self.releases[0].report else ""
        )
        return {
            "client": {"spec": self.client, "name": name, "version": self.client_version},
            "host": self.host,
            "fix": self.options.fix,
            "unsafe_fixes": self.options.unsafe_fixes,
            "releases": [r.to_dict(self.host) for r in self.releases],
            "newest_patched_pass": self.newest_patched_pass(),
            "ok": self.ok,
            "seconds": round(self.seconds, 1),
        }


def cell_dict(run: RunOutcome, host: str) -> dict:
    """One run as a table cell: how far it got, the error in one line, where the blame is."""
    return {
        "ok": run.ok,
        "stage": "passed" if run.ok else run.failed_stage,
        "error": None if run.ok else error_line(run),
        "outside_host": None if run.ok else outside_host(run, host),
        "seconds": round(run.seconds, 1),
    }


def _version_key(v: str) -> Version:
    try:
        return Version(v)
    except InvalidVersion:
        return Version("0")


def probe_range(
    options: ProbeOptions,
    versions: list[str],
    *,
    progress: Progress | None = None,
) -> RangeReport:
    """Run the probe on each release of ``versions`` (``options.host`` names the host).

    Raises:
        UsageError: Options that do not go with a range (``--env PATH``, ``--patches``).
    """
    from driftcheck.envs.managed import managed_env, managed_root, read_env_info
    from driftcheck.probes.harness import probe
    from driftcheck.probes.patches import NoPatchError

    say = progress or (lambda _m: None)
    if options.env not in (None, "managed"):
        raise UsageError("a range of releases runs in managed environments (one per release)")
    if options.patches is not None:
        raise UsageError("--patches is for one release; a range takes --fix (patches per release)")
    name = host_name(options.host)
    t0 = time.monotonic()
    report = RangeReport(options.client, "", name, options)
    cached = {v for v in versions if read_env_info(managed_root(v)) is not None}
    say(
        f"{len(versions)} release(s) of {name}: {', '.join(versions)} "
        f"({len(cached)} environment(s) cached, {len(versions) - len(cached)} to build, "
        f"{BUILDS_AT_ONCE} at a time)"
    )
    with ThreadPoolExecutor(max_workers=BUILDS_AT_ONCE) as pool:
        builds: dict[str, Future] = {
            v: pool.submit(_timed_build, managed_env, v, say) for v in versions if v not in cached
        }
        for i, v in enumerate(versions, start=1):
            row = ReleaseRun(v, env_source="cached" if v in cached else "built")
            start = time.monotonic()
            say(f"[{i}/{len(versions)}] {name} {v}")
            try:
                if v in builds:
                    row.build_seconds = builds[v].result()
                one = replace(options, host=f"{name}=={v}", env="managed")
                try:
                    row.report = probe(one, progress=say)
                except NoPatchError:
                    row.no_fix_needed = True
                    say(f"  {name} {v}: driftcheck fix made no patch (nothing to fix)")
                    row.report = probe(replace(one, fix=False, unsafe_fixes=False), progress=say)
            except DriftcheckError as exc:
                row.error = str(exc).splitlines()[0][:400] if str(exc) else type(exc).__name__
                say(f"  {name} {v}: {row.error}")
            row.seconds = time.monotonic() - start
            if row.report is not None and not report.client_version:
                report.client_version = row.report.client_version
            report.releases.append(row)
    report.seconds = time.monotonic() - t0
    return report


def _timed_build(build: Callable, version: str, say: Progress) -> float:
    start = time.monotonic()
    build(version, progress=lambda m: say(f"  [build {version}] {m}"))
    return round(time.monotonic() - start, 1)


def host_name(host: str) -> str:
    """The host's name in a ``--host`` value (``vllm>=0.11`` -> ``vllm``)."""
    return re.split(r"[<>=!~@ ;]", host.strip(), maxsplit=1)[0] or "vllm"


def range_versions(
    host: str, first: str | None, last: str | None, releases: str | None
) -> list[str] | None:
    """The releases a range option names, oldest first; None when the options name one
    release (the single-release probe).

    ``--releases 0.11.0,0.16.0``; ``--host "vllm>=0.11,<=0.32"`` (every final release the index
    lists that the range allows); ``--host vllm --from X [--to Y|latest]`` (as ``timeline``).

    Raises:
        UsageError: Options that contradict each other, or a version that is not one.
        FetchError: The index cannot list the host's releases.
    """
    from driftcheck.sources.versions import (
        available_versions,
        is_version_spec,
        releases_between,
        split_spec,
    )

    ranged = is_version_spec(host) and not host.strip().endswith("@latest")
    picks = [first is not None, releases is not None, ranged]
    if sum(picks) == 0:
        if last is not None:
            raise UsageError("--to goes with --from")
        return None
    if sum(picks) > 1:
        raise UsageError("name the releases one way: --from/--to, --releases or a --host range")
    name = host_name(host)
    if "==" in host and not ranged:
        raise UsageError(f"--host {host} names one release; give the host's name (--host {name})")
    if releases is not None:
        out = [v.strip() for v in releases.replace(" ", ",").split(",") if v.strip()]
        for v in out:
            try:
                Version(v)
            except InvalidVersion:
                raise UsageError(f"--releases: not a version: {v!r}") from None
        if not out:
            raise UsageError("--releases: no version given")
        return sorted(dict.fromkeys(out), key=Version)
    if first is not None:
        try:
            Version(first)
            if last not in (None, "latest"):
                Version(last)
        except InvalidVersion:
            raise UsageError(
                f"--from/--to must be versions (or 'latest'): {first!r}, {last!r}"
            ) from None
        return releases_between(name, first, last or "latest")
    name, spec = split_spec(host)
    out = sorted((v for v in available_versions(name) if Version(v) in spec), key=Version)
    if not out:
        raise UsageError(f"--host {host}: no release of {name} in that range")
    return out
