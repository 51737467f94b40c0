"""The names a host looks up by string on the classes it is given: hooks and magic attributes.

A host that reads ``getattr(tp, "__get_validators__", None)``, ``hasattr(tp,
"__modify_schema__")``, ``namespace.get("__root__")`` or ``"__root__" in namespace`` gives a
client class's ``__x__`` declaration a meaning; what it does with one, release by release, is read
from the statements around the lookup: a ``raise`` or a ``warn(...)`` in the ``if`` that tests
the name (or after ``v = getattr(...)`` in the same block) rejects or warns about it, with the
host's own message. A name a module constant holds (``ROOT_KEY = "__root__"``) counts as the
literal. Only dunder names that are not Python's own data model are kept: those are the host's.
Read per name asked (the names a client's classes declare), never for every hook of a release.
"""

from __future__ import annotations

import ast
import builtins
import re
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from typing import Literal

from driftcheck.host.api import HostAPI
from driftcheck.host.walk import gc_paused, walk

#: What a host does with a name it reads: reads it (a hook it calls, an attribute it uses),
#: warns about it, or rejects it (raises).
Treatment = Literal["reads", "warns", "rejects"]


def _python_names() -> frozenset[str]:
    """Dunder names Python itself gives a meaning to (never a host's own hook)."""
    names: set[str] = set()
    for value in vars(builtins).values():
        if isinstance(value, type):
            names.update(n for n in dir(value) if n.startswith("__"))
    names.update(
        "__slots__ __annotations__ __match_args__ __set_name__ __class_getitem__ __get__ "
        "__set__ __delete__ __enter__ __exit__ __aenter__ __aexit__ __await__ __aiter__ "
        "__anext__ __fspath__ __post_init__ __all__ __version__ __copy__ __deepcopy__ "
        "__getstate__ __setstate__ __reduce__ __reduce_ex__ __length_hint__ __missing__ "
        "__index__ __call__ __module__ __qualname__ __name__ __dict__ __weakref__ __doc__ "
        "__file__ __path__ __wrapped__ __func__ __self__ __mro__ __bases__ __origin__ "
        "__args__ __parameters__ __orig_bases__ __abstractmethods__ __getattr__ "
        "__init_subclass__ __new__ __init__ __del__ __bytes__ __format__ __buffer__ "
        "__release_buffer__ __dataclass_fields__ __dataclass_params__ __signature__ "
        "__text_signature__ __closure__ __code__ __defaults__ __kwdefaults__ __globals__ "
        "__builtins__ __loader__ __spec__ __package__ __cached__ __type_params__ "
        "__total__ __required_keys__ __optional_keys__ __protocol_attrs__ __final__".split()
    )
    return frozenset(names)


#: Names of Python's data model (``dir`` of the builtin types, and the protocols' own).
PYTHON_NAMES = _python_names()

_DUNDER = re.compile(r"^__[A-Za-z]\w*[A-Za-z0-9]__$")
_CONSTANT = re.compile(r"""^([A-Z_][A-Z0-9_]*)\s*(?::\s*\w+\s*)?=\s*['"](__\w+__)['"]\s*$""", re.M)


def is_host_hook(name: str) -> bool:
    """Whether ``name`` is a dunder a host, not Python, would give a meaning to."""
    return bool(_DUNDER.match(name)) and name not in PYTHON_NAMES


@dataclass(frozen=True)
class Treat:
    """One place where a host release looks a name up, and what it does there.

    Attributes:
        name: The name looked up (``__get_validators__``).
        treatment: reads, warns or rejects.
        file: The host file of the statement that warns or raises (of the lookup, for reads).
        line: Its line.
        message: The host's message (warns, rejects), the lookup's text for reads.
        conditional: The warning or raise sits under a further condition of its own.
        under: Other hook names the ``if`` statements around the lookup test: the host takes
            this path only for a class without them (``if get_schema is None:``).
    """

    name: str
    treatment: Treatment
    file: str
    line: int
    message: str = ""
    conditional: bool = False
    under: tuple[str, ...] = ()


#: The format of the per-name facts (``class-hooks:FORMAT:NAME``).
FORMAT = 1


