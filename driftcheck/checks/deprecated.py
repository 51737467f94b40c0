"""Deprecations: host names, functions and parameters the client uses that now warn.

Three sources, all read from the host's source: a name its module's ``__getattr__`` serves
after a warning (a migration table), a function whose body warns whatever its arguments (or
``@deprecated``), and a parameter whose use the body warns about (``if min_items is not None:
warn(...)``). A parameter the body rejects with a message that says it is gone ("`regex` is
removed. use `pattern` instead") is an error. Only what the baseline did not already do is
reported; when the host names the replacement (another parameter, a new home), the fix
renames to it.
"""

from __future__ import annotations

import ast
from typing import cast

from driftcheck.checks.call_signature import CALL_SIGNATURE
from driftcheck.checks.context import CheckContext, finding, runs, side
from driftcheck.checks.declaration import Check, CheckId
from driftcheck.checks.replacement import replacement_fix
from driftcheck.client.use import Use
from driftcheck.findings import Evidence, Finding, Fix
from driftcheck.host.annotations import same_type
from driftcheck.host.api import Found, HostAPI
from driftcheck.host.declared import class_notes, module_notes
from driftcheck.host.param_notes import (
    EXTRA,
    OMITTED,
    ParamNote,
    function_notes,
    parameter_notes,
    replacements,
)
from driftcheck.host.relocation import named_in
from driftcheck.host.served import DEPRECATED, Served
from driftcheck.host.signature import CallShape, Param, Signature
from driftcheck.kinds import FixSafety, Kind, Severity, Witness

DEPRECATION = CheckId(
    Kind.DEPRECATED.value,
    Kind.DEPRECATED,
    Severity.WARNING,
    Witness.WARNS,
    fixes=(FixSafety.SAFE, FixSafety.UNSAFE, FixSafety.MANUAL),
    codemods=("rename-import", "rename-attribute", "rename-keyword"),
)
#: What this check reports; :mod:`driftcheck.checks.catalog` lists it.
CHECK = Check(__name__, (DEPRECATION,))


def check(use: Use, ctx: CheckContext) -> list[Finding]:
    """Report a use of a host name, function or parameter that became deprecated."""
    if use.kind not in ("call", "attribute", "import", "subclass"):
        return []
    target = ctx.lookup(ctx.target, use)
    if isinstance(target, Served) and target.status == DEPRECATED:
        return _served(use, ctx, target)
    if use.kind == "import":
        return _imported_module(use, ctx)
    read = _property(target) and use.kind == "attribute"  # ``Model.__fields__``: its getter runs
    if not isinstance(target, Found) or target.kind not in ("function", "class") and not read:
        return []
    looked = ctx.lookup(ctx.baseline, use) if ctx.baseline is not None else None
    if ctx.baseline is not None and not isinstance(looked, Found):
        return []
    base = looked if isinstance(looked, Found) else None  # found, or there is no baseline
    body = runs(ctx.target, target)  # what a call runs: the function, or the class's __init__
    base_body = runs(ctx.baseline, base) if ctx.baseline is not None else None
    if read:
        body = target
        base_body = base if _property(base) else None
    out: list[Finding] = []
    kinds = ("call", "attribute") if target.kind == "function" or read else ("call", "subclass")
    if use.kind in kinds:
        notes = _whole(ctx.target, target, body)
        if notes and not (ctx.baseline is not None and _whole(ctx.baseline, base, base_body)):
            name = use.member or use.symbol.rsplit(".", 1)[-1]
            where = body or target
            out.append(
                finding(
                    use,
                    DEPRECATION,
                    symbol=target.path,
                    message=(
                        f"{name} is deprecated in {ctx.target.name} {ctx.target.version}: "
                        f"{notes[0][:200]}"
                    ),
                    evidence=(Evidence(ctx.target.version, where.file, where.line, "deprecation"),),
                    fix=Fix(
                        FixSafety.MANUAL, "move to the replacement the deprecation message names"
                    ),
                )
            )
    if use.kind == "call" and use.shape is not None and body is not None:
        out.extend(_parameters(use, ctx, body, base_body, target, base))
    return out


def _property(found: object) -> bool:
    """A host property: reading it runs its getter, whose warnings are the read's."""
    return isinstance(found, Found) and "property" in getattr(found.obj, "labels", ())


