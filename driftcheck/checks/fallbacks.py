"""Import moves that keep every release the client allows: a fix must not drop the baseline.

A client whose declared range on the host still admits the baseline (lm-eval's ``vllm>=0.4.2``
scanned from 0.10.0 to 0.16.0) keeps running there after a fix. An import moved to a home the
baseline does not have would break it, so such a fix tries the new home first and the old one
after (``fallback``: the codemod writes both imports); the fix's description says so.
"""

from __future__ import annotations

import dataclasses

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from driftcheck.findings import Finding
from driftcheck.host.api import Found, HostAPI


def admitted(allowed: SpecifierSet | None, version: str | None) -> bool:
    """Whether a client's declared range on the host admits ``version``."""
    if allowed is None or not version:
        return False
    try:
        return allowed.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False


def keep_baseline(
    findings: list[Finding], baseline: HostAPI, allowed: SpecifierSet
) -> list[Finding]:
    """Import moves to a home the baseline lacks, made to fall back to the old import."""
    out = []
    for f in findings:
        p = dict(f.fix.params) if f.fix and f.fix.codemod == "rename-import" else {}
        new = p.get("new_symbol") or p.get("new", "")
        if not new or f.fix.safety == "manual" or isinstance(baseline.resolve(new), Found):  # type: ignore[union-attr]
            out.append(f)
            continue
        said = (
            f"{f.fix.description}, and from the old home where that fails: "  # type: ignore[union-attr]
            f"{baseline.name} {baseline.version}, which the client's range "
            f"{baseline.name}{allowed} admits, has no {new}"
        )
        fix = dataclasses.replace(
            f.fix,  # type: ignore[arg-type]
            description=said,
            params=(*f.fix.params, ("fallback", baseline.version)),  # type: ignore[union-attr]
        )
        out.append(dataclasses.replace(f, fix=fix))
    return out