def class_hooks(api: HostAPI, names: Iterable[str]) -> dict[str, list[Treat]]:
    """What the release does at each place it looks one of ``names`` up by string: name -> its
    treats; ``[]`` for a name it never looks up, and for one that is no host hook
    (:func:`is_host_hook`).

    Mined per name, each kept in the snapshot as its own fact: a treat of a name sits in a
    file that spells it as a literal or names a module constant holding it, so only those
    files are parsed, once for all the names not yet known. (A pass over every hook the
    release looks up parsed 127 of torch 2.10.0's files, 3.4 s, for the one name
    transformers declares.)
    """
    asked = sorted({n for n in names if is_host_hook(n)})
    built: dict[str, list[Treat]] = api.__dict__.setdefault("_class_hooks", {})
    missing = [n for n in asked if n not in built]
    if missing:
        kept = getattr(api.tree, "data", {}).get("facts", None) or {}
        cache = api.__dict__.get("_facts", {})
        unknown = [n for n in missing if _key(n) not in kept and _key(n) not in cache]
        mined = _mine(api, unknown) if unknown else {}
        for n in missing:
            rows = api.fact(_key(n), partial(list, mined.get(n, [])))
            built[n] = [Treat(r[0], r[1], r[2], r[3], r[4], bool(r[5]), tuple(r[6])) for r in rows]
    return {n: built.get(n, []) for n in names}


def _key(name: str) -> str:
    return f"class-hooks:{FORMAT}:{name}"


def _constants(api: HostAPI) -> dict[str, str]:
    """The release's module constants that hold one hook name (``ROOT_KEY = "__root__"``),
    constant -> name; one whose name differs between modules stands for none. A text pass
    over every file, kept in the snapshot."""

    def compute() -> dict[str, str]:
        found: dict[str, set[str]] = {}
        for text in api.source_texts().values():
            if "__" not in text:
                continue
            for m in _CONSTANT.finditer(text):
                if is_host_hook(m.group(2)):
                    found.setdefault(m.group(1), set()).add(m.group(2))
        return {k: next(iter(v)) for k, v in sorted(found.items()) if len(v) == 1}

    return dict(api.fact("hook-constants:1", compute))


@gc_paused()
def _mine(api: HostAPI, names: list[str]) -> dict[str, list[list]]:
    """The treats of each of ``names`` as rows, in file order: one pass over the host's files
    as text, parsing only a file that quotes one of them or names a constant holding one (the
    whole file: what the ``if`` around a lookup tests may be another hook's name)."""
    constants = _constants(api)
    wanted = set(names)
    spelt = [q + n + q for n in names for q in "\"'"]
    standing = [k for k, v in constants.items() if v in wanted]
    rows: dict[str, list[list]] = {n: [] for n in names}
    for rel, text in api.source_texts().items():
        if not any(s in text for s in spelt) and not any(k in text for k in standing):
            continue
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        for t in _treats(tree, rel, constants):
            if t.name in wanted:
                rows[t.name].append(
                    [t.name, t.treatment, t.file, t.line, t.message, t.conditional, list(t.under)]
                )
    return rows


def _name_of(node: ast.expr, constants: dict[str, str]) -> str | None:
    """The hook name a string argument holds (a literal or a module constant)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value if is_host_hook(node.value) else None
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    return None


def _lookups(expr: ast.AST, constants: dict[str, str]) -> set[str]:
    """Names an expression looks up by string: ``getattr(x, N)``, ``hasattr(x, N)``,
    ``x.get(N)``, ``N in x``, ``x[N]``."""
    found: set[str] = set()
    for node in ast.walk(expr):
        key: ast.expr | None = None
        if isinstance(node, ast.Call) and node.args:
            fn = node.func
            if isinstance(fn, ast.Name) and fn.id in ("getattr", "hasattr") and len(node.args) > 1:
                key = node.args[1]
            elif isinstance(fn, ast.Attribute) and fn.attr in ("get", "pop", "setdefault"):
                key = node.args[0]
        elif isinstance(node, ast.Compare) and any(
            isinstance(op, ast.In | ast.NotIn) for op in node.ops
        ):
            key = node.left
        elif isinstance(node, ast.Subscript):
            key = node.slice
        if key is not None and (name := _name_of(key, constants)) is not None:
            found.add(name)
    return found


def _verdict(stmt: ast.stmt) -> tuple[Treatment, str, int] | None:
    """A statement that raises or warns: what it does, its message, its line."""
    if isinstance(stmt, ast.Raise) and stmt.exc is not None:
        exc = stmt.exc
        message = _text(exc.args[0]) if isinstance(exc, ast.Call) and exc.args else ""
        return "rejects", message or ast.unparse(exc), stmt.lineno
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        fn = stmt.value.func
        name = (
            fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else ""
        )
        if name == "warn" and stmt.value.args:
            return "warns", _text(stmt.value.args[0]), stmt.lineno
    return None


def _text(node: ast.expr) -> str:
    """A message's text: its literal parts, an f-string's holes left as ``{...}``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            str(v.value) if isinstance(v, ast.Constant) else "{" + ast.unparse(v.value) + "}"  # type: ignore[attr-defined]  # FormattedValue
            for v in node.values
        )
    return ast.unparse(node)


