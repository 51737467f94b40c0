"""HTTP routes the client calls that the target serves no longer, or only under a flag.

``http-route-removed``: the baseline serves the method and path a request addresses, the target
does not; where the target serves the same handler, or a path with the same tail, the finding
says where the route went. ``http-route-flag``: the target registers the route only when a
server flag is set (the baseline without it; without a baseline, at all); where the client
starts the server itself and passes none of the flags, the finding is at that command line and
the fix adds the flag;
without a launch command in the scanned code, it says the server must be started with it (a
warning: the server is started elsewhere), unless the file that makes the request starts the
server in Python through a host function that builds the app with literal arguments under which
the route needs no flag (``build_app(args, ("render",))``); a command with parts that are not literal
(``[...] + list(extra_args or [])``) gets a warning that holds unless those parts pass the
flag. A route the target registers under the baseline's
condition and one more that is a local name is followed to the flags that local reads
(:mod:`driftcheck.http.condition_flags`); one that names no flag (or a new environment
variable) is a warning that quotes the condition.
"""

from __future__ import annotations

import ast

from driftcheck.checks.context import CheckContext, finding, side
from driftcheck.checks.http import HTTP_ROUTE_FLAG, HTTP_ROUTE_REMOVED
from driftcheck.checks.http_common import evidence, find_route, moved_route, routes_at, sides
from driftcheck.client.http.use import HttpUse
from driftcheck.client.use import Use
from driftcheck.findings import Finding, Fix
from driftcheck.http.condition_flags import built_without_flags, flags_behind
from driftcheck.http.surface import CliFlag, HttpSurface, Route
from driftcheck.kinds import FixSafety, Severity


def check(use: Use, ctx: CheckContext) -> list[Finding]:
    """Report a request to a route the target removed, moved or put behind a flag."""
    if not isinstance(use, HttpUse) or use.kind != "http-request":
        return []
    s = sides(ctx)
    if s.baseline is None:
        return _alone(use, ctx, s.target)
    before = find_route(s.baseline, use.http_method, use.path)
    if before is None:
        return []  # not a route the baseline serves: not the host's, or not known
    now = find_route(s.target, use.http_method, use.path)
    if now is None:
        return _removed(use, ctx, before, s.target)
    added = [f for f in now.flags if f not in before.flags]
    if added and not before.flags and not (before.condition and not now.condition):
        return _flagged(use, ctx, before, now, s.target, added)
    extra = _narrowed(before, now)
    if extra is not None and not added:
        behind = flags_behind(ctx.target, s.target, now, extra)
        if behind:
            return _flagged(use, ctx, before, now, s.target, list(behind))
        return _conditioned(use, ctx, before, now, extra)
    return []


def _alone(use: HttpUse, ctx: CheckContext, target: HttpSurface) -> list[Finding]:
    """Without a baseline, the target alone: a route it registers only when the server is
    started with a flag (its own, or the flags its condition reads). A route it does not serve
    is not judged: the request may be another server's."""
    now = find_route(target, use.http_method, use.path)
    if now is None:
        return []
    flags = list(now.flags)
    for part in _conjuncts(now.condition) if not flags else []:
        flags += [f for f in flags_behind(ctx.target, target, now, part) if f not in flags]
    return _flagged(use, ctx, None, now, target, flags) if flags else []


def _conjuncts(condition: str | None) -> list[str]:
    """The parts a route condition needs all of (``A and enabled``: both); one part when it is
    not a conjunction (an ``or`` may hold without the flag)."""
    if not condition:
        return []
    try:
        tree = ast.parse(condition, mode="eval").body
    except SyntaxError:
        return [condition]
    if isinstance(tree, ast.BoolOp) and isinstance(tree.op, ast.And):
        return [ast.unparse(v) for v in tree.values]
    return [condition]


