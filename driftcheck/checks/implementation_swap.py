"""Implementation swaps: a config switch makes a host attribute hold another class.

Mined from the host (``self.x = A(...)`` under one condition, ``B(...)`` under another, or a
factory whose returns differ): when the client reads ``obj.x.member`` and an alternative class
lacks ``member``, the client breaks whenever the switch selects it. The switch is followed to
its source on each release (:mod:`driftcheck.host.switches`: a property, an environment
variable's default, a module literal set the served model's architecture is tested against):

* the target's defaults select the class and the baseline's did not: an error, a warning when
  the source leaves terms of the condition open (the finding names them; a class new since the
  baseline that only open terms select stays information);
* only a setting selects it (or the source decides nothing) and the class is new since the
  baseline: information;
* the defaults decide the same on both releases, or never select it on either, or the client
  sets the switch itself (an environment variable it writes, a field it passes): nothing.
"""

from __future__ import annotations

import re

from driftcheck.checks.context import CheckContext, finding
from driftcheck.checks.declaration import Check, CheckId
from driftcheck.client.use import Use
from driftcheck.findings import Evidence, Finding, Fix
from driftcheck.host.api import Found, HostAPI
from driftcheck.host.switches import Selection, selection
from driftcheck.kinds import FixSafety, Kind, Severity, Witness

IMPLEMENTATION_SWAP = CheckId(
    "implementation-swap",
    Kind.BEHAVIOUR_CHANGE,
    Severity.ERROR,
    Witness.WORKLOAD,
    fixes=(FixSafety.MANUAL,),
)
#: What this check reports; :mod:`driftcheck.checks.catalog` lists it.
CHECK = Check(__name__, (IMPLEMENTATION_SWAP,))


def _switch_owner(api: HostAPI, holder: str) -> tuple[Found, list[tuple[str, str, int]]] | None:
    """The class on the holder's MRO whose methods choose the attribute's class, with the
    (class path, condition, line) of each arm."""
    owner_path, _, attr = holder.rpartition(".")
    owner = api.resolve(owner_path)
    if not isinstance(owner, Found):
        return None
    for klass in api.mro(owner)[0]:
        found = klass.obj.extra.get("driftcheck", {}).get("alternatives", {}).get(attr)
        if found:
            return klass, [tuple(a) for a in found]
    return None


def alternatives(api: HostAPI, holder: str) -> list[tuple[str, str, int]]:
    """(class path, condition, line) of the classes a host attribute may hold."""
    got = _switch_owner(api, holder)
    return got[1] if got else []


def _decided(
    api: HostAPI | None, holder: str, path: str, config: dict[str, object]
) -> tuple[Selection | None, bool]:
    """How a release's defaults decide the arm that builds ``path`` (None: undecided), and
    whether the release has that arm at all."""
    got = _switch_owner(api, holder) if api is not None else None
    if api is None or got is None:
        return None, False
    klass, alts = got
    arms = [(cond, line) for p, cond, line in alts if p == path]
    if len(arms) != 1:
        return None, bool(arms)
    return selection(api, klass, arms[0][1], arms[0][0], config), True


def check(use: Use, ctx: CheckContext) -> list[Finding]:
    """Report a member read off an attribute whose alternative class lacks it, where the
    switch selects that class by default on the target only, or the class is new."""
    if not (use.holder and use.member and use.receiver):
        return []
    alts = alternatives(ctx.target, use.holder)
    if len(alts) < 2:
        return []
    if ctx.lookup(ctx.target, use) is None:
        return []  # missing on the annotated class too: attribute-missing reports it once
    before = {a[0] for a in alternatives(ctx.baseline, use.holder)} if ctx.baseline else set()
    served = ctx.served
    config: dict[str, object] = (
        {"architectures": (served.architecture,)} if served and served.architecture else {}
    )
    for path, condition, line in alts:
        if path == use.receiver:
            continue
        cls = ctx.target.resolve(path)
        if not isinstance(cls, Found) or ctx.target.defined_in_host_mro(cls, use.member):
            continue
        now, _ = _decided(ctx.target, use.holder, path, config)
        if now is not None and _client_sets(ctx, now):
            continue  # the client passes the field the switch reads: its own choice
        if now is not None and now.selected:
            then, had = _decided(ctx.baseline, use.holder, path, config)
            if had and (then is None or then.selected):
                continue  # the baseline's defaults took it too, or cannot be told apart
            if had or not now.shortest:
                return [_by_default(use, ctx, path, cls, line, now, then)]
            # A new class that only open terms select: no default was seen to change.
        if path in before:
            continue
        return [_new_alternative(use, ctx, path, cls, condition, line, now)]
    return []


