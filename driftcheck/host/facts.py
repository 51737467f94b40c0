"""Host facts: what signatures do not say, read from host function bodies and class bodies.

* :func:`guards_naming` — raise statements whose message names two methods ("b() must be
  called after a() returns None"): a call protocol the host enforces at run time.
* :func:`always_returns_none` — a function whose every ``return`` is ``None``.
* :func:`new_members` — members of a class that appeared between two versions (siblings that
  arrived in the same release as a protocol change).
* :func:`field_default` — a dataclass / pydantic config field's default, to compare versions.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass

from driftcheck.host.api import Found, HostAPI
from driftcheck.host.namespace import loop_variable
from driftcheck.host.signature import dataclass_fields


@dataclass(frozen=True)
class Guard:
    """A raise whose message names methods: where, and the message."""

    file: str
    line: int
    message: str
    methods: tuple[str, ...]
    cls: str = ""
    function: str = ""


_CALL_NAME = re.compile(r"\b([A-Za-z_]\w*)\(\)")


def _message_of(node: ast.Raise) -> str | None:
    exc = node.exc
    if isinstance(exc, ast.Call) and exc.args:
        parts: list[str] = []
        for piece in ast.walk(exc.args[0]):
            if isinstance(piece, ast.Constant) and isinstance(piece.value, str):
                parts.append(piece.value)
        return "".join(parts) or None
    return None


# A call named inside a string literal ("...sample_tokens() must be called").
_QUOTED_CALL = re.compile(r"[\"'][^\"'\n]*?[A-Za-z_]\w*\(\)")
# No leading ``\b``: it defeats the regex engine's literal-prefix search (30x slower on vLLM);
# the word boundary is checked by hand instead.
_RAISE = re.compile(r"raise\s+\w")
_WINDOW = 2000  # characters after "raise" in which a guard's two quoted calls must appear


def _two_in_one(window: str) -> bool:
    return any(line.count("()") >= 2 for line in window.splitlines()[:6])


def all_guards(api: HostAPI) -> list[Guard]:
    """Every raise-guard in the host naming two methods (one pass over the host, cached).

    Only ``raise`` statements whose text quotes two ``name()`` calls are parsed, each alone.
    """

    def compute() -> list[list]:
        found: list[Guard] = []
        for rel, text in api.source_texts().items():
            if "raise" in text and "()" in text:
                found.extend(guards_by_text(text, rel))
        return [[g.file, g.line, g.message, list(g.methods), g.cls, g.function] for g in found]

    rows = api.fact("guards", compute)
    return [Guard(r[0], r[1], r[2], tuple(r[3]), r[4], r[5]) for r in rows]


def guards_by_text(text: str, file: str) -> list[Guard]:
    """Raise-guards found without parsing the whole module (the statement alone is parsed)."""
    out: list[Guard] = []
    lines = text.splitlines()
    for m in _RAISE.finditer(text):
        if m.start() and (text[m.start() - 1].isalnum() or text[m.start() - 1] == "_"):
            continue
        if text.count("()", m.start(), m.start() + _WINDOW) < 2:
            continue  # cheap pre-filter: a statement naming two calls has two "()" nearby
        stmt = _statement(text, m.start())
        if len(_QUOTED_CALL.findall(stmt)) < 2 and not _two_in_one(stmt):
            continue
        try:
            node = ast.parse(stmt.strip()).body[0]
        except (SyntaxError, ValueError, IndexError):
            continue
        if not isinstance(node, ast.Raise):
            continue
        msg = _message_of(node)
        names = tuple(dict.fromkeys(_CALL_NAME.findall(msg or "")))
        if msg and len(names) >= 2:
            line = text.count("\n", 0, m.start()) + 1
            cls, func = _enclosing(lines, line)
            out.append(Guard(file, line, msg, names, cls, func))
    return out


def _statement(text: str, start: int) -> str:
    """From ``start`` to the end of the statement (brackets balanced, strings skipped)."""
    depth, i, quote = 0, start, ""
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "\n" and depth <= 0:
            break
        i += 1
    return text[start:i]


def _enclosing(lines: list[str], line: int) -> tuple[str, str]:
    """(class, function) enclosing a 1-based line, read from indentation."""
    here = lines[line - 1]
    indent = len(here) - len(here.lstrip())
    cls = func = ""
    for text in reversed(lines[: line - 1]):
        stripped = text.lstrip()
        width = len(text) - len(stripped)
        if not stripped or width >= indent:
            continue
        m = re.match(r"(?:async\s+)?def\s+(\w+)|class\s+(\w+)", stripped)
        if m:
            indent = width
            if m.group(1) and not func and not cls:
                func = m.group(1)
            elif m.group(2):
                cls = m.group(2)
                break
    return cls, func


def follow_up(guard: Guard, method: str) -> str | None:
    """The method a guard says must come after ``method`` ("b() must be called after a()")."""
    msg = guard.message
    for other in guard.methods:
        if other == method:
            continue
        i, j = msg.find(f"{other}()"), msg.find(f"{method}()")
        if i < 0 or j < 0:
            continue
        between = msg[min(i, j) : max(i, j)].lower()
        if i < j and "after" in between:
            return other
        if j < i and "before" in between:
            return other
    return None


def guards_naming(api: HostAPI, first: str, then: str) -> list[Guard]:
    """Guards whose message requires ``then()`` to follow ``first()``."""
    return [g for g in all_guards(api) if follow_up(g, first) == then]


def always_returns_none(node: ast.AST) -> bool:
    """True when a function body returns nothing but ``None`` (and returns at least once)."""
    returns = list(_own_returns(node))
    if not returns:
        return False
    return all(
        r.value is None or (isinstance(r.value, ast.Constant) and r.value.value is None)
        for r in returns
    )


def _own_returns(root: ast.AST) -> list[ast.Return]:
    """The ``return`` statements of ``root`` itself (not of functions nested in it)."""
    out: list[ast.Return] = []
    todo = list(ast.iter_child_nodes(root))
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Return):
            out.append(node)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        todo.extend(ast.iter_child_nodes(node))
    return out


def new_members(baseline: HostAPI, target: HostAPI, cls_path: str) -> set[str]:
    """Member names the class has (through its host MRO) in the target but not at baseline."""
    old = baseline.resolve(cls_path)
    new = target.resolve(cls_path)
    if not (isinstance(old, Found) and isinstance(new, Found)):
        return set()
    return _member_names(target, new) - _member_names(baseline, old)


def _member_names(api: HostAPI, cls: Found) -> set[str]:
    chain, _ = api.mro(cls)
    names: set[str] = set()
    for klass in chain:
        names.update(klass.obj.members)
    return names


def field_default(api: HostAPI, cls: Found, name: str) -> tuple[bool, str | None, int] | None:
    """(has default, default source, line) of a dataclass field through the MRO, or None."""
    chain, _ = api.mro(cls)
    for klass in chain:
        node = api.class_node(klass)
        if node is None:
            continue
        for param in dataclass_fields(node):
            if param.name == name:
                line = next(
                    (
                        s.lineno
                        for s in node.body
                        if isinstance(s, ast.AnnAssign)
                        and isinstance(s.target, ast.Name)
                        and s.target.id == name
                    ),
                    klass.line,
                )
                return param.has_default, param.default, line
    return None


def attributes_set_on_arguments(api: HostAPI, func: Found) -> dict[int, list[tuple[str, int]]]:
    """What a host function sets on the objects passed to it: positional parameter index ->
    ``(attribute, line)`` for ``param.x = …``, ``setattr(param, "x", …)`` and ``setattr`` in a
    loop over literal names or a module-level literal dict's keys (kept in the snapshot).

    A client that calls ``helper(obj)`` then reads ``obj.x`` reads what the helper set: the
    class alone does not say it has ``x``."""

    def compute() -> list[list]:
        node = api.def_node(func)
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return []
        text = api.module_text(func.obj.module.path) or ""
        tree = api._ast(func.obj.module.path, text)
        rows: list[list] = []
        for index, name, attr, line in _set_on_params(node, tree):
            rows.append([index, name, attr, line])
        return rows

    out: dict[int, list[tuple[str, int]]] = {}
    for index, _name, attr, line in api.fact(f"sets-args:{func.path}:{func.line}", compute):
        out.setdefault(int(index), []).append((str(attr), int(line)))
    return out


def _set_on_params(
    node: ast.FunctionDef | ast.AsyncFunctionDef, tree: ast.Module | None
) -> Iterator[tuple[int, str, str, int]]:
    params = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
    index = {name: i for i, name in enumerate(params)}
    literals = _module_literals(tree)
    for sub in ast.walk(node):
        if isinstance(sub, ast.Assign | ast.AnnAssign):
            targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
            for target in targets:
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id in index
                ):
                    name = target.value.id
                    yield index[name], name, target.attr, sub.lineno
        elif isinstance(sub, ast.For):
            names = _literal_names(sub.iter, literals)
            var = loop_variable(sub.target)
            if names is None or var is None:
                continue
            for inner in ast.walk(sub):
                obj = _setattr_object(inner, var)
                if obj in index:
                    for attr in names:
                        yield index[obj], obj, attr, inner.lineno  # type: ignore[attr-defined]
        obj_attr = _setattr_literal(sub)
        if obj_attr is not None and obj_attr[0] in index:
            yield index[obj_attr[0]], obj_attr[0], obj_attr[1], sub.lineno  # type: ignore[attr-defined]


def _setattr_literal(node: ast.AST) -> tuple[str, str] | None:
    """``setattr(name, "x", v)``: (name, "x")."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "setattr"
        and len(node.args) == 3
        and isinstance(node.args[0], ast.Name)
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    ):
        return node.args[0].id, node.args[1].value
    return None