def _first_verdict(body: list[ast.stmt]) -> tuple[Treatment, str, int, bool] | None:
    """The first raise or warning a block runs: at its top level (unconditional) or nested in
    its compound statements (conditional); a nested function's body is not the block's."""
    for stmt in body:
        if (v := _verdict(stmt)) is not None:
            return (*v, False)
        if isinstance(stmt, ast.Return):
            return None
    for stmt in body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        for node in ast.walk(stmt):
            if isinstance(node, ast.stmt) and (v := _verdict(node)) is not None:
                return (*v, True)
    return None


def _key_lines(tree: ast.Module, constants: dict[str, str]) -> list[int]:
    """The lines of every node that :func:`_name_of` reads a hook name from (a hook's literal,
    a constant holding one), sorted: an expression none of them falls in looks none up."""
    return sorted(
        {
            node.lineno
            for node in walk(tree)
            if (
                type(node) is ast.Constant
                and isinstance(node.value, str)
                and is_host_hook(node.value)
            )
            or (type(node) is ast.Name and node.id in constants)
        }
    )


def _treats(tree: ast.Module, file: str, constants: dict[str, str]) -> list[Treat]:
    """What the module's statements do with each hook name they look up."""
    out: list[Treat] = []
    seen: set[tuple[str, int]] = set()
    keys = _key_lines(tree, constants)

    def lookups(node: ast.AST) -> set[str]:
        """:func:`_lookups` of a statement or expression, walked only where some line it spans
        holds a hook's name (most of a module's statements hold none)."""
        at = bisect_left(keys, node.lineno)  # type: ignore[attr-defined]
        end = node.end_lineno or node.lineno  # type: ignore[attr-defined]
        if at == len(keys) or keys[at] > end:
            return set()
        return _lookups(node, constants)

    def block(body: list[ast.stmt], bound: dict[str, str], under: frozenset[str]) -> None:
        bound = dict(bound)
        for i, stmt in enumerate(body):
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                block(stmt.body, {}, frozenset())
                continue
            if isinstance(stmt, ast.If | ast.While):
                names = lookups(stmt.test)
                if bound:
                    names |= {
                        bound[n.id]
                        for n in ast.walk(stmt.test)
                        if isinstance(n, ast.Name) and n.id in bound
                    }
                for name in sorted(names):
                    if (v := _first_verdict(stmt.body)) is not None:
                        add(name, v, under)
                    else:
                        add(name, ("reads", ast.unparse(stmt.test), stmt.lineno, False), under)
                block(stmt.body, bound, under | names)
                block(stmt.orelse, bound, under | names)
                continue
            if isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None:
                names = lookups(stmt.value)
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for name in sorted(names):
                    for t in targets:
                        if isinstance(t, ast.Name):
                            bound[t.id] = name
                    if (v := _first_verdict(body[i + 1 :])) is not None and not v[3]:
                        add(name, v, under)
                    else:
                        add(name, ("reads", ast.unparse(stmt.value), stmt.lineno, False), under)
                continue
            for name in sorted(lookups(stmt)):
                add(name, ("reads", ast.unparse(stmt)[:120], stmt.lineno, False), under)
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(stmt, field, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    block(inner, bound, under)
            for handler in getattr(stmt, "handlers", []):
                block(handler.body, bound, under)

    def add(name: str, v: tuple[Treatment, str, int, bool], under: frozenset[str]) -> None:
        if (name, v[2]) in seen:
            return
        seen.add((name, v[2]))
        out.append(Treat(name, v[0], file, v[2], v[1], v[3], tuple(sorted(under - {name}))))

    block(tree.body, {}, frozenset())
    return out
