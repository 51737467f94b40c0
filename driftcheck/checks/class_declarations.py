"""Class declarations the host reads by name: a client class's hook method or magic attribute
(``__get_validators__``, ``__modify_schema__``, ``__root__``) that the host looks up by string
on the classes it is given, and that the target now rejects, warns about, or never looks up.

What each release does is read from its source (:mod:`driftcheck.host.class_hooks`): a
``raise`` in the ``if`` that tests the name rejects it (an error, a warning where the raise sits
under a further condition of its own, such as "unless the class also defines the new hook"), a
``warn(...)`` there warns (a warning, with the host's message), and a name the baseline looked
up that the target's source never mentions is a hook the target never calls again (a warning).
A name the baseline never looked up is the client's own, or another library's: quiet. Python's
own data-model names (``__slots__``, ``__call__``) are never a host's hook.
"""

from __future__ import annotations

from driftcheck.checks.context import CheckContext, finding
from driftcheck.checks.declaration import Check, CheckId
from driftcheck.client.use import Use
from driftcheck.findings import Evidence, Finding
from driftcheck.host.api import HostAPI
from driftcheck.host.class_hooks import Treat, class_hooks
from driftcheck.kinds import Kind, Severity, Witness

CLASS_DECLARATION = CheckId(
    Kind.CLASS_DECLARATION.value, Kind.CLASS_DECLARATION, Severity.ERROR, Witness.WORKLOAD
)
#: What this check reports; :mod:`driftcheck.checks.catalog` lists it.
CHECK = Check(__name__, (CLASS_DECLARATION,))


def check(use: Use, ctx: CheckContext) -> list[Finding]:
    """Report a declared hook name whose meaning the target changed."""
    if use.kind != "declaration" or not use.member:
        return []
    name = use.member
    declared = {
        u.member
        for u in ctx.uses_in(use.file)
        if u.kind == "declaration" and u.receiver_expr == use.receiver_expr
    }
    # A path the host takes only for a class without another hook this class declares (pydantic
    # 2 looks up ``__get_validators__`` only where ``__get_pydantic_core_schema__`` is absent).
    now = [t for t in class_hooks(ctx.target).get(name, []) if not declared & set(t.under)]
    was = class_hooks(ctx.baseline).get(name, []) if ctx.baseline is not None else None
    if was is not None and not was:
        return []  # the baseline never looked it up: not the host's hook
    if was is None and not now:
        return []
    where = f"{use.receiver_expr}.{name}" if use.receiver_expr else name
    host = f"{ctx.target.name} {ctx.target.version}"
    for treatment, verb in (("rejects", "raise"), ("warns", "warn")):
        mine = [t for t in now if t.treatment == treatment]
        if not mine or _same(mine, was or [], treatment):
            continue
        first = min(mine, key=lambda t: (t.conditional, t.file, t.line))
        severity = (
            Severity.ERROR if treatment == "rejects" and not first.conditional else Severity.WARNING
        )
        said = f"may {verb}" if first.conditional else f"{verb}s"
        said += " on it" if treatment == "rejects" else " about it"
        return [
            finding(
                use,
                CLASS_DECLARATION,
                severity=severity,
                symbol=use.symbol,
                message=f"{where}: {host} {said}: {_short(first.message)}",
                evidence=(*_base_evidence(ctx, was), _evidence(ctx.target, first)),
            )
        ]
    if was and not now and not _mentioned(ctx.target, name):
        return [
            finding(
                use,
                CLASS_DECLARATION,
                severity=Severity.WARNING,
                symbol=use.symbol,
                message=(
                    f"{where}: {host} never looks up {name} (its baseline "
                    f"{ctx.base.version} did): the declaration no longer has any effect"
                ),
                evidence=_base_evidence(ctx, was),
            )
        ]
    return []


def _same(now: list[Treat], was: list[Treat], treatment: str) -> bool:
    """The baseline already did this with the name (same message): nothing changed."""
    return any(t.treatment == treatment and t.message in {n.message for n in now} for t in was)


def _mentioned(api: HostAPI, name: str) -> bool:
    """Whether the name appears anywhere in the host's source (an attribute read, a call):
    only a host that never mentions it has surely stopped calling it."""
    return any(name in text for text in api.source_texts().values())


def _short(message: str) -> str:
    return " ".join(message.split())[:300]


def _evidence(api: HostAPI, treat: Treat) -> Evidence:
    return Evidence(api.version, treat.file, treat.line, note=treat.treatment)


def _base_evidence(ctx: CheckContext, was: list[Treat] | None) -> tuple[Evidence, ...]:
    if not was or ctx.baseline is None:
        return ()
    first = min(was, key=lambda t: (t.file, t.line))
    return (_evidence(ctx.baseline, first),)
