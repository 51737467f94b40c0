"""Patches of host names the target dropped: a store to a host attribute that existed at
baseline (``engine_mod.TIMEOUT_S = 600``, ``setattr(mod, "X", v)``, ``Cls.method = f``).

Python accepts the store, so nothing fails where it runs: what breaks is that the patch no
longer does anything, since the host does not read that name any more (a warning, not an error).
Where the name moved (:mod:`driftcheck.host.relocation`), or was at baseline a copy of another
host name that the target still has, the finding says where the target's own code reads it now.
A read of a dropped name is a ``missing-symbol`` or ``moved-symbol`` error.
"""

from __future__ import annotations

import re

from driftcheck.checks.context import CheckContext, finding
from driftcheck.checks.declaration import Check, CheckId
from driftcheck.checks.missing_symbol import dropped
from driftcheck.client.use import Use
from driftcheck.findings import Evidence, Finding, Fix
from driftcheck.host.api import Found, HostAPI
from driftcheck.host.relocation import NewHome, find_new_home
from driftcheck.host.served import Served
from driftcheck.kinds import FixSafety, Kind, Severity, Witness

STALE_PATCH = CheckId(
    "stale-patch",
    Kind.MISSING_SYMBOL,
    Severity.WARNING,
    Witness.RESOLVE,
    fixes=(FixSafety.MANUAL,),
)
#: What this check reports; :mod:`driftcheck.checks.catalog` lists it.
CHECK = Check(__name__, (STALE_PATCH,))

_IDENTIFIERS = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def check(use: Use, ctx: CheckContext) -> list[Finding]:
    """Report a store to a host name that existed at baseline and the target dropped."""
    if not use.store:
        return []
    got = dropped(use, ctx)
    if got is None or got[0] != use.symbol:
        return []  # a dropped module or class on the way: the read of it is what breaks
    gone, served = got
    if not ctx.once(use.file, f"{gone}@{use.line}"):
        return []
    base = ctx.baseline.resolve(gone) if ctx.baseline else None
    evidence = [ctx.evidence(ctx.base, base)] if ctx.baseline else []
    said = served.message if isinstance(served, Served) else ""
    home = find_new_home(ctx.target, gone, baseline=ctx.baseline, message=said)
    host = f"{ctx.target.name} {ctx.target.version}"
    versions = f" (present in {ctx.base.version})" if ctx.baseline else ""
    message = (
        f"{gone} is gone from {host}{versions}: the assignment still runs, but the patch no "
        "longer has any effect"
    )
    now = _copied_from(ctx, gone)
    if now is not None:
        message += f"; at {ctx.base.version} it was a copy of {now.path}"
    elif isinstance(home, NewHome):
        now = home.found
        message += f"; it now lives at {home.name}"
    fix = Fix(FixSafety.MANUAL, f"remove the patch of {gone}, or patch what {host} reads instead")
    if now is not None:
        where = _reader(ctx.target, now)
        if where is not None:
            message += f", which {host} reads at {where[0]}:{where[1]}"
            evidence.append(Evidence(ctx.target.version, where[0], where[1], "the host reads it"))
        else:
            evidence.append(Evidence(ctx.target.version, now.file, now.line, "defined here"))
        fix = Fix(
            FixSafety.MANUAL,
            f"patch {now.path} instead, if {host} reads it when it runs (not once, at import)",
        )
    return [
        finding(use, STALE_PATCH, symbol=gone, message=message, evidence=tuple(evidence), fix=fix)
    ]


def _copied_from(ctx: CheckContext, gone: str) -> Found | None:
    """The host name the baseline's ``gone = other.NAME`` copied, where the target has it."""
    if ctx.baseline is None:
        return None
    before = ctx.baseline.resolve(gone)
    if not isinstance(before, Found) or before.kind != "attribute":
        return None
    text = str(getattr(before.obj, "value", "") or "")
    if "." not in text or not _IDENTIFIERS.fullmatch(text):
        return None
    source = ctx.baseline.resolve(f"{gone.rsplit('.', 1)[0]}.{text}")
    if not isinstance(source, Found) or source.path == gone:
        return None
    now = ctx.target.resolve(source.path)
    return now if isinstance(now, Found) else None


def _reader(api: HostAPI, found: Found) -> tuple[str, int] | None:
    """The first line of the host's own code that reads ``found``'s name: in its own file,
    then in the files that name its module (definitions, imports, comments and the name as a
    string, such as an environment variable's, are no reads)."""
    name = found.path.rsplit(".", 1)[-1]
    module = found.path.rsplit(".", 1)[0]
    word = re.compile(rf"(?<![\w\"']){re.escape(name)}(?![\w\"'])")  # not in a string's text
    defines = re.compile(
        rf"^\s*(?:{re.escape(name)}\s*(?::[^=]*)?=[^=]|def |class |#|from |import )"
    )
    texts = api.source_texts()
    own = [found.file] if found.file in texts else []
    others = sorted(
        rel
        for rel, text in texts.items()
        if rel != found.file and name in text and module.rsplit(".", 1)[-1] in text
    )
    for rel in own + others:
        for n, line in enumerate(texts[rel].splitlines(), start=1):
            if word.search(line) and not defines.match(line):
                return rel, n
    return None
