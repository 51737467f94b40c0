"""Missing and moved symbols: a host name the client imports or reaches that the target lacks.

A name is missing when the target does not bind it, or when its module's ``__getattr__``
raises for it (the host's message, with the replacement it names, is quoted). A symbol with a
new home on the host's own evidence (:mod:`driftcheck.host.relocation`: the host's message, an
alias chain, a same-kind definition with a compatible signature) is reported as
``moved-symbol`` with a rename; a same-named object that is not the same thing is named in the
message, without a fix. A removed name is reported at every import statement of it (as ruff and
mypy do), not again at the uses of the names those imports bind; a call of a name whose ``except
ImportError`` fallback left it ``None`` is reported at the call. A store to a dropped name is
:mod:`driftcheck.checks.stale_patch`'s.
"""

from __future__ import annotations

from driftcheck.checks.context import (
    CheckContext,
    finding,
    imported_parts,
    missing_module,
    prefixes,
)
from driftcheck.checks.declaration import Check, CheckId
from driftcheck.checks.history import quoted, warned_before
from driftcheck.checks.replacement import replacement_fix
from driftcheck.client.use import Use
from driftcheck.findings import Evidence, Finding, Fix
from driftcheck.host.api import UNKNOWN, Found, HostAPI, Lookup
from driftcheck.host.relocation import Lookalike, NewHome, find_new_home
from driftcheck.host.served import REMOVED, Served
from driftcheck.kinds import FixSafety, Kind, Severity, Witness

MISSING_SYMBOL = CheckId(
    Kind.MISSING_SYMBOL.value,
    Kind.MISSING_SYMBOL,
    Severity.ERROR,
    Witness.RESOLVE,
    fixes=(FixSafety.MANUAL,),
)
MOVED_SYMBOL = CheckId(
    Kind.MOVED_SYMBOL.value,
    Kind.MOVED_SYMBOL,
    Severity.ERROR,
    Witness.RESOLVE,
    fixes=(FixSafety.SAFE, FixSafety.UNSAFE, FixSafety.MANUAL),
    codemods=("rename-import", "rename-attribute"),
)
#: What this check reports; :mod:`driftcheck.checks.catalog` lists it.
CHECK = Check(__name__, (MISSING_SYMBOL, MOVED_SYMBOL))

KINDS = ("import", "attribute", "call", "subclass")


def _gone(found: Lookup) -> bool:
    return found is None or isinstance(found, Served) and found.status == REMOVED


def _first_missing_prefix(api: HostAPI, symbol: str, imported: int = 0) -> tuple[str, Lookup]:
    for p in prefixes(symbol):
        got = api.resolve(p, imported=min(imported, p.count(".") + 1))
        if _gone(got):
            return p, got
    return symbol, None


def _read_off_a_module(use: Use, name: str) -> bool:
    """Whether the use spells more than the bare name (``np.product(x)``, not ``product(x)``)."""
    end = use.end_column if use.end_line == use.line else 0
    if use.kind == "call" and use.shape is not None:
        shape = use.shape
        starts = [s[1] for s in (*shape.positional_spans, *shape.keyword_spans) if s[0] == use.line]
        if shape.close_span and shape.close_span[0] == use.line:
            starts.append(shape.close_span[1])
        end = min(starts) - 1 if starts else 0  # the opening parenthesis, at the latest
    elif use.kind != "attribute":
        return False
    return end - use.column > len(name)


def _once_key(use: Use, gone: str) -> str:
    """What a finding of ``gone`` at ``use`` is reported once for: every import statement (as
    ruff and mypy do), every call of a name its import fallback left None, every line that
    reads the name off a module (``np.product(x)``); through an import, the names it binds
    break where they are imported, not again at each use."""
    if use.kind == "import":
        return f"{gone}@import:{use.statement or use.line}"
    if use.none_fallback or (
        use.symbol == gone and _read_off_a_module(use, gone.rsplit(".", 1)[-1])
    ):
        return f"{gone}@{use.line}"
    return gone


def _existed(found: Lookup) -> bool:
    return isinstance(found, Found) or isinstance(found, Served) and found.status != REMOVED


