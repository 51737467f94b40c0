"""Whether a replacement is a drop-in: the fix that points a use of ``gone`` at ``new`` is safe
only when the client's uses mean the same on it.

A rename the host's words or an alias chain propose is checked against what the client does
with the name: each call's arguments are bound against ``gone``'s signature on the baseline
and ``new``'s on the target, and must land on parameters of the same names and kinds (an
argument ``gone`` put into ``**kwargs`` must go there on ``new`` too), with ``new`` accepting
the whole call and the same defaults for what the call leaves out; another function (not the
same one moved) needs the same return annotation, and an old body that calls it and reworks
the result (``recfromtxt``) is no alias of it. A name only referenced (passed as a callback)
needs the same parameters. The host's words
count too: a message that names two replacements gives a manual fix naming both, and one that
spells the replacement with arguments (``np.sort(a, axis=0)``) or a condition ("with comma
delimiter") says it is not a drop-in. ``np.find_common_type`` -> ``np.promote_types`` (other
parameters: TypeError) and ``np.set_string_function`` -> ``np.set_printoptions`` (the
function lands on ``precision``) are what this keeps from being applied silently.
"""

from __future__ import annotations

import ast
import re
import textwrap
from typing import cast

from driftcheck.checks.context import CheckContext, rename_fix
from driftcheck.client.use import Use
from driftcheck.findings import Fix
from driftcheck.host.annotations import normalise_annotation, union_members
from driftcheck.host.api import Found, HostAPI
from driftcheck.host.relocation import named_all
from driftcheck.host.signature import CallShape, Param, Signature, bind
from driftcheck.kinds import FixSafety

_POSITIONAL = ("positional_only", "positional_or_keyword")
_VAR = ("var_positional", "var_keyword")


def replacement_fix(
    use: Use,
    ctx: CheckContext,
    gone: str,
    new: str,
    safety: FixSafety,
    description: str,
    message: str = "",
) -> Fix:
    """The rename fix from ``gone`` to ``new``, made unsafe when the client's uses of ``gone``
    would not mean the same on ``new``, and manual when the host's message names more than
    one replacement."""
    both = [name for name, _ in named_all(ctx.target, message, gone)]
    if len(both) > 1:
        return Fix(
            FixSafety.MANUAL,
            f"use {' or '.join(both)} (the host's message names each; which one fits depends "
            "on the call)",
        )
    fix = rename_fix(use, gone, new, safety, description)
    if safety != FixSafety.SAFE:
        return fix
    why = differs(use, ctx, gone, new, message) or mixes_copies(use, ctx, gone, new)
    if not why:
        return fix
    return Fix(FixSafety.UNSAFE, f"{description}; not a drop-in: {why}", fix.codemod, fix.params)


def differs(use: Use, ctx: CheckContext, gone: str, new: str, message: str = "") -> str:
    """What makes ``new`` on the target behave otherwise than ``gone`` on the baseline for
    this client's uses ('' when nothing does, or nothing can be compared)."""
    short = new.rsplit(".", 1)[-1]
    said = _qualified(message, gone, short)
    if said:
        return said
    if ctx.baseline is None:
        return ""
    old, now = ctx.baseline.resolve(gone), ctx.target.resolve(new)
    if not isinstance(old, Found) or not isinstance(now, Found):
        return ""
    if old.kind not in ("function", "class"):
        return ""  # a constant, or a module the client reads a name through
    was = gone.rsplit(".", 1)[-1]
    if now.kind == "module" and old.kind != "module":  # the fix imports ``was`` from there
        now = ctx.target.resolve(f"{new}.{was}")
        short = was
        if not isinstance(now, Found):
            return ""
    if old.path != gone and old.obj.name == now.obj.name:
        return ""  # ``gone`` was an alias of the same-named object ``new`` names
    if now.kind not in ("function", "class"):
        return ""  # built by a call (``lazy(gettext, str)``, ``partial(...)``): not comparable
    if old.kind != now.kind:
        return f"{was} is a {old.kind}, {short} a {now.kind}"
    before, after = ctx.baseline.signature(old), ctx.target.signature(now)
    if before is None or after is None:
        if before is None and after is None:
            return ""  # neither side has a signature to read (compiled on both)
        return f"no signature of {was if before is None else short} to compare"
    if _forwards(ctx.baseline, old, before):
        before = after  # ``def sometrue(*args, **kwargs): return any(*args, **kwargs)``
    elif was != short and isinstance(ctx.baseline.resolve(new), Found):
        # Another name the baseline had too: a body that calls it and reworks its result
        # (``recfromtxt``: ``genfromtxt(...).view(np.recarray)``) is no alias of it.
        if _wraps(ctx.baseline, old, short):
            return f"{was} calls {short} and reworks its result ({old.file}:{old.line})"
    if was != short and not _same_return(before.returns, after.returns):
        # (a function that only moved keeps its name; its annotations' spelling churns)
        return f"{was} returns {before.returns}, {short} returns {after.returns}"
    if _same_parameters(before, after):
        return ""  # any call, spread or not, binds alike
    # A call is fixed where it is; an import's rewrite reaches every call of the name in the file.
    calls = [use] if use.kind == "call" else []
    if use.kind == "import":
        calls = [
            u for u in ctx.uses if u.file == use.file and u.kind == "call" and u.symbol == gone
        ]
    for call in calls:
        why = _call_differs(call.shape, before, after, was, short) if call.shape else ""
        if why:
            return f"line {call.line}: {why}"
    referenced = not calls  # read as a value (a callback), or imported and never called here
    if referenced and _params(before) != _params(after):
        return (
            f"{was} is referenced, not called here, and its parameters "
            f"({_listed(before)}) are not {short}'s ({_listed(after)})"
        )
    return ""


