"""Attributes and methods read off a typed host receiver that the target class no longer has.

A method the target class has under another name, with the baseline's parameters and body
(``get_input_embeddings`` -> ``embed_input_ids`` on vLLM's decoder stacks), is a rename the host's
own code shows: the finding's fix is a safe ``rename-attribute`` to the new name.

An attribute a host function sets on the object the client passes it (``helper(obj)`` whose body
does ``obj.x = …`` or ``setattr(obj, "x", …)``) is there for the client's ``obj.x`` in the file
that calls the helper; where the baseline's helper set it and the target's no longer does, that
is the drift reported.

A member the client's own subclass of the receiver's class sets, where the client stores one of
those in an attribute of the receiver's name (``cfg.scheduler = MyScheduler(...)``, then
``self.scheduler.x``), is at most info: the object read may be the client's own.

A member read off what a host class holds (``field.field_info.max_length``), where that class
moved on the target (to a copy, ``pydantic.v1``) and what its new home holds there has the
member, is not reported: the holder's type was read on the baseline, and the move is the finding.

What Python itself gives every instance is never missing: ``object``'s own attributes
(``__class__``, ``__doc__``), and ``__dict__`` / ``__weakref__`` unless every class of the
receiver's MRO declares ``__slots__`` without them (pydantic 2's ``BaseModel`` lists ``__dict__``
in its ``__slots__``; 1.x set it in ``__init__``).
"""

from __future__ import annotations

import ast

import griffe

from driftcheck.checks.context import CheckContext, finding
from driftcheck.checks.declaration import Check, CheckId
from driftcheck.checks.history import quoted, warned_before
from driftcheck.client.guards import same_expression
from driftcheck.client.use import Use
from driftcheck.findings import Evidence, Finding, Fix
from driftcheck.host.api import Found, HostAPI
from driftcheck.host.facts import attributes_set_on_arguments
from driftcheck.host.relocation import NewHome, find_new_home
from driftcheck.kinds import FixSafety, Kind, Severity, Witness

ATTRIBUTE_MISSING = CheckId(
    Kind.ATTRIBUTE_MISSING.value,
    Kind.ATTRIBUTE_MISSING,
    Severity.ERROR,
    Witness.MEMBER,
    fixes=(FixSafety.SAFE, FixSafety.MANUAL),
    codemods=("rename-attribute",),
)
#: What this check reports; :mod:`driftcheck.checks.catalog` lists it.
CHECK = Check(__name__, (ATTRIBUTE_MISSING,))


def check(use: Use, ctx: CheckContext) -> list[Finding]:
    """Report ``recv.member`` where ``member`` existed on the receiver's class at baseline only."""
    if not (use.receiver and use.member) or use.kind not in ("attribute", "call"):
        return []
    if ctx.lookup(ctx.target, use) is not None or python_gives(ctx.target, use):
        return []
    if helper_sets(ctx, ctx.target, use):
        return []  # ``helper(obj)`` sets ``obj.x`` on the target
    if _held_by_a_moved_class(ctx, use):
        return []
    if any(
        name == use.member and holds and same_expression(expr, use.receiver_expr or "")
        for expr, name, holds in use.guards
    ):
        return []  # ``if hasattr(x, "m"): x.m`` runs only where the member is there
    base = ctx.lookup(ctx.baseline, use) if ctx.baseline else None
    stopped = (
        helper_sets(ctx, ctx.baseline, use) if ctx.baseline is not None and base is None else []
    )
    if ctx.baseline is not None and not isinstance(base, Found) and not stopped:
        return []
    if not ctx.once(use.file, f"{use.receiver}.{use.member}@{use.line}"):
        return []
    own = ""
    if use.stored_own:
        own_class, where = use.stored_own.split(" ", 1)
        own = (
            f" (the client stores its own {own_class}, a subclass that sets {use.member}, "
            f"in .{(use.receiver_expr or '').rpartition('.')[2]} at {where}: read from there, "
            "the object may be the client's)"
        )
    evidence = [ctx.evidence(ctx.baseline, base)] if ctx.baseline else []
    if stopped:
        evidence = [
            Evidence(ctx.base.version, file, line, f"{helper} sets {use.member}")
            for helper, file, line in stopped
        ]
    cls = ctx.target.resolve(use.receiver)
    if isinstance(cls, Found):
        evidence.append(ctx.evidence(ctx.target, cls, note=f"class without {use.member}"))
    short = use.receiver.rsplit(".", 1)[-1]
    via = f" ({use.via})" if use.via else ""
    before = warned_before(ctx.baseline, base)
    told = quoted(ctx.baseline.version, before) if ctx.baseline is not None else ""
    if stopped:
        helpers = ", ".join(sorted({h for h, _, _ in stopped}))
        told += (
            f"; in {ctx.base.version} {helpers}(...), which this file calls on it, set it, "
            f"and in {ctx.target.version} it no longer does"
        )
    return [
        finding(
            use,
            ATTRIBUTE_MISSING,
            symbol=f"{use.receiver}.{use.member}",
            message=(
                f"{use.receiver_expr or short}.{use.member}: {short} has no attribute "
                f"{use.member!r} in {ctx.target.name} {ctx.target.version}{via}{told}{own}"
            ),
            severity=Severity.INFO if own else None,
            evidence=tuple(e for e in evidence if e),
            fix=_fix(ctx, use, base, cls, short, before)
            if not stopped
            else Fix(
                FixSafety.MANUAL,
                f"set {use.member} yourself, or read it from where {ctx.target.version} keeps it",
            ),
        )
    ]