def _setattr_object(node: ast.AST, var: str) -> str | None:
    """``setattr(obj, var, v)`` with the loop's variable as the name: ``obj``."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "setattr"
        and len(node.args) == 3
        and isinstance(node.args[0], ast.Name)
        and isinstance(node.args[1], ast.Name)
        and node.args[1].id == var
    ):
        return node.args[0].id
    return None


def _module_literals(tree: ast.Module | None) -> dict[str, ast.expr]:
    """Module-level ``NAME = <literal container>`` assignments (the last one wins)."""
    out: dict[str, ast.expr] = {}
    for stmt in tree.body if tree is not None else []:
        if (
            isinstance(stmt, ast.Assign | ast.AnnAssign)
            and stmt.value is not None
            and isinstance(stmt.value, ast.Tuple | ast.List | ast.Set | ast.Dict)
        ):
            for target in stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]:
                if isinstance(target, ast.Name):
                    out[target.id] = stmt.value
    return out


def _literal_names(node: ast.expr, literals: dict[str, ast.expr]) -> list[str] | None:
    """The strings a loop runs over: a literal tuple/list/set of strings, a literal dict's keys
    (``d``, ``d.keys()``, ``d.items()``), or a module-level name bound to one (None: not
    readable)."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("keys", "items")
        and not node.args
    ):
        node = node.func.value
    if isinstance(node, ast.Name) and node.id in literals:
        node = literals[node.id]
    if isinstance(node, ast.Dict):
        keys = node.keys
        if all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in keys):
            return [k.value for k in keys]  # type: ignore[union-attr]
        return None
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        if all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
            return [e.value for e in node.elts]  # type: ignore[attr-defined]
    return None