def _imported_module(use: Use, ctx: CheckContext) -> list[Finding]:
    """An import of a module (or from it) that now warns when it is imported: the module or
    one of the packages above it, which the import system imports first (``from
    numpy.compat.py3k import asstr`` runs ``numpy/compat/__init__.py``)."""
    parts = use.symbol.split(".")
    for i in range(len(parts), 1, -1):
        module = ".".join(parts[:i])
        if ctx.target.module(module) is None:
            continue
        notes = module_notes(ctx.target, module)
        if not notes:
            continue
        if ctx.baseline is not None:
            if ctx.baseline.module(module) is None or module_notes(ctx.baseline, module):
                return []
        if not ctx.once(use.file, f"module-deprecated:{module}"):
            return []
        return [
            finding(
                use,
                DEPRECATION,
                symbol=module,
                message=(
                    f"{module} is deprecated in {ctx.target.name} {ctx.target.version} "
                    f"(importing it warns): {notes[0][:200]}"
                ),
                evidence=(
                    Evidence(
                        ctx.target.version,
                        ctx.target.tree.module_file(module) or "",
                        1,
                        "deprecation",
                    ),
                ),
                fix=Fix(FixSafety.MANUAL, "move to the replacement the deprecation message names"),
            )
        ]
    return []


def _whole(api: HostAPI, found: Found | None, body: Found | None) -> list[str]:
    """Deprecations whatever the arguments: the function's (or ``__init__``'s) body, and a
    ``@deprecated`` decorator on a class."""
    notes = function_notes(api, body) if body is not None else []
    if found is not None and found.kind == "class":
        notes = class_notes(api, found) + notes
    return notes


def _served(use: Use, ctx: CheckContext, target: Served) -> list[Finding]:
    """A name served after a warning by its module's ``__getattr__``."""
    if use.receiver:
        return []
    if use.kind == "import" and ctx.target.module(use.symbol) is not None:
        return []  # imported as a module, not read off its package
    if ctx.baseline is not None:
        base = ctx.lookup(ctx.baseline, use)
        if base is None or isinstance(base, Served) and base.status != "present":
            return []  # absent, or already deprecated / removed at baseline
        # Undecidable at baseline (a compiled module), served with a warning now: the host
        # still serves it, so it was there.
    gone = target.path
    if not ctx.once(use.file, f"deprecated:{gone}"):
        return []
    named = named_in(ctx.target, target.message, gone)
    fix = Fix(FixSafety.MANUAL, target.message or "move to the replacement the host names")
    if named is not None:
        fix = replacement_fix(
            use, ctx, gone, named[0], FixSafety.SAFE, f"use {named[0]}", target.message
        )
    evidence = [ctx.evidence(ctx.target, target, note="deprecation")]
    if ctx.baseline is not None:
        evidence.insert(0, ctx.evidence(ctx.baseline, ctx.baseline.resolve(gone)))
    return [
        finding(
            use,
            DEPRECATION,
            symbol=gone,
            message=(
                f"{gone} is deprecated in {ctx.target.name} {ctx.target.version}: "
                f"{target.message[:240]}"
            ),
            evidence=tuple(evidence),
            fix=fix,
        )
    ]


def _parameters(
    use: Use,
    ctx: CheckContext,
    target: Found,
    base: Found | None,
    called: Found,
    base_called: Found | None = None,
) -> list[Finding]:
    """Keywords the call passes that the host now warns about or rejects (``target``: the
    function that runs, ``called``: what the client calls)."""
    notes = parameter_notes(ctx.target, target)
    if not notes:
        return []
    shape = cast(CallShape, use.shape).on(side(ctx.target))  # asked of calls with a shape
    before: set[tuple[str, str]] = set()
    base_notes = []
    if base is not None and ctx.baseline is not None:
        base_notes = parameter_notes(ctx.baseline, base)
        before = {(n.param, n.status) for n in base_notes}
    sig = ctx.target.signature(called)
    old_sig = (
        ctx.baseline.signature(base_called)
        if ctx.baseline is not None and isinstance(base_called, Found)
        else None
    )
    out: list[Finding] = []
    seen: set[str] = set()
    named = {p.name for p in sig.params} if sig is not None else set()
    for note in notes:
        passed = note.param
        if note.status == OMITTED:
            if _leaves_out(note.param, shape, sig) and note.param not in seen:
                if not any(n.param == note.param and n.status == OMITTED for n in base_notes):
                    seen.add(note.param)
                    out.append(_omitted_finding(use, ctx, target, note))
            continue
        if note.param == EXTRA:  # any keyword that lands in ``**kwargs``
            if sig is None:
                continue
            own = {n.param for n in notes}  # a keyword with a note of its own: that one says it
            passed = next((k for k in shape.keywords if k not in named and k not in own), "")
        index = None if passed in shape.keywords else _by_position(note.param, shape, sig)
        if (passed not in shape.keywords and index is None) or note.param in seen:
            continue
        if note.values and _other_value(shape.literal(passed), note.values):
            continue  # the host warns for other values than the one passed
        if (note.param, note.status) in before or (note.param, "removed") in before:
            continue
        seen.add(note.param)
        if index is not None:  # ``make_aware(value, tz, is_dst)``: passed by position
            spans, i = shape.positional_spans, index
        else:
            spans, i = shape.keyword_spans, shape.keywords.index(passed)
        at = spans[i] if i < len(spans) else None
        old = (sig.param(note.param) if sig else None) or (
            old_sig.param(note.param) if old_sig else None
        )
        out.append(
            _param_finding(use, ctx, target, note, sig, shape.keywords, at, passed, old, index)
        )
    return out


