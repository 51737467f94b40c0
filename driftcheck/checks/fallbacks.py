"""Import moves that keep every release the client allows: a fix must not drop the baseline.

A client whose declared range on the host still admits the baseline (lm-eval's ``vllm>=0.4.2``
scanned from 0.10.0 to 0.16.0) keeps running there after a fix. An import moved to a home the
baseline does not have would break it, so such a fix tries the new home first and the old one
after (``fallback``: the codemod writes both imports); the fix's description says so. A
rename of a name read off a module cannot fall back: its description says the release it drops.
"""

from __future__ import annotations

import dataclasses

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from driftcheck.findings import Finding
from driftcheck.host.api import Found, HostAPI
from driftcheck.kinds import FixSafety


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
    """Import moves to a home the baseline lacks, made to fall back to the old import; a name
    read off a module renamed to one the baseline lacks says that it drops the baseline."""
    out = []
    for f in findings:
        fix = f.fix
        p = dict(fix.params) if fix and fix.safety != FixSafety.MANUAL else {}
        new = ""
        if fix and fix.codemod == "rename-import":
            new = p.get("new_symbol") or p.get("new", "")
        elif fix and fix.codemod == "rename-attribute" and f.symbol and p.get("new"):
            new = f"{f.symbol.rsplit('.', 1)[0]}.{p['new']}"
        # ``new`` is only set from a fix: ``fix is None`` never holds here.
        if not new or fix is None or isinstance(baseline.resolve(new), Found):
            out.append(f)
            continue
        release = f"{baseline.name} {baseline.version}, which the client's range "
        release += f"{baseline.name}{allowed} admits, has no {new}"
        if fix.codemod == "rename-import":
            fix = dataclasses.replace(
                fix,
                description=f"{fix.description}, and from the old home where that fails: {release}",
                params=(*fix.params, ("fallback", baseline.version)),
            )
        else:
            fix = dataclasses.replace(fix, description=f"{fix.description}; drops {release}")
        out.append(dataclasses.replace(f, fix=fix))
    return out