def dropped(use: Use, ctx: CheckContext) -> tuple[str, Lookup] | None:
    """The host name ``use`` reaches that the target dropped (its first missing part) and what
    the target's ``__getattr__`` says of it; None when nothing is dropped, or it was already
    missing at baseline."""
    if use.kind not in KINDS or use.receiver:
        return None
    imported = imported_parts(use)
    target_found = ctx.target.resolve(use.symbol, imported=imported)
    gone_module = missing_module(ctx.target, use.symbol) if use.kind == "import" else None
    if not _gone(target_found) and gone_module is None:
        return None
    if use.kind == "import" and gone_module is None and ctx.target.module(use.symbol) is not None:
        return None  # ``from pkg import sub``: the import system imports the submodule
    base_found = ctx.baseline.resolve(use.symbol, imported=imported) if ctx.baseline else None
    if ctx.baseline is not None and not _existed(base_found):
        # Undecidable at baseline, but the target's own table says it was removed: it was there.
        said_removed = isinstance(target_found, Served) and base_found is UNKNOWN
        if not said_removed and (
            gone_module is None or missing_module(ctx.baseline, use.symbol) is not None
        ):
            return None  # already broken (or undecidable) at baseline: not drift
    if gone_module:
        gone, served = gone_module, None
    else:
        gone, served = _first_missing_prefix(ctx.target, use.symbol, imported)
    if use.kind == "import" and ctx.target.module(gone) is not None:
        return None  # an import imports the module, whatever its package's __getattr__ says
    return gone, served


def check(use: Use, ctx: CheckContext) -> list[Finding]:
    """Report a host symbol that resolved at baseline and does not exist on the target."""
    got = dropped(use, ctx)
    if got is None:
        return []
    gone, served = got
    if use.store and gone == use.symbol:
        return []  # a patch of the dropped name itself: stale_patch's
    if use.none_fallback and (use.file, f"{gone}@import:{use.none_fallback}") in ctx.reported:
        return []  # its import is what fails (a handler that does not catch it): said there
    if not ctx.once(use.file, _once_key(use, gone)):
        return []
    if use.kind == "import":
        ctx.reported.add((use.file, gone))  # the names it binds are not reported again
    base_gone = ctx.baseline.resolve(gone) if ctx.baseline else None
    evidence = [ctx.evidence(ctx.base, base_gone)] if ctx.baseline else []
    said = served.message if isinstance(served, Served) else ""
    before = warned_before(ctx.baseline, base_gone)
    if isinstance(served, Served):
        evidence.append(ctx.evidence(ctx.target, served, note="raises"))
    original = _reexported(ctx, base_gone)
    if original is not None:
        return [_reexport_gone(use, ctx, gone, original, evidence, said)]
    home = find_new_home(
        ctx.target,
        gone,
        baseline=ctx.baseline,
        message=said or before,
        private_ok=not said,
        reads=use.symbol,
    )
    versions = f" (present in {ctx.base.version})" if ctx.baseline else ""
    host = f"{ctx.target.name} {ctx.target.version}"
    unguarded = (
        f"; where its import (line {use.none_fallback}) fails, the fallback leaves it None (or "
        "unbound), and nothing tests it before this call"
        if use.none_fallback
        else ""
    )
    if isinstance(home, NewHome):
        new_home = home.found
        evidence.append(Evidence(ctx.target.version, new_home.file, new_home.line, "new location"))
        short = gone.rsplit(".", 1)[-1]
        why = {
            "message": "the host's message names it",
            "alias": f"{short} was an alias of it",
            "definition": "same kind and signature",
            "changed": "same kind and most of its parameters; the signature changed",
            "contents": f"a module new in {ctx.target.version} that defines most of {short}'s "
            "names; the host does not say so",
        }[home.evidence]
        told = f": {said}" if said else quoted(ctx.base.version, before) if before else ""
        return [
            finding(
                use,
                MOVED_SYMBOL,
                symbol=gone,
                message=(
                    f"{gone} is no longer there in {host}{versions}{told}; "
                    f"it now lives at {home.name} ({why}){unguarded}"
                ),
                evidence=tuple(evidence),
                fix=Fix(FixSafety.MANUAL, f"import it from {home.name} where the try imports it")
                if use.none_fallback
                else replacement_fix(
                    use,
                    ctx,
                    gone,
                    home.name,
                    FixSafety.UNSAFE
                    if home.evidence in ("changed", "contents")
                    else FixSafety.SAFE,
                    (
                        f"import from {home.name} instead"
                        if home.evidence == "contents"
                        else f"import it from {home.name.rsplit('.', 1)[0]}"
                        if home.name.rsplit(".", 1)[-1] == short
                        else f"use {home.name}"
                    ),
                    said or before,
                ),
            )
        ]
    if said:
        message = f"{gone} was removed in {host}{versions}: {said}"
    else:
        message = f"{gone} does not exist in {host}{versions}"
    if before and before != said:
        message += quoted(ctx.base.version, before)
    scattered = _names_homes(use, ctx, gone) if home is None and not (said or before) else []
    if scattered:
        message += "; the names imported from it are defined elsewhere on the target: " + ", ".join(
            f"{name} in {new.found.path.rsplit('.', 1)[0]}" for name, new in scattered
        )
        evidence.extend(
            Evidence(ctx.target.version, new.found.file, new.found.line, "new location")
            for _, new in scattered
        )
    if isinstance(home, Lookalike):
        message += (
            f"; {home.found.path} shares the name but is not its new home (it is {home.reason})"
        )
    message += unguarded
    return [
        finding(
            use,
            MISSING_SYMBOL,
            symbol=gone,
            message=message,
            evidence=tuple(evidence),
            fix=Fix(
                FixSafety.MANUAL,
                said
                or before
                or (
                    "; ".join(
                        f"import {name} from {new.found.path.rsplit('.', 1)[0]}"
                        for name, new in scattered
                    )
                    + " (same kind and signature; the host does not say so)"
                    if scattered
                    else f"{gone} was removed; find its replacement in the host's changes"
                ),
            ),
        )
    ]


