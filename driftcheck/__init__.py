"""driftcheck: find API drift between a client package and the host library it calls into.

A library first; the command line (``driftcheck``) is a thin layer over these functions::

    import driftcheck

    result = driftcheck.scan("speculators==0.3.0", against="vllm==0.16.0")
    for finding in result.findings:
        print(finding.file, finding.line, finding.kind, finding.message)

    checked = driftcheck.verify_result(result)    # each finding's witness on the real releases
    done = driftcheck.fix("./src", against="vllm==0.16.0", apply=True)
    rules = driftcheck.load_rules("my-rules/")   # the built-in rules and your own
    history = driftcheck.timeline("speculators==0.3.0", "vllm", "0.11.0", "0.16.0")
    report = driftcheck.probe("speculators==0.3.0", "vllm==0.16.0", fix=True)
    ranged = driftcheck.probe_range("speculators==0.3.0", releases=["0.11.0", "0.16.0"], fix=True)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from driftcheck.errors import DriftcheckError, FetchError, SourceError, UsageError
from driftcheck.findings import Evidence, Finding, Fix

if TYPE_CHECKING:
    from collections.abc import Callable

    from driftcheck.fixes.run import FixResult, fix
    from driftcheck.pipeline import scan
    from driftcheck.probes.outcome import ProbeReport
    from driftcheck.probes.ranges import RangeReport
    from driftcheck.result import ScanResult
    from driftcheck.rules import Rule, RuleSet, load_rules
    from driftcheck.sources.specs import PackageSpec, parse_spec
    from driftcheck.timelines import TimelineResult, timeline
    from driftcheck.witness.verify import verify_result

#: Public name -> the module that defines it, imported on first use (``driftcheck --help``
#: stays fast: the CLI does not pay for the analysis modules it does not run).
_LAZY = {
    "FixResult": "driftcheck.fixes.run",
    "fix": "driftcheck.fixes.run",
    "ScanResult": "driftcheck.result",
    "scan": "driftcheck.pipeline",
    "Rule": "driftcheck.rules",
    "RuleSet": "driftcheck.rules",
    "load_rules": "driftcheck.rules",
    "PackageSpec": "driftcheck.sources.specs",
    "RangeReport": "driftcheck.probes.ranges",
    "parse_spec": "driftcheck.sources.specs",
    "TimelineResult": "driftcheck.timelines",
    "timeline": "driftcheck.timelines",
    "verify_result": "driftcheck.witness.verify",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'driftcheck' has no attribute {name!r}")


def probe(
    client: str,
    host: str = "installed",
    *,
    progress: Callable[[str], None] | None = None,
    **options: Any,
) -> ProbeReport:
    """Run the client's real workload against a real host, unpatched and patched.

    Args:
        client: Client spec (``speculators==0.3.0``, an installed name, or a directory).
        host: ``vllm==X`` or ``installed``.
        progress: Callback receiving short progress messages.
        **options: The other fields of :class:`driftcheck.probes.options.ProbeOptions`:
            ``fix``, ``patches``, ``env``, ``model``, ``tensor_parallel_size``,
            ``trust_remote_code``, ``layer_ids``, ``timeout``, ``max_model_len``, ``keep``.

    Returns:
        The report; ``report.ok`` is True when the last run passed every check.
    """
    from driftcheck.probes.harness import probe as run_probe
    from driftcheck.probes.options import ProbeOptions

    try:
        chosen = ProbeOptions(client=client, host=host, **options)
    except TypeError as exc:
        raise UsageError(f"probe: {exc}") from None
    return run_probe(chosen, progress=progress)


def probe_range(
    client: str,
    host: str = "vllm",
    *,
    releases: list[str] | None = None,
    first: str | None = None,
    last: str | None = None,
    progress: Callable[[str], None] | None = None,
    **options: Any,
) -> RangeReport:
    """Run the probe on each release of a range (managed environments built on demand, two at
    a time, reused from the cache).

    Args:
        client: Client spec, as for :func:`probe`.
        host: The host's name, or a range of its releases (``"vllm>=0.11,<=0.32"``).
        releases: These releases (e.g. ``["0.11.0", "0.16.0"]``).
        first: The first release (with ``last``: the last one, or ``latest``).
        last: The last release.
        progress: Callback receiving short progress messages.
        **options: The other fields of :class:`driftcheck.probes.options.ProbeOptions`
            (``fix``, ``unsafe_fixes``, ``model``, ``timeout``, ...).

    Returns:
        One row per release; ``ranged.newest_patched_pass()`` names the newest release on
        which the (patched) client passes, ``ranged.ok`` whether every release passed.
    """
    from driftcheck.probes.options import ProbeOptions
    from driftcheck.probes.ranges import probe_range as run_range
    from driftcheck.probes.ranges import range_versions

    try:
        chosen = ProbeOptions(client=client, host=host, **options)
    except TypeError as exc:
        raise UsageError(f"probe_range: {exc}") from None
    picked = ",".join(releases) if releases is not None else None
    versions = range_versions(host, first, last, picked)
    if versions is None:
        raise UsageError("probe_range: name the releases (releases=, first=, or a host range)")
    return run_range(chosen, versions, progress=progress)


__all__ = [
    "DriftcheckError",
    "Evidence",
    "FetchError",
    "Finding",
    "Fix",
    "FixResult",
    "PackageSpec",
    "RangeReport",
    "Rule",
    "RuleSet",
    "ScanResult",
    "SourceError",
    "TimelineResult",
    "UsageError",
    "fix",
    "load_rules",
    "parse_spec",
    "probe",
    "probe_range",
    "scan",
    "timeline",
    "verify_result",
]