def _narrowed(before: Route, now: Route) -> str | None:
    """The condition the target adds to the baseline's for registering the route, when the
    target's is the baseline's and one more conjunct (``(A) and B``, ``A and B``), or a new
    environment variable; None otherwise (a condition that changed in any other way may have
    widened)."""
    new_env = [e for e in now.env if e not in before.env]
    if new_env and not before.env:
        return " or ".join(f"${e}" for e in new_env)
    if not before.condition or not now.condition or now.condition == before.condition:
        return None
    for head in (f"({before.condition}) and ", f"{before.condition} and "):
        if now.condition.startswith(head) and len(now.condition) > len(head):
            return now.condition[len(head) :]
    return None


def _conditioned(
    use: HttpUse, ctx: CheckContext, before: Route, now: Route, extra: str
) -> list[Finding]:
    """A route the target registers under one more condition the surface could not tie to a
    flag: a warning that names it (the server must be started so that it holds)."""
    where = f"{now.method} {now.path}"
    if not ctx.once(use.file, f"route-condition {where}"):
        return []
    message = (
        f"{ctx.target.name} {ctx.target.version} registers {where} only where {extra} also "
        f"holds ({now.condition}); the baseline registered it where {before.condition or 'always'}"
    )
    ev = [
        evidence(ctx.base, before.file, before.line, f"if {before.condition or 'always'}"),
        evidence(ctx.target, now.file, now.line, f"if {now.condition}"),
    ]
    return [
        finding(
            use,
            HTTP_ROUTE_FLAG,
            symbol=use.symbol,
            message=message,
            evidence=ev,
            severity=Severity.WARNING,
        )
    ]


def _removed(use: HttpUse, ctx: CheckContext, before: Route, target: HttpSurface) -> list[Finding]:
    if not ctx.once(use.file, f"route {use.symbol}"):
        return []
    moved = _moved(target, before, use)
    where = f"{before.method} {before.path}"
    ev = [evidence(ctx.base, before.file, before.line, f"{where} -> {before.handler}")]
    if moved is not None:
        message = (
            f"{ctx.target.name} {ctx.target.version} no longer serves {where}; it serves "
            f"{moved.method} {moved.path} ({moved.handler})"
        )
        ev.append(evidence(ctx.target, moved.file, moved.line, f"{moved.method} {moved.path}"))
    else:
        message = f"{ctx.target.name} {ctx.target.version} no longer serves {where}"
        others = [r for r in routes_at(target, use.path)]
        if others:
            message += f" (only {', '.join(sorted({r.method for r in others}))} on that path)"
            ev.append(evidence(ctx.target, others[0].file, others[0].line, "other method"))
        else:
            near = _nearest(target, before)
            if near is not None:
                ev.append(evidence(ctx.target, near.file, near.line, f"no {where} here"))
    return [finding(use, HTTP_ROUTE_REMOVED, symbol=use.symbol, message=message, evidence=ev)]


def _moved(target: HttpSurface, before: Route, use: HttpUse) -> Route | None:
    return moved_route(target, before)


def _nearest(target: HttpSurface, before: Route) -> Route | None:
    """The target's route in the same file, else with the longest common path prefix."""
    in_file = [r for r in target.routes if r.file == before.file]
    if in_file:
        return in_file[0]
    parts = before.path.split("/")

    def common(r: Route) -> int:
        n = 0
        for a, b in zip(parts, r.path.split("/"), strict=False):
            if a != b:
                break
            n += 1
        return n

    best = max(target.routes, key=common, default=None)
    return best if best is not None and common(best) > 1 else None


