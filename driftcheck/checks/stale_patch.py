"""Patches of host names the target dropped: a store to a host attribute that existed at
baseline (``engine_mod.TIMEOUT_S = 600``, ``setattr(mod, "X", v)``, ``Cls.method = f``).

Python accepts the store, so nothing fails where it runs: what breaks is that the patch no
longer does anything, since the host does not read that name any more (a warning, not an error).
Where the name moved (:mod:`driftcheck.host.relocation`), or was at baseline a copy of another
host name that the target still has, the finding says where the target's own code reads it now.
A read of a dropped name is a ``missing-symbol`` or ``moved-symbol`` error.

A patch of a module's name the target still has is stale too when the host's own code stopped
reading it through that module (``unread-patch``): at baseline some host code looked the name up
through the patched module (``mod.fn(...)``, ``mod``'s own global reads, ``from mod import fn``),
on the target none does and the host reads the same object through another module (``mod``
became a shim re-exporting ``new.fn``, and the callers call ``new.fn``). The finding says where
(:mod:`driftcheck.host.readers`). A class attribute is not judged this way: a patch of
``Cls.method`` reaches every holder of the class, wherever it is imported from.
"""

from __future__ import annotations

import re
from typing import cast

from driftcheck.checks.context import CheckContext, finding
from driftcheck.checks.declaration import Check, CheckId
from driftcheck.checks.missing_symbol import dropped
from driftcheck.client.use import Use
from driftcheck.findings import Evidence, Finding, Fix
from driftcheck.host.api import Found, HostAPI
from driftcheck.host.readers import Read, reads
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
UNREAD_PATCH = CheckId(
    "unread-patch",
    Kind.MOVED_SYMBOL,
    Severity.WARNING,
    Witness.RESOLVE,
    fixes=(FixSafety.MANUAL,),
)
#: What this check reports; :mod:`driftcheck.checks.catalog` lists it.
CHECK = Check(__name__, (STALE_PATCH, UNREAD_PATCH))

_IDENTIFIERS = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def check(use: Use, ctx: CheckContext) -> list[Finding]:
    """Report a store to a host name that existed at baseline and the target dropped."""
    if not use.store:
        return []
    got = dropped(use, ctx)
    if got is None:
        return _unread(use, ctx)
    if got[0] != use.symbol:
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


def _unread(use: Use, ctx: CheckContext) -> list[Finding]:
    """A patch of ``module.name`` the target still has, that the host read through ``module`` at
    baseline and reads only through another module on the target."""
    if ctx.baseline is None or "." not in use.symbol:
        return []
    module, _, name = use.symbol.rpartition(".")
    if ctx.target.module(module) is None or ctx.baseline.module(module) is None:
        return []  # a class's attribute, or no module on one side
    now = ctx.target.resolve(use.symbol)
    if not isinstance(now, Found) or not isinstance(ctx.baseline.resolve(use.symbol), Found):
        return []
    also = _patched_names(ctx)
    if not any(r.via == module for r in reads(ctx.baseline, name, also)):
        return []  # the baseline did not read it through the patched module either
    target_reads = reads(ctx.target, name, _read_at_baseline(ctx))
    if any(r.via == module for r in target_reads):
        return []  # some host code still looks it up where the patch puts it
    elsewhere = _reads_of(ctx.target, now, target_reads)
    if elsewhere is None or not ctx.once(use.file, f"unread:{use.symbol}@{use.line}"):
        return []
    host = f"{ctx.target.name} {ctx.target.version}"
    message = (
        f"{host} no longer reads {use.symbol} through {module}: it reads {_how(elsewhere, name)}"
        f" at {elsewhere.file}:{elsewhere.line}, so the patch no longer has any effect there "
        f"(in {ctx.base.version} the host read it through {module})"
    )
    base_read = next(r for r in reads(ctx.baseline, name) if r.via == module)
    evidence = (
        Evidence(ctx.base.version, base_read.file, base_read.line, "the host reads it here"),
        Evidence(ctx.target.version, elsewhere.file, elsewhere.line, "the host reads it here"),
    )
    fix = Fix(
        FixSafety.MANUAL,
        f"patch {elsewhere.via}.{name} instead (the module {host} reads it through), if it is "
        "read when it runs (not copied once, at import)",
    )
    return [
        finding(use, UNREAD_PATCH, symbol=use.symbol, message=message, evidence=evidence, fix=fix)
    ]


def _patched_names(ctx: CheckContext) -> list[str]:
    """The names of every module attribute the client patches (a module file on both releases):
    the host's reads of them are searched for together, one pass over its files (one pass
    per name took transformers 5.24.0's scan minutes)."""
    cached = ctx.__dict__.get("_patched_names")
    if cached is None:
        names: set[str] = set()
        trees = [ctx.target.tree, *([ctx.baseline.tree] if ctx.baseline else [])]
        for u in ctx.uses:
            module, _, name = u.symbol.rpartition(".")
            if u.store and module and name not in names:
                if all(tree.module_file(module) is not None for tree in trees):
                    names.add(name)  # files only: no module is visited for this
        cached = ctx.__dict__["_patched_names"] = sorted(names)
    return cast(list[str], cached)


def _read_at_baseline(ctx: CheckContext) -> list[str]:
    """The patched names the baseline reads through a module the client patches them in: the
    only ones whose reads on the target are asked for (searched together; the others' target
    pass parsed as many files for names no check asks about)."""
    cached = ctx.__dict__.get("_read_at_baseline")
    if cached is None:
        assert ctx.baseline is not None
        also = _patched_names(ctx)
        names = set(also)
        modules: dict[str, set[str]] = {}
        for u in ctx.uses:
            module, _, name = u.symbol.rpartition(".")
            if u.store and module and name in names:
                modules.setdefault(name, set()).add(module)
        cached = ctx.__dict__["_read_at_baseline"] = sorted(
            n for n in also if any(r.via in modules[n] for r in reads(ctx.baseline, n, also))
        )
    return cast(list[str], cached)


def _how(read: Read, name: str) -> str:
    """How a read reaches ``name``, in words."""
    if read.how == "global":
        return f"{name} as a global of {read.via}"
    if read.how == "imported":
        return f"{name} imported from {read.via}"
    return f"{read.via}.{name}"


def _reads_of(api: HostAPI, found: Found, candidates: list[Read]) -> Read | None:
    """The first read in ``candidates`` whose module holds the same object as ``found``."""
    name = found.path.rsplit(".", 1)[-1]
    same: dict[str, bool] = {}
    for r in candidates:
        if r.via not in same:
            got = api.resolve(f"{r.via}.{name}") if api.owns(r.via) else None
            same[r.via] = isinstance(got, Found) and got.path == found.path
        if same[r.via]:
            return r
    return None


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
