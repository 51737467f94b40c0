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
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from driftcheck.errors import DriftcheckError, FetchError, SourceError, UsageError
from driftcheck.findings import Evidence, Finding, Fix

if TYPE_CHECKING:
    from collections.abc import Callable

    from driftcheck.fixes.run import FixResult, fix
    from driftcheck.pipeline import ScanResult, scan
    from driftcheck.probes.outcome import ProbeReport
    from driftcheck.rules import Rule, RuleSet, load_rules
    from driftcheck.sources.specs import PackageSpec, parse_spec
    from driftcheck.timelines import TimelineResult, timeline
    from driftcheck.witness.verify import verify_result

#: Public name -> the module that defines it, imported on first use (``driftcheck --help``
#: stays fast: the CLI does not pay for the analysis modules it does not run).
_LAZY = {
    "FixResult": "driftcheck.fixes.run",
    "fix": "driftcheck.fixes.run",
    "ScanResult": "driftcheck.pipeline",
    "scan": "driftcheck.pipeline",
    "Rule": "driftcheck.rules",
    "RuleSet": "driftcheck.rules",
    "load_rules": "driftcheck.rules",
    "PackageSpec": "driftcheck.sources.specs",
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
    **options: object,
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
        chosen = ProbeOptions(client=client, host=host, **options)  # type: ignore[arg-type]
    except TypeError as exc:
        raise UsageError(f"probe: {exc}") from None
    return run_probe(chosen, progress=progress)


__all__ = [
    "DriftcheckError",
    "Evidence",
    "FetchError",
    "Finding",
    "Fix",
    "FixResult",
    "PackageSpec",
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
    "scan",
    "timeline",
    "verify_result",
]