def _flagged(
    use: HttpUse,
    ctx: CheckContext,
    before: Route | None,
    now: Route,
    target: HttpSurface,
    flags: list[str],
) -> list[Finding]:
    launches = [u for u in ctx.uses if isinstance(u, HttpUse) and u.kind == "launch"]
    on = side(ctx.target)
    if any(f in {name for name, _ in u.flags_on(on)} for u in launches for f in flags):
        return []
    where = f"{now.method} {now.path}"
    names = " or ".join(flags)
    ev = [evidence(ctx.target, now.file, now.line, f"registered only if {now.condition or names}")]
    if before is not None:  # without a baseline, the target's word alone
        was = f"registered if {before.condition}" if before.condition else "always registered"
        ev.insert(0, evidence(ctx.base, before.file, before.line, f"{where} {was}"))
    flag = target.flag(flags[0])
    if flag is not None:
        ev.append(evidence(ctx.target, flag.file, flag.line, f"{flag.name} defined"))
    if not launches:
        if _started_here(use, ctx, now):
            return []
        if not ctx.once(use.file, f"route-flag {where}"):
            return []
        message = (
            f"{ctx.target.name} {ctx.target.version} registers {where} only when the server is "
            f"started with {names}; the client does not start it here: add the flag to the "
            "command that does"
        )
        return [
            finding(
                use,
                HTTP_ROUTE_FLAG,
                symbol=use.symbol,
                message=message,
                evidence=ev,
                severity=Severity.WARNING,
                fix=_launch_fix(flags),
            )
        ]
    out = []
    for launch in launches:
        if not ctx.once(launch.file, f"launch {launch.line} {flags[0]}"):
            continue
        message = (
            f"{ctx.target.name} {ctx.target.version} registers {where} (requested at "
            f"{use.file}:{use.line}) only when the server is started with {names}; this "
            "command does not pass it"
        )
        if launch.argv_open:
            # Its parts that are not literal may pass the flag: the finding holds unless
            # they do, and adding the flag is for a person to judge.
            tails = " or ".join(launch.argv_tails) or "its parts that are not literal"
            out.append(
                finding(
                    launch,
                    HTTP_ROUTE_FLAG,
                    symbol=flags[0],
                    message=f"{message}, unless it is passed in {tails}",
                    evidence=ev,
                    fix=Fix(FixSafety.MANUAL, f"start the server with {flags[0]}"),
                    severity=Severity.WARNING,
                )
            )
            continue
        out.append(
            finding(
                launch,
                HTTP_ROUTE_FLAG,
                symbol=flags[0],
                message=message,
                evidence=ev,
                fix=_add_flag_fix(launch, flag, flags[0], len(flags)),
            )
        )
    return out


def _started_here(use: HttpUse, ctx: CheckContext, now: Route) -> bool:
    """Whether the file that makes the request starts the server itself in Python, through a
    host function that builds the app with arguments under which the route is registered with
    no flag set (:func:`~driftcheck.http.condition_flags.built_without_flags`)."""
    starts = {
        u.symbol
        for u in ctx.uses
        if u.file == use.file and u.kind == "call" and not u.receiver and u.symbol
    }
    return any(built_without_flags(ctx.target, now, s) is not None for s in sorted(starts))


def _add_flag_fix(launch: HttpUse, flag: CliFlag | None, name: str, choices: int = 1) -> Fix:
    """Append the flag to the command's list literal: safe for the one flag that registers the
    route when it takes no value (the host defines it as a switch); unsafe where any of
    several flags would (which one to pass is a choice: each may do more); a flag with a value
    is for a person to choose."""
    if launch.argv_list and flag is not None and _is_switch(flag):
        return Fix(
            FixSafety.SAFE if choices == 1 else FixSafety.UNSAFE,
            f"add {name} to the server's command line",
            codemod="add-launch-flag",
            params=(("flag", name),),
        )
    return Fix(FixSafety.MANUAL, f"start the server with {name}")


def _launch_fix(flags: list[str]) -> Fix:
    """For a client that does not start the server itself: the flag to add to the user's own
    launch command (a person's edit; ``launch-flag`` names it, so the probe can start its
    server with it). Where several flags register the route, the first the host names."""
    others = f" (or {' or '.join(flags[1:])})" if len(flags) > 1 else ""
    text = f"add {flags[0]} to the command that starts the server{others}"
    return Fix(FixSafety.MANUAL, text, params=(("launch-flag", flags[0]),))


def _is_switch(flag: CliFlag) -> bool:
    return (flag.type or "").lower() in ("bool", "store_true") or flag.negatable