def _held_by_a_moved_class(ctx: CheckContext, use: Use) -> bool:
    """``a.b.member`` where the receiver's class was read off ``A.b`` of a host class ``A``
    that moved on the target (pydantic 2 moved ``ModelField`` to ``pydantic.v1``), and ``b`` of
    ``A``'s new home holds a class with ``member`` (v1's ``FieldInfo``, not 2.x's): read
    through the class where it lives now, the member is there; ``A``'s move is the finding.
    A class gone with no new home proves nothing (what ``b`` held is judged as read)."""
    if not use.holder or ctx.baseline is None or not use.member:
        return False
    owner, attr = use.holder.rsplit(".", 1)
    if isinstance(ctx.target.resolve(owner), Found):
        return False
    home = find_new_home(ctx.target, owner, baseline=ctx.baseline)
    if not isinstance(home, NewHome):
        return False
    return isinstance(ctx.target.resolve(f"{home.found.path}.{attr}.{use.member}"), Found)


#: The attributes ``object`` gives every instance and class (``dir(object)``, Python 3.9-3.13).
OBJECT_ATTRIBUTES = frozenset(
    "__class__ __delattr__ __dir__ __doc__ __eq__ __format__ __ge__ __getattribute__ "
    "__getstate__ __gt__ __hash__ __init__ __init_subclass__ __le__ __lt__ __ne__ __new__ "
    "__reduce__ __reduce_ex__ __repr__ __setattr__ __sizeof__ __str__ __subclasshook__".split()
)
#: What an instance has unless ``__slots__`` leaves it out, all the way up its MRO.
_SLOT_ATTRIBUTES = ("__dict__", "__weakref__")


def python_gives(api: HostAPI, use: Use) -> bool:
    """Whether Python gives ``use.member`` to every instance of the receiver's class, whatever
    the host defines: ``object``'s attributes, and ``__dict__``/``__weakref__`` where some
    class of the MRO has no ``__slots__`` or names the attribute in it."""
    if use.member in OBJECT_ATTRIBUTES:
        return True
    if use.member not in _SLOT_ATTRIBUTES or not use.receiver:
        return False
    cls = api.resolve(use.receiver)
    if not isinstance(cls, Found):
        return False
    chain, complete = api.mro(cls)
    for klass in chain:
        slots = klass.obj.members.get("__slots__") if isinstance(klass.obj, griffe.Class) else None
        if slots is None:
            return True  # a class without ``__slots__`` gives its instances both
        value = str(getattr(slots, "value", "") or "")
        if f"'{use.member}'" in value or f'"{use.member}"' in value:
            return True
    return not complete  # a base outside the host, unread, may give it