def _names_homes(use: Use, ctx: CheckContext, gone: str) -> list[tuple[str, NewHome]]:
    """Where the target defines each name one ``from gone import a, b`` statement binds, when
    module ``gone`` went whole and no single module took its place (vLLM 0.33.0 spread
    ``entrypoints.utils`` over ``serve.utils.api_utils`` and ``common.startup``): a definition
    of the same kind and a compatible signature, per name, in a place the baseline did not have;
    empty unless every name has one."""
    if use.kind != "import" or ctx.baseline is None:
        return []
    was = ctx.baseline.resolve(gone)
    if not isinstance(was, Found) or was.kind != "module":
        return []
    statement = use.statement or use.line
    names = sorted(
        {
            u.symbol[len(gone) + 1 :].split(".", 1)[0]
            for u in ctx.uses_in(use.file)
            if u.kind == "import"
            and (u.statement or u.line) == statement
            and u.symbol.startswith(gone + ".")
        }
    )
    homes = []
    for name in names:
        home = find_new_home(ctx.target, f"{gone}.{name}", baseline=ctx.baseline)
        if not isinstance(home, NewHome) or home.evidence != "definition":
            return []  # one name without a home: the fix would be half a fix
        if isinstance(ctx.baseline.resolve(home.found.path), Found):
            return []  # defined there on the baseline too: a look-alike, not where it went
        homes.append((name, home))
    return homes


def _reexported(ctx: CheckContext, found: Lookup) -> str | None:
    """The other distribution's object a baseline name stood for (``from builtins import
    float``, ``Future = asyncio.Future``, a loop copying ``numpy.__all__``), else None."""
    if ctx.baseline is None or not isinstance(found, Served) or found.status == REMOVED:
        return None
    if found.returns and not ctx.baseline.owns(found.returns):
        return found.returns
    return None


def _reexport_gone(
    use: Use, ctx: CheckContext, gone: str, original: str, evidence: list, said: str
) -> Finding:
    """A re-export of another distribution's object that the target dropped: what it was, and
    the original to use (the object the name stood for, so the fix is to import it from
    there)."""
    host = f"{ctx.target.name} {ctx.target.version}"
    base = ctx.base.resolve(gone)
    how = (
        f"{ctx.base.version} copied {original.rsplit('.', 1)[0]}.__all__ into its namespace, "
        f"{original} with it"
        if isinstance(base, Served) and base.message.startswith("copied")
        else f"in {ctx.base.version} it was a re-export of {original}"
    )
    if (
        not said
        and isinstance(base, Served)
        and base.message
        and not base.message.startswith("copied")
    ):
        said = base.message  # the baseline's own words (``Import from datetime module instead``)
    short = original.rsplit(".", 1)[-1]
    builtin = original.startswith("builtins.")
    use_instead = f"the builtin {short}" if builtin else original
    message = (
        f"{gone} does not exist in {host} ({how}, another distribution's object)"
        f"{': ' + said if said else ''}; use {use_instead}"
    )
    return finding(
        use,
        MISSING_SYMBOL,
        symbol=gone,
        message=message,
        evidence=tuple(evidence),
        fix=Fix(
            FixSafety.MANUAL,
            f"use {use_instead} instead: {gone} stood for that object on {ctx.base.version} "
            f"(check it is the same object before relying on it)",
        ),
    )