def _other_value(text: str | None, values: tuple[str, ...]) -> bool:
    """Whether a literal passed (its source text) is none of the values the host warns for."""
    if text is None:
        return False  # not a literal: it may be one of them
    try:
        return repr(ast.literal_eval(text)) not in values
    except (ValueError, SyntaxError, TypeError):
        return False


def _by_position(param: str, shape: CallShape, sig: Signature | None) -> int | None:
    """The index of the positional argument that lands on ``param``, if one does."""
    if sig is None:
        return None
    positional = [
        p.name for p in sig.params if p.kind in ("positional_only", "positional_or_keyword")
    ]
    if param in positional and positional.index(param) < shape.positional:
        return positional.index(param)
    return None


def _leaves_out(param: str, shape: CallShape, sig: Signature | None) -> bool:
    """Whether a call leaves ``param`` out (not by keyword, not by position, no ``**``)."""
    if param in shape.keywords or shape.double_star or shape.star or sig is None:
        return False
    positional = [
        p.name for p in sig.params if p.kind in ("positional_only", "positional_or_keyword")
    ]
    return not (param in positional and positional.index(param) < shape.positional)


def _omitted_finding(use: Use, ctx: CheckContext, target: Found, note: ParamNote) -> Finding:
    name = use.member or use.symbol.rsplit(".", 1)[-1]
    return finding(
        use,
        DEPRECATION,
        symbol=target.path,
        message=(
            f"{name}(...) without {note.param}= is deprecated in {ctx.target.name} "
            f"{ctx.target.version}: {note.message[:240]}"
        ),
        evidence=(Evidence(ctx.target.version, target.file, note.line, "deprecation"),),
        fix=Fix(FixSafety.MANUAL, f"pass {note.param}= ({note.message[:160]})"),
        witness={
            "check": "workload",
            "reason": f"the host warns when it runs without {note.param}=",
        },
    )


def _param_finding(
    use: Use,
    ctx: CheckContext,
    target: Found,
    note: ParamNote,
    sig: Signature | None,
    passed: tuple[str, ...],
    at: tuple[int, int, int, int] | None,
    keyword: str,
    old: Param | None = None,
    index: int | None = None,
) -> Finding:
    name = use.member or use.symbol.rsplit(".", 1)[-1]
    removed = note.status == "removed"
    verb = "no longer accepts" if removed else "deprecates"
    how = f"{keyword}=" if index is None else f"{keyword} (passed as argument {index + 1})"
    fix = Fix(FixSafety.MANUAL, note.message[:200])
    named = replacements(note.message, note.param, (p.name for p in sig.params) if sig else ())
    if len(named) > 1:  # ``missing`` -> ``load_default`` or ``dump_default``: the caller's choice
        fix = Fix(
            FixSafety.MANUAL,
            f"pass {' or '.join(f'{n}=' for n in named)} instead of {note.param}= (the host's "
            "message names each; which one fits depends on what the value is for)",
        )
    new = note.replacement
    target_param = sig.param(new) if new and sig is not None else None
    renamable = index is None and note.param != EXTRA  # a positional keeps its slot
    if new and target_param is not None and new not in passed and renamable:
        same = old is not None and same_type(old, target_param)
        fix = Fix(
            FixSafety.SAFE if same else FixSafety.UNSAFE,
            f"rename the keyword {note.param} to {new} (the host's message names it"
            + ("" if same else "; the value it takes may differ: check it")
            + ")",
            codemod="rename-keyword",
            params=(("keyword", note.param), ("new", new)),
        )
    return finding(
        use,
        CALL_SIGNATURE if removed else DEPRECATION,
        symbol=f"{target.path}({keyword}=)",
        message=(
            f"{name}(...) {verb} {how} in {ctx.target.name} {ctx.target.version}: "
            f"{note.message[:240]}"
        ),
        evidence=(Evidence(ctx.target.version, target.file, note.line, note.status),),
        fix=fix,
        at=at,
        # A removal the body raises binds (the parameter, or **kwargs, still takes it); a
        # deprecation warns only when the body runs.
        witness={"check": "bind", "body": "true"}
        if removed
        else {"check": "workload", "reason": f"the host warns about {keyword}= when it runs"},
    )