def mixes_copies(use: Use, ctx: CheckContext, gone: str, new: str) -> str:
    """Why pointing ``gone`` at ``new`` mixes two copies of one package ('' when it does not).

    A move into another package (``pydantic.main.ModelMetaclass`` to
    ``pydantic.v1.main.ModelMetaclass``) may lead into a copy the host keeps beside the package
    (pydantic 2's ``pydantic.v1``). When the client keeps another name from the old package that
    the target still has, and the copy holds another object in that place (``pydantic.BaseModel``
    and ``pydantic.v1.BaseModel``), the one-name fix leaves the client using objects of both: a
    v1 metaclass beside a v2 ``BaseModel`` is a metaclass conflict. The client's names in the
    same file are named first, then those of its other files (objects cross files)."""
    for old, copy in _copy_maps(gone, new):
        kept = _kept_twins(ctx, old, copy)
        hit = kept.get(use.file) or next(iter(kept.values()), None)
        if hit is None:
            continue
        other, name, was, twin = hit
        where = f"line {other.line}" if other.file == use.file else f"{other.file}:{other.line}"
        return (
            f"{where} keeps {name} ({was.file}:{was.line}), and {copy}{name[len(old) :]} is "
            f"another object ({twin.file}:{twin.line}): moving only {gone.rsplit('.', 1)[-1]} "
            "mixes the two"
        )
    return ""


def _copy_maps(gone: str, new: str) -> list[tuple[str, str]]:
    """The package prefixes a move maps one onto the other: the modules around a common tail
    (``a.main.X`` to ``a.v1.main.X``: ``a`` to ``a.v1``) and the package the two paths share
    onto its child the new one enters (``a.main.X`` to ``a.v1.config.X``: ``a`` to ``a.v1``)."""
    was, now = gone.split("."), new.split(".")
    maps = []
    k = 0
    while k < min(len(was), len(now)) - 1 and was[-1 - k] == now[-1 - k]:
        k += 1
    if k:
        maps.append((".".join(was[:-k]), ".".join(now[:-k])))
    p = 0
    while p < min(len(was), len(now)) and was[p] == now[p]:
        p += 1
    if 0 < p < len(now) - 1:
        maps.append((".".join(was[:p]), ".".join(now[: p + 1])))
    return [m for i, m in enumerate(maps) if m not in maps[:i] and m[0] != m[1]]


def _kept_twins(ctx: CheckContext, old: str, copy: str) -> dict[str, tuple[Use, str, Found, Found]]:
    """Per client file, its first use of a name under ``old`` that the target has and that
    ``copy`` holds another object for (modules, read through, mix nothing). Read once per scan."""
    memo = ctx.__dict__.setdefault("_kept_twins", {})
    if (old, copy) in memo:
        return cast(dict[str, tuple[Use, str, Found, Found]], memo[(old, copy)])
    found: dict[str, tuple[Use, str, Found, Found]] = {}
    for other in ctx.uses:
        name = other.symbol
        if other.file in found or not name.startswith(old + ".") or name.startswith(copy + "."):
            continue
        kept = ctx.target.resolve(name)
        if not isinstance(kept, Found) or kept.kind == "module":
            continue
        twin = ctx.target.resolve(copy + name[len(old) :])
        if not isinstance(twin, Found) or (kept.file, kept.line) == (twin.file, twin.line):
            continue  # no copy, or one object under two names: nothing is mixed
        found[other.file] = (other, name, kept, twin)
    memo[(old, copy)] = found
    return found


def _call_differs(shape: CallShape, before: Signature, after: Signature, was: str, now: str) -> str:
    """Why one call binds otherwise on ``after`` than on ``before`` ('' when it binds alike)."""
    if shape.star or shape.double_star:
        return "the call spreads *args or **kwargs, whose binding cannot be compared"
    problems = bind(after, shape)
    if problems:
        return f"{now}(...) rejects the call: {problems[0].detail}"
    old_slots = [p for p in before.params if p.kind in _POSITIONAL]
    new_slots = [p for p in after.params if p.kind in _POSITIONAL]
    for i in range(shape.positional):
        a = old_slots[i] if i < len(old_slots) else None
        b = new_slots[i] if i < len(new_slots) else None
        if _name(a, "*args") != _name(b, "*args"):
            return (
                f"argument {i + 1} lands on {_name(a, '*args')} in {was}, "
                f"on {_name(b, '*args')} in {now}"
            )
    for kw in shape.keywords:
        a, b = _keyword(before, kw), _keyword(after, kw)
        if _name(a, "**kwargs") != _name(b, "**kwargs"):
            return (
                f"{kw}= lands on {_name(a, '**kwargs')} in {was}, on {_name(b, '**kwargs')} in "
                f"{now}"
            )
    passed = {p.name for p in old_slots[: shape.positional]} | set(shape.keywords)
    for p in before.params:
        q = after.param(p.name)
        if p.name in passed or q is None or p.kind in _VAR:
            continue
        if _default(p) != _default(q) and "..." not in (p.default, q.default):
            return f"{p.name} defaults to {p.default} in {was}, to {q.default} in {now}"
    return ""


