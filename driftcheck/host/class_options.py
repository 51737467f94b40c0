"""The options a host reads from an inner class of a client class (Django's ``class Meta``,
pydantic's ``class Config``), release by release, read from the host's source.

A host that looks an inner class up by name (``attrs.pop("Meta", None)``, ``namespace.get(
"Config")``, ``getattr(cls, "Meta", None)``) reads its options in that module or in a host module
it imports. There, a module constant that holds option names (a tuple, list or set of
identifiers, or a dict of identifier to identifier) is an option table, and what the host does
with it is read from the functions that use it:

* ``for name in TABLE:`` followed, in the same function, by a ``raise`` (Django's "'class Meta'
  got invalid attribute(s)") *accepts* the table's names and rejects every other one; without a
  raise it accepts them and ignores the rest.
* a table tested for membership (``TABLE & config.keys()``, ``name in TABLE``, ``TABLE[name]``)
  in a function that warns or raises *flags* its names (pydantic 2's ``V2_RENAMED_KEYS``); a
  dict's value is the host's own replacement.

An accepted option the module tests as an attribute (``if self.index_together:``) with a warning
or a raise in the ``if`` is flagged on its own, with the host's message.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Literal

from driftcheck.host.api import HostAPI
from driftcheck.host.class_hooks import _first_verdict, _text

#: What a table does: accepts its names (and does ``treatment`` to every other one), or flags
#: them (does ``treatment`` to each).
Role = Literal["accepts", "flags"]
#: What the host does: reads (accepts silently), warns, rejects (raises).
OptionTreatment = Literal["reads", "warns", "rejects"]

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: A module-level constant that may hold a collection of strings (the text filter before parsing).
_COLLECTION = re.compile(
    r"""^[A-Za-z_]\w*\s*(?::[^=\n]+)?=\s*(?:frozenset|set|tuple|list)?\(?[\(\[\{]\s*['"]""", re.M
)
#: A lookup of an inner class by a capitalised name (``.get("Meta")``, ``getattr(x, "Config"``).
INNER_LOOKUP = re.compile(
    r"""(?:\.(?:get|pop)\(\s*|getattr\([^,()]+,\s*)['"]([A-Z][A-Za-z0-9]*)['"]"""
)


@dataclass(frozen=True)
class OptionTable:
    """One host constant of option names and what the host does with it.

    Attributes:
        name: The constant's name (``DEFAULT_NAMES``): a table is the same table on two
            releases when its name is.
        file: The host file that binds it.
        line: Its line.
        inner: The inner class names the host looks up where it reads the table (``Meta``).
        names: The option names it holds.
        renames: For a dict of names: each name's replacement.
        role: accepts or flags.
        treatment: What the host does to the names outside (accepts) or inside (flags) it.
        message: The host's message, where it raises or warns.
        at: The line of the raise or the warning (0: none).
    """

    name: str
    file: str
    line: int
    inner: tuple[str, ...]
    names: tuple[str, ...]
    renames: tuple[tuple[str, str], ...]
    role: Role
    treatment: OptionTreatment
    message: str = ""
    at: int = 0


@dataclass(frozen=True)
class OptionNote:
    """An accepted option the host tests as an attribute and warns about or rejects."""

    option: str
    file: str
    inner: tuple[str, ...]
    treatment: OptionTreatment
    message: str
    at: int


def option_tables(api: HostAPI) -> tuple[list[OptionTable], list[OptionNote]]:
    """Every option table of the release and the options it warns about one by one (one pass
    over the host, kept in the snapshot)."""

    def compute() -> list[list]:
        texts = api.source_texts()
        inner: dict[str, set[str]] = {}
        for rel, text in texts.items():
            found = set(INNER_LOOKUP.findall(text))
            if found:
                for linked in (rel, *_imported_files(text, rel, texts)):
                    inner.setdefault(linked, set()).update(found)
        rows: list[list] = []
        for rel in sorted(inner):
            text = texts[rel]
            if not _COLLECTION.search(text):
                continue  # no module constant of names: no table to read
            tree = _parse(text)
            if tree is None:
                continue
            where = sorted(inner[rel])
            tables = _tables(tree, rel, where)
            rows += [["table", *_table_row(t)] for t in tables]
            accepted = {n for t in tables if t.role == "accepts" for n in t.names}
            if accepted:
                rows += [
                    ["note", n.option, n.file, list(n.inner), n.treatment, n.message, n.at]
                    for n in _notes(tree, rel, where, accepted)
                ]
        return rows

    tables: list[OptionTable] = []
    notes: list[OptionNote] = []
    for r in api.fact("class_options", compute):
        if r[0] == "table":
            tables.append(
                OptionTable(
                    r[1],
                    r[2],
                    r[3],
                    tuple(r[4]),
                    tuple(r[5]),
                    tuple((a, b) for a, b in r[6]),
                    r[7],
                    r[8],
                    r[9],
                    r[10],
                )  # fmt: skip
            )
        else:
            notes.append(OptionNote(r[1], r[2], tuple(r[3]), r[4], r[5], r[6]))
    return tables, notes


def _table_row(t: OptionTable) -> list:
    return [
        t.name, t.file, t.line, list(t.inner), list(t.names),
        [list(p) for p in t.renames], t.role, t.treatment, t.message, t.at,
    ]  # fmt: skip


def _parse(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


_FROM = re.compile(r"^[ \t]*from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)", re.M)
_IMPORT = re.compile(r"^[ \t]*import[ \t]+([\w.]+(?:[ \t]*,[ \t]*[\w.]+)*)", re.M)


def _imported_files(text: str, rel: str, texts: object) -> list[str]:
    """The host files a module imports from (absolute or relative imports of the host), read
    from its text: the first pass over a host's files parses none of them."""
    package = rel.split("/")[:-1]
    modules: list[list[str]] = []
    for m in _FROM.finditer(text):
        dots, module, names = len(m.group(1)), m.group(2), m.group(3)
        if dots and dots - 1 > len(package):
            continue
        base = package[: len(package) - dots + 1] if dots else []
        mod = [*base, *(module.split(".") if module else [])]
        modules.append(mod)
        for part in names.strip("()").split(","):
            name = part.split("#")[0].split(" as ")[0].strip(" \t\n\\")
            if name.isidentifier():
                modules.append([*mod, name])
    for m in _IMPORT.finditer(text):
        modules += [p.strip().split(".") for p in m.group(1).split(",")]
    out: list[str] = []
    for parts in modules:
        for cand in ("/".join(parts) + ".py", "/".join(parts) + "/__init__.py"):
            if cand != rel and cand in texts and cand not in out:  # type: ignore[operator]  # a Mapping of texts
                out.append(cand)
    return out


def _identifiers(node: ast.expr) -> tuple[list[str], list[tuple[str, str]]] | None:
    """The names a collection literal holds (and a dict's renames), or None if it is not one of
    at least two identifiers."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) == 1:
        if node.func.id in ("frozenset", "set", "tuple", "list"):
            node = node.args[0]
    renames: list[tuple[str, str]] = []
    if isinstance(node, ast.Dict):
        keys: list[str] = []
        for k, v in zip(node.keys, node.values, strict=True):
            if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
                return None
            keys.append(k.value)
            if isinstance(v, ast.Constant) and isinstance(v.value, str) and _IDENT.match(v.value):
                renames.append((k.value, v.value))
        elts: list[str] = keys
    elif isinstance(node, ast.Tuple | ast.List | ast.Set):
        if not all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
            return None
        elts = [e.value for e in node.elts]  # type: ignore[attr-defined]  # Constants, tested above
    else:
        return None
    if len(elts) < 2 or not all(_IDENT.match(e) for e in elts):
        return None
    return elts, renames


def _loads_by_function(
    tree: ast.Module, names: set[str]
) -> dict[ast.FunctionDef | ast.AsyncFunctionDef, set[str]]:
    """For each function, which of ``names`` it reads (its nested functions' reads included),
    in one pass over the module."""
    out: dict[ast.FunctionDef | ast.AsyncFunctionDef, set[str]] = {}

    def visit(node: ast.AST, stack: tuple[ast.FunctionDef | ast.AsyncFunctionDef, ...]) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            stack = (*stack, node)
            out.setdefault(node, set())
        elif isinstance(node, ast.Name) and node.id in names:
            for fn in stack:
                out[fn].add(node.id)
        for child in ast.iter_child_nodes(node):
            visit(child, stack)

    visit(tree, ())
    return out


def _tables(tree: ast.Module, rel: str, inner: list[str]) -> list[OptionTable]:
    """The module's option tables: constants of identifiers a function of it iterates or tests."""
    constants: dict[str, tuple[int, list[str], list[tuple[str, str]]]] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            target, value = stmt.target, stmt.value
        else:
            continue
        if isinstance(target, ast.Name) and (held := _identifiers(value)) is not None:
            constants[target.id] = (stmt.lineno, *held)
    out: list[OptionTable] = []
    if not constants:
        return out
    loads = _loads_by_function(tree, set(constants))
    for name, (line, names, renames) in constants.items():
        role: Role | None = None
        treatment: OptionTreatment = "reads"
        message, at = "", 0
        for fn in (f for f, used in loads.items() if name in used):
            iterated, tested = _uses(fn, name)
            if iterated is not None:
                role = "accepts"
                after = _raise_after(fn, iterated)
                if after is not None:
                    treatment, message, at = "rejects", after[0], after[1]
                    break
            elif tested and (v := _flag_verdict(fn, name)) is not None:
                role, treatment, message, at = "flags", v[0], _message(fn, v), v[2]
                break
        if role is None or (role == "flags" and treatment == "reads"):
            continue
        out.append(
            OptionTable(
                name,
                rel,
                line,
                tuple(inner),
                tuple(names),
                tuple(renames),
                role,
                treatment,
                message,
                at,
            )  # fmt: skip
        )
    return out


def _uses(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> tuple[ast.For | None, bool]:
    """The ``for`` that iterates the constant in a function, and whether it reads it else."""
    loop: ast.For | None = None
    tested = False
    for node in ast.walk(fn):
        if isinstance(node, ast.For) and isinstance(node.iter, ast.Name) and node.iter.id == name:
            loop = loop or node
        elif isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load):
            tested = True
    return loop, tested and loop is None


def _member_test(node: ast.AST, name: str) -> bool:
    """Whether an expression picks the table's members: ``k in T``, ``T & x`` (``T.keys() &
    x``), ``T[k]``, ``T.get(k)``; a subset test (``set(x).issubset(T)``) is about the others."""

    def table(e: ast.AST) -> bool:
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and not e.args:
            e = e.func.value  # T.keys()
        return isinstance(e, ast.Name) and e.id == name

    for n in ast.walk(node):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.BitAnd):
            if table(n.left) or table(n.right):
                return True
        elif isinstance(n, ast.Compare) and isinstance(n.ops[0], ast.In):
            if table(n.comparators[0]):
                return True
        elif isinstance(n, ast.Subscript) and table(n.value):
            return True
        elif (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "get"
            and table(n.func.value)
        ):
            return True
    return False


def _flag_verdict(
    fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str
) -> tuple[OptionTreatment, str, int, bool] | None:
    """The warning or raise a function runs for the table's members: in the ``if`` that picks
    them, or in an ``if`` on a name bound to the members picked (``removed = T & keys``)."""
    bound: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and _member_test(node.value, name):
            bound |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    for node in ast.walk(fn):
        if not isinstance(node, ast.If):
            continue
        picks = _member_test(node.test, name) or any(
            isinstance(n, ast.Name) and n.id in bound for n in ast.walk(node.test)
        )
        if picks and (v := _first_verdict(node.body)) is not None:
            return v
    return None


def _raise_after(
    fn: ast.FunctionDef | ast.AsyncFunctionDef, loop: ast.For
) -> tuple[str, int] | None:
    """The first ``raise`` a function has after the loop over a table (the leftovers' fate)."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Raise) and node.lineno > loop.end_lineno and node.exc is not None:  # type: ignore[operator]  # parsed nodes have end_lineno
            exc = node.exc
            arg = exc.args[0] if isinstance(exc, ast.Call) and exc.args else exc
            if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Mod):
                arg = arg.left
            return _text(arg), node.lineno
    return None


def _message(fn: ast.FunctionDef | ast.AsyncFunctionDef, v: tuple) -> str:
    """A warning's or a raise's message; a name bound in the function gives its literal parts
    (pydantic's ``message = '\\n'.join(['Valid config keys have changed in V2:'] + ...)``)."""
    text = v[1]
    if not _IDENT.match(text):
        return text
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == text for t in node.targets
        ):
            parts = [p for p in _literals(node.value) if len(p.strip()) > 3]
            if parts:
                return " ".join(parts)
    return text


def _literals(node: ast.AST) -> list[str]:
    """The string literals of an expression, outside its f-strings (their holes are the
    per-name parts of a message)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return []
    return [p for child in ast.iter_child_nodes(node) for p in _literals(child)]


def _notes(tree: ast.Module, rel: str, inner: list[str], accepted: set[str]) -> list[OptionNote]:
    """Accepted options the module tests for being set (``if self.index_together:``) and warns
    about or rejects in that ``if``."""
    out: list[OptionNote] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        # The option itself tested for being set; ``self.apps.models_ready`` is about its value.
        test = node.test
        if not (isinstance(test, ast.Attribute) and test.attr in accepted):
            continue
        if (v := _first_verdict(node.body)) is None:
            continue
        if v[0] == "rejects" and v[3]:
            continue  # a raise under a further condition is about the value, not the option
        out.append(OptionNote(test.attr, rel, tuple(inner), v[0], v[1], v[2]))
    return out
