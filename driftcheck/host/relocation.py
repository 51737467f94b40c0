"""Where a symbol went, only on the host's own evidence.

A new home is taken from, in order:

1. **the host's words**: a migration table or deprecation message that names the replacement
   (``"Use `np.float64` instead."``, ``"`pydantic:parse_obj_as` has been moved to ..."``);
2. **an alias chain**: the old name pointed at an object (a re-export, ``X = Y``) that the
   target still has under its canonical path;
3. **a definition of the same kind and a compatible signature** under the same name elsewhere
   (public modules before ``_private`` ones, the nearest to the old module first);
4. for a module that went whole, **a module new on the target that defines most of its names**
   (its top-level definitions, and for a package its submodules: vLLM's
   ``entrypoints.openai.tool_parsers`` became ``tool_parsers``). Only the host's words make it
   certain; the check offers it as an unsafe fix.

A same-named object of another kind or with an incompatible signature (Django's template tag
``url`` for the removed URL helper ``url``) is never a new home: :func:`find_new_home` returns
it as a :class:`Lookalike`, which the check names in its message without offering a fix.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import griffe

from driftcheck.host.api import Found, HostAPI
from driftcheck.host.objects import canonical
from driftcheck.host.signature import Signature

_DEF_RE = re.compile(r"^(?:class|def|async def)\s+(\w+)|^(\w+)\s*(?::[^=]+)?=", re.M)
# A replacement a message names: ``Use `np.float64` instead``, ``moved to `pydantic.X` ``.
_NAMED = re.compile(
    r"`([A-Za-z_][\w.:]*)(?:\(\))?`|\b(?:use|to|with|by|in favou?r of)\s+([A-Za-z_]\w*(?:[.:]\w+)+)(?:\(\))?"
)


@dataclass(frozen=True)
class NewHome:
    """A new home and the evidence for it."""

    found: Found
    #: "message", "alias", "definition", "changed" (same function, new parameters), or
    #: "contents" (a module new on the target that defines most of a removed module's names)
    evidence: str
    path: str = ""  # the public name to write (the host's own spelling), else found.path

    @property
    def name(self) -> str:
        """The dotted name a fix writes."""
        return self.path or self.found.path


@dataclass(frozen=True)
class Lookalike:
    """A same-named object that is not the new home, and why."""

    found: Found
    reason: str


def definitions(api: HostAPI) -> dict[str, list[str]]:
    """Top-level names defined in each host module (read as text once per release)."""

    def compute() -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for rel, text in api.source_texts().items():
            module = api.tree.module_name(rel)
            for m in _DEF_RE.finditer(text):
                out.setdefault(m.group(1) or m.group(2), []).append(module)
        return out

    return api.fact("definitions", compute)


def named_in(api: HostAPI, message: str, gone: str) -> tuple[str, Found] | None:
    """The host object a message names as the replacement of ``gone`` (None if it names none
    the target has)."""
    return next(iter(named_all(api, message, gone, first=True)), None)


def named_all(
    api: HostAPI, message: str, gone: str, first: bool = False
) -> list[tuple[str, Found]]:
    """Each distinct host object a message names as a replacement of ``gone``, in the order
    named (``Use `np.promote_types` or `np.result_type```: both); ``first``: stop at one."""
    out: list[tuple[str, Found]] = []
    for named in _named(api, message, gone):
        # A module and an object in it (``numpy._core.numeric`` and its
        # ``normalize_axis_tuple``) name one replacement, not two.
        if all(not _within(named[1].path, f.path) for _, f in out):
            out.append(named)
            if first:
                break
    return out


def _within(a: str, b: str) -> bool:
    """One of two dotted paths is the other or holds it."""
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def _named(api: HostAPI, message: str, gone: str) -> Iterator[tuple[str, Found]]:
    root = gone.split(".", 1)[0]
    for m in _NAMED.finditer(message or ""):
        text = (m.group(1) or m.group(2) or "").replace(":", ".").strip(".")
        if not text or text == gone or "." not in text and text == gone.rsplit(".", 1)[-1]:
            continue
        head, _, rest = text.partition(".")
        # The host's messages name it the way its users write it (``np.float64``).
        for cand in (text, f"{root}.{rest}" if rest else "", f"{root}.{text}"):
            if not cand or cand == gone or not api.owns(cand):
                continue
            got = api.resolve(cand)
            if isinstance(got, Found) and got.path != gone:
                yield cand, got
                break
        del head


def find_new_home(
    api: HostAPI,
    gone: str,
    baseline: HostAPI | None = None,
    message: str = "",
    private_ok: bool = True,
    reads: str = "",
) -> NewHome | Lookalike | None:
    """The target's new home for ``gone`` on the host's evidence (see the module doc).

    ``private_ok=False`` (the target's own words say it was removed, naming no replacement):
    a same-named definition left in a ``_private`` module is what the host keeps for itself
    (NumPy 2.0's ``numpy._core._type_aliases.sctypes`` after "`np.sctypes` was removed"), a
    :class:`Lookalike`, not a new home. ``reads``: what the client reads through ``gone``
    (``gone.Name``); a module's new home must have it."""
    if "." not in gone:
        return None
    old_module, name = gone.rsplit(".", 1)
    if not name or name.startswith("__"):
        return None
    named = named_in(api, message, gone)
    if named is not None:
        return NewHome(named[1], "message", named[0])
    before = baseline.resolve(gone) if baseline is not None else None
    if isinstance(before, Found) and baseline is not None:  # before is only found on a baseline
        if before.kind == "module":
            return module_home(api, baseline, gone, reads)
        if before.path != gone and api.owns(before.path):
            still = api.resolve(before.path)
            if isinstance(still, Found) and still.kind == before.kind:
                return NewHome(still, "alias")
    candidates = definitions(api).get(name, [])

    def order(module: str) -> tuple[bool, int, str]:
        a, b = module.split("."), old_module.split(".")
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        return (_private(module), -n, module)

    lookalike: Lookalike | None = None
    for module in sorted(candidates, key=order):
        found = api.resolve(f"{module}.{name}")
        if not isinstance(found, Found) or found.path == gone:
            continue
        if not private_ok and _private(module):
            lookalike = lookalike or Lookalike(
                found, "in a private module, and the host's message says it was removed"
            )
            continue
        if not isinstance(before, Found) or baseline is None:  # no before without a baseline
            if baseline is None:
                return NewHome(found, "definition")
            continue
        why = _unlike(baseline, before, api, found)
        if why is None:
            return NewHome(found, "definition")
        if why == _CHANGED:
            return NewHome(found, "changed")  # the same function moved, its parameters changed
        lookalike = lookalike or Lookalike(found, why)
    return lookalike


def module_home(api: HostAPI, baseline: HostAPI, gone: str, reads: str = "") -> NewHome | None:
    """The module new on the target that defines most of what module ``gone`` defined on the
    baseline (its top-level names, and a package's submodules), and defines (or holds in its
    package) the name the client reads through it (``reads``), if any. One such module, or
    none: a tie proposes nothing, nor does a module that only imports the name (vLLM 0.16.0's
    ``lora.model_manager`` imports ``LoRAModel`` from ``lora.lora_model``: a split)."""
    held = _contents(baseline, gone)
    if len(held) < 2:
        return None
    defined = definitions(api)
    before = _modules(baseline)
    last = gone.rsplit(".", 1)[-1]
    pool = {m for n in held for m in defined.get(n, ())}
    pool |= {m for m in _modules(api) if m.rsplit(".", 1)[-1] == last}
    scored = []
    for module in pool - before:
        if not api.owns(module) or module == gone:
            continue
        share = len(held & _contents(api, module))
        if share * 2 > len(held):
            scored.append((share, module))
    scored.sort(reverse=True)
    if not scored or len(scored) > 1 and scored[1][0] == scored[0][0]:
        return None
    module = scored[0][1]
    rest = reads[len(gone) :] if reads.startswith(gone + ".") else ""
    read = api.resolve(module + rest) if rest else None
    if rest and not (isinstance(read, Found) and read.path.startswith(module + ".")):
        return None  # not there, or only imported there: the module was split, not moved
    found = api.resolve(module)
    return NewHome(found, "contents") if isinstance(found, Found) else None


def _modules(api: HostAPI) -> set[str]:
    """The dotted names of the host's own modules (its file list: nothing is parsed)."""
    cached = api.__dict__.get("_module_names")
    if cached is None:
        names = (api.tree.module_name(rel) for rel in api.tree.python_files())
        cached = api.__dict__["_module_names"] = {m for m in names if api.owns(m)}
    return cached


def _contents(api: HostAPI, module: str) -> set[str]:
    """The public names module ``module`` defines at its top level, and, for a package, the
    last names of its submodules (read off the host's text definitions and file list)."""
    index = api.__dict__.get("_defined_in")
    if index is None:
        index = {}
        for name, modules in definitions(api).items():
            if not name.startswith("_"):
                for m in modules:
                    index.setdefault(m, set()).add(name)
        api.__dict__["_defined_in"] = index
    subs = {
        m.rsplit(".", 1)[-1]
        for m in _modules(api)
        if m.startswith(module + ".") and "." not in m[len(module) + 1 :]
    }
    return index.get(module, set()) | {s for s in subs if not s.startswith("_")}


def _private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split("."))


def _unlike(baseline: HostAPI, before: Found, api: HostAPI, after: Found) -> str | None:
    """Why ``after`` is not ``before`` moved (None when it is the same kind, compatible)."""
    if before.kind != after.kind:
        return f"{_a(after.kind)}, not {_a(before.kind)}"
    if before.kind == "function":
        old, new = baseline.signature(before), api.signature(after)
        if old is not None and new is not None and not _compatible(old, new):
            kept = {p.name for p in old.params} & {p.name for p in new.params}
            if old.params and len(kept) * 2 > len(old.params):
                return _CHANGED
            return "a function with other parameters"
    if before.kind == "class":
        old_bases = _moved_along(_bases(before.obj), before.path, after.path)
        new_bases = _bases(after.obj)
        if old_bases and new_bases and not old_bases & new_bases:
            return "a class with other bases"
        old_members = _public(before.obj)
        new_members = _public(after.obj)
        if old_members and len(old_members & new_members) * 2 < len(old_members):
            return "a class with other members"
        old, new = baseline.signature(before), api.signature(after)
        if old is not None and new is not None and not _compatible(old, new):
            return "a class built with other arguments"
    return None


_CHANGED = "changed"  # most of the parameters kept: moved, and changed on the way


def _a(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _bases(obj: griffe.Object) -> set[str]:
    """A class's bases by the paths they name (``BuiltinJSONField`` -> ``django.forms...``)."""
    out = set()
    for base in getattr(obj, "bases", []):
        try:
            out.add(canonical(base) or str(base))
        except Exception:  # griffe cannot follow an odd base: its text stands in
            out.add(str(base))
    return out


def _moved_along(bases: set[str], old: str, new: str) -> set[str]:
    """``bases`` as they read had they moved the way their class did: the class's path less the
    tail both paths share is the part that changed (``pkg.errors.E`` -> ``pkg.v1.errors.E``:
    ``pkg`` -> ``pkg.v1``), and a base under the old part is read under the new one
    (``pkg.errors.Base`` -> ``pkg.v1.errors.Base``). A hierarchy copied whole to a new package
    (pydantic 2's ``pydantic.v1``) is then the same class moved, not a lookalike."""
    a, b = old.split("."), new.split(".")
    n = 0
    while n < min(len(a), len(b)) - 1 and a[-1 - n] == b[-1 - n]:
        n += 1
    old_head, new_head = ".".join(a[: len(a) - n]), ".".join(b[: len(b) - n])
    if not n or not old_head or not new_head or old_head == new_head:
        return bases
    return {
        new_head + base[len(old_head) :] if base.startswith(old_head + ".") else base
        for base in bases
    }


def _public(obj: griffe.Object) -> set[str]:
    return {n for n in obj.members if not n.startswith("_")}


def _compatible(old: Signature, new: Signature) -> bool:
    """Every call the old signature accepted binds the same way on the new one."""
    old_params = [p for p in old.params if p.kind not in ("var_positional", "var_keyword")]
    new_params = {p.name: p for p in new.params}
    positional = [
        p.name for p in new.params if p.kind in ("positional_only", "positional_or_keyword")
    ]
    for i, p in enumerate(old_params):
        q = new_params.get(p.name)
        if q is None:
            if not new.accepts_var_keyword or p.kind == "positional_only":
                return False
            continue
        if p.kind in ("positional_only", "positional_or_keyword"):
            if i >= len(positional) or positional[i] != p.name:
                return False
    old_names = {p.name for p in old_params}
    return not any(q.required and q.name not in old_names for q in new.params)
