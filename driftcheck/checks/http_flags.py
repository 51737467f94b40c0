"""Server flags the client's launch command passes that the target's server no longer takes.

``http-cli-flag``: a flag the baseline's server defines and the target's does not (the server
exits with a usage error): an error; without a baseline, any flag the target's server does not
define. It is called renamed only on the host's evidence: the
baseline's deprecation message names a flag the target defines, or the target's definition
lists the old name as an alias (then it still works and nothing is reported). A flag the target
deprecates is a warning. Where the evidence names the replacement, the fix renames the flag in
the command's list literal (by hand where the flag is made from a dict's key). Flags built
from a dict's keys in a loop are checked like written ones.
"""

from __future__ import annotations

import re
from dataclasses import replace

from driftcheck.checks.context import CheckContext, finding, side
from driftcheck.checks.http import HTTP_CLI_FLAG
from driftcheck.checks.http_common import evidence, sides
from driftcheck.client.http.use import HttpUse
from driftcheck.client.use import Use
from driftcheck.findings import Finding, Fix
from driftcheck.http.surface import CliFlag, HttpSurface
from driftcheck.kinds import FixSafety, Severity

_FLAG = re.compile(r"(?<![\w-])--[a-z0-9][a-z0-9_-]*", re.I)


def check(use: Use, ctx: CheckContext) -> list[Finding]:
    """Report flags of a server launch the target removed, renamed or deprecated."""
    if not isinstance(use, HttpUse) or use.kind != "launch":
        return []
    s = sides(ctx)
    if s.baseline is None and s.target.flags:
        return _alone(use, ctx, s.target)
    if s.baseline is None or not s.baseline.flags or not s.target.flags:
        return []
    out: list[Finding] = []
    for name, span in use.flags_on(side(ctx.target)):
        before, now = s.baseline.flag(name), s.target.flag(name)
        if before is None:
            continue  # the baseline did not take it: not a drift driftcheck can judge
        if not ctx.once(use.file, f"flag {span} {name}"):
            continue
        if now is None:
            out.append(_removed(use, ctx, name, span, before, s.target))
        elif now.deprecated and not before.deprecated:
            out.append(_deprecated(use, ctx, name, span, before, now, s.target))
    return out


def _alone(use: HttpUse, ctx: CheckContext, target: HttpSurface) -> list[Finding]:
    """Without a baseline, the target alone: a flag its server does not define (an error:
    the server exits with a usage error) or deprecates (a warning)."""
    out: list[Finding] = []
    for name, span in use.flags_on(side(ctx.target)):
        now = target.flag(name)
        if (now is not None and not now.deprecated) or not ctx.once(
            use.file, f"flag {span} {name}"
        ):
            continue
        if now is not None:
            out.append(_deprecated(use, ctx, name, span, None, now, target))
            continue
        near = min(target.flags.values(), key=lambda f: (f.file, f.line))
        ev = [evidence(ctx.target, near.file, near.line, f"no {name} among its flags")]
        message = (
            f"{ctx.target.name} {ctx.target.version}'s server does not take {name}: it exits "
            "with a usage error"
        )
        out.append(
            _at_flag(
                finding(use, HTTP_CLI_FLAG, symbol=name, message=message, evidence=ev, at=span)
            )
        )
    return out


def _replacement(message: str | None, name: str, target: HttpSurface) -> CliFlag | None:
    """The one flag a deprecation message names that the target defines (not the flag
    itself)."""
    if not message:
        return None
    named = {m.group(0) for m in _FLAG.finditer(message)} - {name}
    found = [f for n in sorted(named) if (f := target.flag(n)) is not None and f.name != name]
    return found[0] if len({f.name for f in found}) == 1 else None


def _same_alias(before: CliFlag, target: HttpSurface) -> CliFlag | None:
    """The one target flag that took over an alias of the baseline's flag (``-b``)."""
    if not before.aliases:
        return None
    found = [f for f in target.flags.values() if set(f.aliases) & set(before.aliases)]
    return found[0] if len(found) == 1 else None


def _rename_fix(
    use: HttpUse,
    name: str,
    new: CliFlag,
    span: tuple[int, int, int, int],
    safety: FixSafety = FixSafety.SAFE,
) -> Fix:
    """Rename the flag in the command's list: safe where a deprecation message names the new
    flag; unsafe where only a shared alias links them (the same option, by the host's parser,
    but nothing says its meaning stayed). A flag made from a dict's key is renamed by hand."""
    if span in use.keyed_flags:
        return Fix(FixSafety.MANUAL, f"pass {new.name} instead of {name} (rename the dict's key)")
    if use.argv_list:
        return Fix(
            safety,
            f"pass {new.name} instead of {name}",
            codemod="rename-launch-flag",
            params=(("old", name), ("new", new.name)),
        )
    return Fix(FixSafety.MANUAL, f"pass {new.name} instead of {name}")


def _removed(
    use: HttpUse,
    ctx: CheckContext,
    name: str,
    span: tuple[int, int, int, int],
    before: CliFlag,
    target: HttpSurface,
) -> Finding:
    new = _replacement(before.deprecated, name, target) or _same_alias(before, target)
    host = f"{ctx.target.name} {ctx.target.version}"
    ev = [
        evidence(ctx.base, before.file, before.line, before.deprecated or f"{before.name} defined"),
    ]
    if new is not None:
        ev.append(evidence(ctx.target, new.file, new.line, f"{new.name} defined"))
        why = (
            f"its deprecation named {new.name}"
            if before.deprecated and new.name in before.deprecated
            else f"{new.name} takes its alias {', '.join(sorted(set(before.aliases) & set(new.aliases)))}"
        )
        message = f"{host}'s server no longer takes {name}; {why}"
        named = bool(before.deprecated) and new.name in (before.deprecated or "")
        fix = _rename_fix(use, name, new, span, FixSafety.SAFE if named else FixSafety.UNSAFE)
    else:
        near = min(
            target.flags.values(), key=lambda f: (f.file != before.file, f.line), default=None
        )
        if near is not None:
            ev.append(evidence(ctx.target, near.file, near.line, f"no {name}"))
        message = f"{host}'s server no longer takes {name}: it exits with a usage error"
        fix = None
    return _at_flag(
        finding(use, HTTP_CLI_FLAG, symbol=name, message=message, evidence=ev, fix=fix, at=span)
    )


def _deprecated(
    use: HttpUse,
    ctx: CheckContext,
    name: str,
    span: tuple[int, int, int, int],
    before: CliFlag | None,
    now: CliFlag,
    target: HttpSurface,
) -> Finding:
    new = _replacement(now.deprecated, name, target)
    message = f"{ctx.target.name} {ctx.target.version} deprecates {name}: {now.deprecated}"
    ev = [evidence(ctx.target, now.file, now.line, now.deprecated or "deprecated")]
    if before is not None:  # without a baseline, the target's word alone
        ev.insert(0, evidence(ctx.base, before.file, before.line, f"{before.name} defined"))
    return _at_flag(
        finding(
            use,
            HTTP_CLI_FLAG,
            symbol=name,
            message=message,
            evidence=ev,
            fix=_rename_fix(use, name, new, span) if new is not None else None,
            severity=Severity.WARNING,
            at=span,
        )
    )


def _at_flag(f: Finding) -> Finding:
    """A flag's finding is fixed where the flag is written (the list that holds it may be
    another than the one the command starts with: ``cmd += ["--x"]``)."""
    return replace(f, anchor=None)
