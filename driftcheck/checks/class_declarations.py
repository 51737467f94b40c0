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

An inner class of a class the host builds is read the same way: its options
(:mod:`driftcheck.host.class_options`), and the class itself, which the target's class machinery
may warn about or reject whatever it holds (:mod:`driftcheck.host.inner_classes`: pydantic 2's
class-based ``Config``).
"""

from __future__ import annotations

from typing import cast

from driftcheck.checks.context import CheckContext, finding
from driftcheck.checks.declaration import Check, CheckId
from driftcheck.client.use import Use
from driftcheck.findings import Evidence, Finding
from driftcheck.host.api import HostAPI
from driftcheck.host.class_hooks import Treat, class_hooks, is_host_hook
from driftcheck.host.class_namespace import Unannotated, unannotated, walker_of
from driftcheck.host.class_options import OptionTable, option_tables
from driftcheck.host.inner_classes import InnerTreat, inner_class_treatments
from driftcheck.host.objects import Found
from driftcheck.kinds import Kind, Severity, Witness

CLASS_DECLARATION = CheckId(
    Kind.CLASS_DECLARATION.value, Kind.CLASS_DECLARATION, Severity.ERROR, Witness.WORKLOAD
)
#: What this check reports; :mod:`driftcheck.checks.catalog` lists it.
CHECK = Check(__name__, (CLASS_DECLARATION,))


def _declared_hooks(ctx: CheckContext) -> list[str]:
    """Every hook name the client's classes declare: each release's lookups of them are read
    in one pass (:func:`class_hooks`), not one pass a name."""
    cached = ctx.__dict__.get("_declared_hooks")
    if cached is None:
        cached = ctx.__dict__["_declared_hooks"] = sorted(
            {
                u.member
                for u in ctx.uses
                if u.kind == "declaration"
                and u.member
                and "." not in u.member
                and u.result not in ("unannotated", "inner-class")
                and is_host_hook(u.member)
            }
        )
    return cast(list[str], cached)


def check(use: Use, ctx: CheckContext) -> list[Finding]:
    """Report a declared hook name whose meaning the target changed."""
    if use.kind != "declaration" or not use.member:
        return []
    if use.result == "unannotated":
        return _unannotated(use, ctx)
    if use.result == "inner-class":
        return _inner_class(use, ctx)
    if "." in use.member:
        return _option(use, ctx)
    name = use.member
    declared = {
        u.member
        for u in ctx.uses_in(use.file)
        if u.kind == "declaration" and u.receiver_expr == use.receiver_expr
    }
    # A path the host takes only for a class without another hook this class declares (pydantic
    # 2 looks up ``__get_validators__`` only where ``__get_pydantic_core_schema__`` is absent).
    asked = (name, *_declared_hooks(ctx))
    now = [t for t in class_hooks(ctx.target, asked)[name] if not declared & set(t.under)]
    was = class_hooks(ctx.baseline, asked)[name] if ctx.baseline is not None else None
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


def _option(use: Use, ctx: CheckContext) -> list[Finding]:
    """An inner class's option (``Meta.index_together``) the target rejects, warns about, or
    no longer reads, where the baseline read it (:mod:`driftcheck.host.class_options`)."""
    inner, option = use.member.split(".", 1)  # type: ignore[union-attr]  # tested by check()
    if ctx.baseline is None:
        return []
    now_tables, now_notes = option_tables(ctx.target)
    was_tables, was_notes = option_tables(ctx.baseline)
    now_tables = [t for t in now_tables if inner in t.inner]
    was_tables = [t for t in was_tables if inner in t.inner]
    if not now_tables and not was_tables:
        return []  # neither release reads this inner class
    where = f"{use.receiver_expr}.{inner}.{option}"
    host = f"{ctx.target.name} {ctx.target.version}"
    for t in now_tables:
        if t.role != "flags" or option not in t.names:
            continue
        if any(
            b.role == "flags" and option in b.names and b.treatment == t.treatment
            for b in was_tables
        ):
            continue  # the baseline already did this to it (its words may differ)
        verb = "raises on it" if t.treatment == "rejects" else "warns about it"
        instead = dict(t.renames).get(option)
        said = f" (its replacement: {inner}.{instead})" if instead else ""
        text = _short(t.message).rstrip(":")
        return [
            _option_finding(
                use,
                ctx,
                t.treatment,
                f"{where}: {host} {verb}: {text}{said}",
                _table_evidence(ctx.baseline, was_tables, option),
                Evidence(ctx.target.version, t.file, t.at or t.line, note=t.treatment),
            )  # fmt: skip
        ]
    for b in was_tables:
        if b.role != "accepts" or option not in b.names:
            continue
        same = [t for t in now_tables if t.name == b.name and t.role == "accepts"]
        if not same or any(option in t.names for t in same):
            continue
        t = same[0]
        base_ev = Evidence(ctx.base.version, b.file, b.line, note="reads")
        if t.treatment == "rejects":
            said = _short(t.message).replace("%s", option).replace("{...}", option)
            message = (
                f"{where}: {host} no longer accepts the option (it left {t.name}, which "
                f"{ctx.base.version} read it from) and raises: {said}"
            )
            ev = Evidence(ctx.target.version, t.file, t.at, note="rejects")
            return [_option_finding(use, ctx, "rejects", message, (base_ev,), ev)]
        message = (
            f"{where}: {host} no longer reads the option ({t.name} lacks it; its baseline "
            f"{ctx.base.version} read it): the declaration no longer has any effect"
        )
        ev = Evidence(ctx.target.version, t.file, t.line, note="reads")
        return [_option_finding(use, ctx, "warns", message, (base_ev,), ev)]
    for n in now_notes:
        if n.option != option or inner not in n.inner:
            continue
        if any(w.option == option and w.treatment == n.treatment for w in was_notes):
            continue
        verb = "raises on it" if n.treatment == "rejects" else "warns about it"
        return [
            _option_finding(
                use,
                ctx,
                n.treatment,
                f"{where}: {host} {verb}: {_short(n.message)}",
                _table_evidence(ctx.baseline, was_tables, option),
                Evidence(ctx.target.version, n.file, n.at, note=n.treatment),
            )  # fmt: skip
        ]
    return []


def _option_finding(
    use: Use,
    ctx: CheckContext,
    treatment: str,
    message: str,
    base: tuple[Evidence, ...],
    target: Evidence,
) -> Finding:
    severity = Severity.ERROR if treatment == "rejects" else Severity.WARNING
    return finding(
        use,
        CLASS_DECLARATION,
        severity=severity,
        symbol=use.symbol,
        message=message,
        evidence=(*base, target),
    )


def _table_evidence(api: HostAPI, tables: list[OptionTable], option: str) -> tuple[Evidence, ...]:
    """Where the baseline accepted the option, if a table of it holds it."""
    for t in tables:
        if t.role == "accepts" and option in t.names:
            return (Evidence(api.version, t.file, t.line, note="reads"),)
    return ()


def _unannotated(use: Use, ctx: CheckContext) -> list[Finding]:
    """A class attribute without an annotation that the target's class machinery rejects,
    where the baseline's took it (inferred a field from it) or never looked
    (:mod:`driftcheck.host.class_namespace`)."""
    if ctx.baseline is None:
        return []
    owner = use.symbol.rsplit(".", 1)[0]
    now = [
        u
        for u in _walked(ctx.target, owner)
        if u.treatment == "rejects" and use.member not in u.skips
    ]
    if not now:
        return []
    was = _walked(ctx.baseline, owner)
    if any(w.treatment == "rejects" and not w.conditional for w in was):
        return []  # the baseline already raised on it (its words may differ)
    first = min(now, key=lambda u: (u.conditional, u.file, u.line))
    name = use.member or ""
    said = _short(first.message).replace("{var_name}", name).replace("{var_name!r}", repr(name))
    verb = "may raise on it" if first.conditional else "raises on it"
    # The baseline walked the name and went on (raising at most under a further condition of
    # its own, pydantic 1's "the type ... differs"), or never walked it.
    base = [w for w in was if w.treatment == "reads" or w.conditional]
    before = (
        f"{ctx.base.version}'s class machinery took it, {base[0].file}:{base[0].line}"
        if base
        else f"{ctx.base.version} never tested it"
    )
    return [
        finding(
            use,
            CLASS_DECLARATION,
            severity=Severity.WARNING if first.conditional else Severity.ERROR,
            symbol=use.symbol,
            message=(
                f"{use.receiver_expr}.{name} has no annotation: {ctx.target.name} "
                f"{ctx.target.version} {verb} ({before}): {said}"
            ),
            evidence=(
                *(Evidence(ctx.base.version, b.file, b.line, note="reads") for b in base[:1]),
                Evidence(ctx.target.version, first.file, first.at, note="rejects"),
            ),
        )
    ]


def _walked(api: HostAPI, owner: str) -> list[Unannotated]:
    """The namespace walks a host class's metaclass runs on a subclass."""
    cls = api.resolve(owner)
    if not isinstance(cls, Found) or cls.kind != "class":
        return []
    names = walker_of(api, cls)
    return [
        u
        for u in unannotated(api)
        if (u.function in names and u.function != "__new__")
        or (u.function == "__new__" and f"{u.file}::__new__" in names)
    ]