def _keyword(sig: Signature, kw: str) -> Param | None:
    """The parameter a keyword binds to (None: ``**kwargs`` takes it, or nothing does)."""
    p = sig.param(kw)
    return p if p is not None and p.kind in ("positional_or_keyword", "keyword_only") else None


def _name(p: Param | None, otherwise: str) -> str:
    return p.name if p is not None else otherwise


def _default(p: Param) -> str | None:
    return p.default if p.has_default else None


def _params(sig: Signature) -> list[tuple[str, str, bool]]:
    return [(p.name, p.kind, p.has_default) for p in sig.params]


def _listed(sig: Signature) -> str:
    return ", ".join(p.name for p in sig.params)


def _forwards(api: HostAPI, old: Found, sig: Signature) -> bool:
    """``old`` takes only ``*args``/``**kwargs`` and hands them on whole (``return any(*args,
    **kwargs)``, ``super().__init__(*args, **kwargs)``): what it accepts is what it calls."""
    if not sig.params or any(p.kind not in _VAR for p in sig.params):
        own = [getattr(p.kind, "value", "") for p in getattr(old.obj, "parameters", ())]
        # the signature read for callers may have followed ``**kwargs`` already
        if not own or any(k not in ("variadic positional", "variadic keyword") for k in own):
            return False
    return any(any(isinstance(a, ast.Starred) for a in call.args) for call, _ in _calls(api, old))


def _same_parameters(a: Signature, b: Signature) -> bool:
    """The same parameters: names, kinds and defaults, in order."""
    return [(p.name, p.kind, _default(p)) for p in a.params] == [
        (p.name, p.kind, _default(p)) for p in b.params
    ]


def _same_return(a: str | None, b: str | None) -> bool:
    """The same return annotation, or one side unannotated (``Optional[str]`` is ``str | None``)."""
    x, y = normalise_annotation(a), normalise_annotation(b)
    return not x or not y or union_members(x) == union_members(y)


def _wraps(api: HostAPI, old: Found, new: str) -> bool:
    """``old``'s body calls ``new`` and does something with the result besides returning it
    (``output = genfromtxt(fname, **kwargs)`` ... ``output.view(np.recarray)``)."""
    calls = _calls(api, old, new)
    return bool(calls) and not any(returned for _, returned in calls)


def _calls(api: HostAPI, old: Found, new: str = "") -> list[tuple[ast.Call, bool]]:
    """The calls of ``new`` (any call, without it) in ``old``'s body (not its docstring),
    each with whether it is what a ``return`` returns."""
    text = api.source_texts().get(old.file)
    start, end = old.obj.lineno, old.obj.endlineno
    if text is None or not start or not end:
        return []
    try:
        tree = ast.parse(textwrap.dedent("\n".join(text.splitlines()[start - 1 : end])))
    except SyntaxError:
        return []
    returned = {
        id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Return) and n.value is not None
    }
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        if name == new or not new:
            out.append((node, id(node) in returned))
    return out


# What a message says right after the replacement's name: arguments (``np.sort(a, axis=0)``)
# or a condition ("use X with comma delimiter instead", "use X instead with a formatter").
_ARGUMENTS = re.compile(r"\((?!\))([^)`]*)\)")
_CONDITION = re.compile(r"`?(?:\(\))?`?\s+(?:instead\s+)?(with\s+[^.;]+)")
_TOKEN = re.compile(r"[A-Za-z_][\w.]*")


def _qualified(message: str, gone: str, short: str) -> str:
    """What the host's message adds to the replacement's name: arguments or a condition.
    Only a mention of the replacement counts, not one of ``gone`` (``numpy.lib.emath with
    numpy.emath``)."""
    tail = gone.split(".", 1)[-1]
    for m in _TOKEN.finditer(message or ""):
        token = m.group().rstrip(".")
        if token.rsplit(".", 1)[-1] != short or token.split(".", 1)[-1] in (tail, gone):
            continue
        rest = message[m.start() + len(token) :]
        args = _ARGUMENTS.match(rest)
        if args:
            return f"the host's message calls it as {short}({args.group(1).strip()})"
        cond = _CONDITION.match(rest)
        if cond:
            return f"the host's message says to use it {cond.group(1).strip()}"
    return ""