def helper_sets(ctx: CheckContext, api: HostAPI | None, use: Use) -> list[tuple[str, str, int]]:
    """The host functions this file calls with an object of the receiver's class (or a
    subclass of it) that set ``use.member`` on it, as (function, file, line)."""
    if api is None or not use.receiver or not use.member:
        return []
    memo: dict[tuple, list] = ctx.__dict__.setdefault("_helper_sets", {})
    key = (api.name, api.version, use.file, use.receiver)
    if key not in memo:  # once per file and class: a file's calls were read for each use of it
        memo[key] = _helpers_setting(ctx, api, use)
    return [(symbol, file, line) for attr, symbol, file, line in memo[key] if attr == use.member]


def _helpers_setting(ctx: CheckContext, api: HostAPI, use: Use) -> list[tuple[str, str, str, int]]:
    """Every attribute the host functions this file calls with an object of the receiver's
    class set on it, as (attribute, function, file, line)."""
    out: list[tuple[str, str, str, int]] = []
    for call in ctx.uses_in(use.file):
        if call.kind != "call" or not call.arg_classes:
            continue
        slots = [i for i, cls in enumerate(call.arg_classes) if cls and _same_class(api, cls, use)]
        if not slots:
            continue
        func = api.resolve(call.symbol)
        if not isinstance(func, Found) or func.kind != "function":
            continue
        sets = attributes_set_on_arguments(api, func)
        method = isinstance(func.obj.parent, griffe.Class) and "staticmethod" not in func.obj.labels
        shift = 1 if method else 0  # ``Cls.helper(obj)``: ``obj`` binds the second parameter
        for i in slots:
            for attr, line in sets.get(i + shift, []):
                out.append((attr, call.symbol, func.file, line))
    return out


def _same_class(api: HostAPI, cls: str, use: Use) -> bool:
    """Is an argument of class ``cls`` an instance of the use's receiver class?"""
    if cls == use.receiver:
        return True
    got = api.resolve(cls)
    if not isinstance(got, Found):
        return False
    return any(k.path == use.receiver for k in api.mro(got)[0])


def _fix(ctx: CheckContext, use: Use, base: object, cls: object, short: str, before: str) -> Fix:
    new = (
        _renamed(ctx, use, base, cls)
        if isinstance(base, Found) and isinstance(cls, Found)
        else None
    )
    if new is not None:
        return Fix(
            FixSafety.SAFE,
            f"call {new}() instead: {short}.{new} has {use.member}'s parameters and body",
            "rename-attribute",
            (("new", new), ("old", use.member or "")),
        )
    return Fix(
        FixSafety.MANUAL,
        before[:200] or f"{short}.{use.member} was removed or renamed; use its replacement",
    )


def _renamed(ctx: CheckContext, use: Use, base: Found, cls: Found) -> str | None:
    """The one method of the target class, absent from the baseline class, whose parameters
    and body are the baseline method's (None: no such method, or more than one)."""
    old, then = ctx.baseline, ctx.baseline.resolve(use.receiver or "") if ctx.baseline else None
    if old is None or not isinstance(then, Found) or not isinstance(base.obj, griffe.Function):
        return None
    want = _shape(old, base)
    if want is None:
        return None
    api, names = ctx.target, []
    for klass in api.mro(cls)[0]:
        for name, member in klass.obj.members.items():
            if name in names or name.startswith("__") or getattr(member, "is_alias", False):
                continue
            if not isinstance(member, griffe.Function) or old.defined_in_host_mro(then, name):
                continue
            got = api.defined_in_host_mro(cls, name)
            if got is not None and _shape(api, got) == want:
                names.append(name)
    return names[0] if len(names) == 1 else None


def _shape(api: HostAPI, func: Found) -> str | None:
    """A method's parameters and body without its name and docstring, as text."""
    node = api.def_node(func)
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return None
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return ast.dump(node.args) + "".join(ast.dump(stmt) for stmt in body)