def _client_sets(ctx: CheckContext, sel: Selection) -> bool:
    """Whether the client chooses the switch itself: it sets an environment variable the switch
    reads (``os.environ["X"] = ...``, ``setenv``, ``putenv``, or ``"X":`` as a key of an
    environment it hands on), or constructs a class whose field default the switch read,
    passing that field."""
    if sel.settings:
        named = "|".join(re.escape(s) for s in sel.settings)
        sets = re.compile(
            rf"""(environ|setenv|putenv)\W.*["']({named})["']|["']({named})["']\s*:"""
        )
        if any(sets.search(line) for lines in ctx.client_lines.values() for line in lines):
            return True
    for cls_path, name in sel.fields:
        for u in ctx.uses:
            if u.kind != "call" or u.shape is None or name not in u.shape.keywords:
                continue
            found = ctx.target.resolve(u.symbol)
            if isinstance(found, Found) and found.kind == "class" and found.path == cls_path:
                return True
            if (
                isinstance(found, Found)
                and found.kind == "class"
                and any(k.path == cls_path for k in ctx.target.mro(found)[0])
            ):
                return True
    return False


def _owner_evidence(ctx: CheckContext, use: Use, line: int, note: str) -> Evidence | None:
    owner = ctx.target.resolve(use.holder.rpartition(".")[0]) if use.holder else None
    return (
        Evidence(ctx.target.version, owner.file, line, note) if isinstance(owner, Found) else None
    )


def _facts(ctx: CheckContext, api: HostAPI, sel: Selection | None) -> list[Evidence]:
    """A selection's host facts as evidence (the served config's as its file, where known)."""
    out = []
    config_file = ctx.served.config_file if ctx.served else None
    for file, line, note in sel.evidence if sel else ():
        if file == "config.json":
            if config_file:
                out.append(Evidence(api.version, config_file, line, note))
            continue
        out.append(Evidence(api.version, file, line, note))
    return out


def _names(use: Use) -> tuple[str, str]:
    holder = use.holder or ""
    return holder.rsplit(".", 2)[-2], holder.rsplit(".", 1)[-1]


def _by_default(
    use: Use,
    ctx: CheckContext,
    path: str,
    cls: Found,
    line: int,
    now: Selection,
    then: Selection | None,
) -> Finding:
    """The target's defaults select a class without the member; the baseline's did not."""
    short = path.rsplit(".", 1)[-1]
    owner, attr = _names(use)
    open_terms = now.shortest
    served = ctx.served
    for_model = (
        f" for the served model ({served.architecture})"
        if served and served.architecture and any(f == "config.json" for f, _, _ in now.evidence)
        else ""
    )
    unless = f" unless {' or '.join(now.settings)} is set" if now.settings else ""
    assumed = f"; assumed, as the source cannot tell: {', '.join(open_terms)}" if open_terms else ""
    message = (
        f"{use.receiver_expr}.{use.member}: on {ctx.target.name} {ctx.target.version} the "
        f"defaults make {owner}.{attr} a {short} ({path}), which has no {use.member!r}, "
        f"{for_model.strip() or 'by default'}{unless}"
    )
    if ctx.baseline is not None:
        message += f" (on {ctx.baseline.version} the defaults did not select it)"
    message += assumed
    evidence: list[Evidence | None] = [
        *(_facts(ctx, ctx.baseline, then) if ctx.baseline is not None else []),
        _owner_evidence(ctx, use, line, f"{short} when selected"),
        *_facts(ctx, ctx.target, now),
        Evidence(ctx.target.version, cls.file, cls.line, f"{short} without {use.member}"),
    ]
    switch = (
        f", or set {now.settings[0]} to select the other implementation" if now.settings else ""
    )
    return finding(
        use,
        IMPLEMENTATION_SWAP,
        symbol=f"{use.holder}.{use.member}",
        message=message,
        evidence=evidence,
        fix=Fix(FixSafety.MANUAL, f"do not rely on {use.member} there{switch}"),
        severity=Severity.WARNING if open_terms else Severity.ERROR,
    )


def _new_alternative(
    use: Use,
    ctx: CheckContext,
    path: str,
    cls: Found,
    condition: str,
    line: int,
    now: Selection | None,
) -> Finding:
    """A class new since the baseline that only a setting (or an undecided switch) selects."""
    short = path.rsplit(".", 1)[-1]
    owner, attr = _names(use)
    settings = f" ({' or '.join(now.settings)} set)" if now and now.settings else ""
    return finding(
        use,
        IMPLEMENTATION_SWAP,
        symbol=f"{use.holder}.{use.member}",
        message=(
            f"{use.receiver_expr}.{use.member}: when {condition or 'selected'}{settings}, "
            f"{owner}.{attr} is a {short} ({path}), which has no {use.member!r} "
            f"({ctx.target.name} {ctx.target.version})"
        ),
        evidence=(
            _owner_evidence(ctx, use, line, f"when {condition}"),
            Evidence(ctx.target.version, cls.file, cls.line, f"{short} without {use.member}"),
        ),
        fix=Fix(FixSafety.MANUAL, f"do not rely on {use.member} there, or pin the switch"),
        severity=Severity.INFO,
    )