def _inner_class(use: Use, ctx: CheckContext) -> list[Finding]:
    """An inner class (``class Config:``) of a class the target's class machinery builds, which
    that machinery now warns about or rejects whatever it holds, where the baseline's read it
    quietly (:mod:`driftcheck.host.inner_classes`). Only a treatment every such class gets is
    reported (not pydantic 2's raise for a ``Config`` beside a ``model_config``); no fix is
    offered: whether the options map onto the target's new form is the host's to say."""
    if ctx.baseline is None or not use.member:
        return []
    owner = use.symbol.rsplit(".", 1)[0]
    now = [
        t
        for t in _inner_walked(ctx.target, owner, use.member)
        if t.treatment != "reads" and not t.conditional
    ]
    if not now:
        return []
    was = _inner_walked(ctx.baseline, owner, use.member)
    now = [t for t in now if not any(w.treatment == t.treatment and not w.conditional for w in was)]
    if not now:
        return []  # the baseline already did this to it (its words may differ)
    first = min(now, key=lambda t: (t.treatment != "rejects", t.at_file, t.at))
    reads = [w for w in was if w.treatment == "reads"]
    before = (
        f"{ctx.base.version} read it quietly, {reads[0].file}:{reads[0].line}"
        if reads
        else f"{ctx.base.version} never looked it up"
    )
    verb = "raises on it" if first.treatment == "rejects" else "warns about it"
    where = f"{use.receiver_expr}.{use.member}"
    return [
        finding(
            use,
            CLASS_DECLARATION,
            severity=Severity.ERROR if first.treatment == "rejects" else Severity.WARNING,
            symbol=use.symbol,
            message=(
                f"{where}: {ctx.target.name} {ctx.target.version} {verb}, whatever it holds "
                f"({before}): {_short(first.message)}"
            ),
            evidence=(
                *(Evidence(ctx.base.version, r.file, r.line, note="reads") for r in reads[:1]),
                Evidence(ctx.target.version, first.at_file, first.at, note=first.treatment),
            ),
        )
    ]


def _inner_walked(api: HostAPI, owner: str, inner: str) -> list[InnerTreat]:
    """The lookups of the inner class that the metaclass of the host class runs on a subclass."""
    cls = api.resolve(owner)
    if not isinstance(cls, Found) or cls.kind != "class":
        return []
    names = walker_of(api, cls)
    if not names:
        return []  # no metaclass of the host's builds the class: nothing looks it up
    return [
        t
        for t in inner_class_treatments(api)
        if t.inner == inner
        and (
            (t.function in names and t.function != "__new__")
            or (t.function == "__new__" and f"{t.file}::__new__" in names)
        )
    ]
