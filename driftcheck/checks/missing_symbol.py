"""Missing and moved symbols: a host name the client imports or reaches that the target lacks.

A symbol that still exists elsewhere in the target (a class or function of the same name) is
reported as ``moved-symbol`` with its new home; otherwise as ``missing-symbol``. A removed
module or class is reported once per file, at its first use.
"""

from __future__ import annotations

from driftcheck.checks.context import CheckContext, finding, missing_module, prefixes
from driftcheck.client.use import Use
from driftcheck.findings import Evidence, Finding, Fix
from driftcheck.host.api import Found, HostAPI
from driftcheck.host.relocation import find_new_home

KINDS = ("import", "attribute", "call", "subclass")


def _first_missing_prefix(api: HostAPI, symbol: str) -> str:
    return next((p for p in prefixes(symbol) if api.resolve(p) is None), symbol)


def check(use: Use, ctx: CheckContext) -> list[Finding]:
    """Report a host symbol that resolved at baseline and does not exist on the target."""
    if use.kind not in KINDS or use.receiver:
        return []
    target_found = ctx.target.resolve(use.symbol)
    gone_module = missing_module(ctx.target, use.symbol) if use.kind == "import" else None
    if target_found is not None and gone_module is None:
        return []
    base_found = ctx.baseline.resolve(use.symbol) if ctx.baseline else None
    if ctx.baseline is not None and not isinstance(base_found, Found):
        if gone_module is None or missing_module(ctx.baseline, use.symbol) is not None:
            return []  # already broken (or undecidable) at baseline: not drift
    gone = gone_module or _first_missing_prefix(ctx.target, use.symbol)
    if not ctx.once(use.file, gone):
        return []
    evidence = [e for e in (ctx.evidence(ctx.baseline, base_found),) if e] if ctx.baseline else []
    new_home = find_new_home(ctx.target, gone, baseline=ctx.baseline)
    versions = f" (present in {ctx.baseline.version})" if ctx.baseline else ""
    if new_home is not None:
        evidence.append(Evidence(ctx.target.version, new_home.file, new_home.line, "new location"))
        new_symbol = new_home.path + use.symbol[len(gone) :]
        return [
            finding(
                use,
                "moved-symbol",
                symbol=gone,
                message=(
                    f"{gone} is no longer there in {ctx.target.name} {ctx.target.version}"
                    f"{versions}; it now lives at {new_home.path}"
                ),
                evidence=tuple(evidence),
                fix=Fix(
                    "safe",
                    f"import it from {new_home.path.rsplit('.', 1)[0]}",
                    codemod="rename-import",
                    params=(("old", gone), ("new", new_home.path), ("new_symbol", new_symbol)),
                ),
            )
        ]
    return [
        finding(
            use,
            "missing-symbol",
            symbol=gone,
            message=f"{gone} does not exist in {ctx.target.name} {ctx.target.version}{versions}",
            evidence=tuple(evidence),
            fix=Fix("manual", f"{gone} was removed; find its replacement in the host's changes"),
        )
    ]
