"""Names a client's own class machinery puts on the classes it builds: its metaclass writes them
into the class namespace (``namespace["Config"] = config``) or onto the new class
(``setattr(cls, "x", ...)``, ``cls.x = ...``), or an ``__init_subclass__`` sets them on each
subclass. Such a name is present on those classes although no class body declares it, so a read
of it (``cls.Config``) is the client's own attribute, not the host's.
"""

from __future__ import annotations

import ast
import weakref

from driftcheck.client.index import ClassInfo, ClientIndex, first_param

_MEMO: weakref.WeakKeyDictionary[ClientIndex, dict[str, frozenset[str]]] = (
    weakref.WeakKeyDictionary()
)
#: Per index: what each class's own machinery injects, and the client classes below each base
#: (read once, not once per class asked about: transformers has thousands of model classes).
_OWN: weakref.WeakKeyDictionary[ClientIndex, dict[str, frozenset[str]]] = (
    weakref.WeakKeyDictionary()
)
#: Per index (and its count of classes): what each class's own machinery puts on the classes
#: below it.
_BY: weakref.WeakKeyDictionary[
    ClientIndex, tuple[int, dict[str, tuple[ClassInfo, frozenset[str]]]]
] = weakref.WeakKeyDictionary()
_CHILDREN: weakref.WeakKeyDictionary[ClientIndex, tuple[int, dict[str, list[ClassInfo]]]] = (
    weakref.WeakKeyDictionary()
)


def injected_names(index: ClientIndex, info: ClassInfo) -> frozenset[str]:
    """The names the client's metaclass of ``info`` (its own or a client base's) or an
    ``__init_subclass__`` of a client base puts on it, and those put on its client subclasses:
    a base class's method reached through ``cls``/``self`` runs on the subclasses the client
    builds (odmantic's ``_BaseODMModel`` reads the ``Config`` its models' metaclass sets)."""
    memo = _MEMO.setdefault(index, {})
    if info.qualname not in memo:
        own = _OWN.setdefault(index, {})
        names: set[str] = set()
        for cls in (info, *_subclasses(index, info)):
            if cls.qualname not in own:
                own[cls.qualname] = frozenset(_own_injected(index, cls))
            names |= own[cls.qualname]
        memo[info.qualname] = frozenset(names)
    return memo[info.qualname]


def _own_injected(index: ClientIndex, info: ClassInfo) -> set[str]:
    names: set[str] = set()
    for cls in client_mro(index, info):
        names |= _injected_by(index, cls)
    return names


def _injected_by(index: ClientIndex, cls: ClassInfo) -> frozenset[str]:
    """What ``cls``'s own ``__init_subclass__`` and its metaclass put on the classes below it:
    read once per class, not once per class whose MRO holds it (a base of transformers' models
    is in thousands, and each read walks the methods of its metaclass)."""
    count, memo = _BY.get(index) or (-1, {})
    if count != len(index.classes):  # a class added since: a metaclass may resolve now
        memo = {}
        _BY[index] = (len(index.classes), memo)
    got = memo.get(cls.qualname)
    if got is None or got[0] is not cls:
        names: set[str] = set()
        init = next(
            (
                s
                for s in cls.node.body
                if isinstance(s, ast.FunctionDef) and s.name == "__init_subclass__"
            ),
            None,
        )
        if init is not None:
            names |= _set_on(init, {first_param(init) or ""})
        meta = _metaclass(index, cls)
        if meta is not None:
            for m in client_mro(index, meta):
                names |= _metaclass_writes(m.node)
        got = memo[cls.qualname] = (cls, frozenset(names))
    return got[1]


def client_mro(index: ClientIndex, info: ClassInfo) -> list[ClassInfo]:
    """The class and its client bases, depth first, each once."""
    out: list[ClassInfo] = []
    todo, seen = [info], set()
    while todo:
        cur = todo.pop()
        if cur.qualname in seen:
            continue
        seen.add(cur.qualname)
        out.append(cur)
        todo.extend(index.classes[b] for b in cur.bases if b in index.classes)
    return out


def _metaclass(index: ClientIndex, info: ClassInfo) -> ClassInfo | None:
    """The client class a ``metaclass=`` keyword of the class statement names."""
    for kw in info.node.keywords:
        if kw.arg == "metaclass":
            for name in info.module.qualified(kw.value):
                if name in index.classes:
                    return index.classes[name]
    return None


def _subclasses(index: ClientIndex, info: ClassInfo) -> list[ClassInfo]:
    """Every client class that has ``info`` among its client bases (at any depth)."""
    children = _CHILDREN.get(index)
    if children is None or children[0] != len(index.classes):  # built once per index
        table: dict[str, list[ClassInfo]] = {}
        for c in index.classes.values():
            for b in c.bases:
                table.setdefault(b, []).append(c)
        children = _CHILDREN[index] = (len(index.classes), table)
    return _below(children[1], info)


def _below(children: dict[str, list[ClassInfo]], info: ClassInfo) -> list[ClassInfo]:
    out: list[ClassInfo] = []
    todo, seen = list(children.get(info.qualname, [])), {info.qualname}
    while todo:
        cur = todo.pop()
        if cur.qualname in seen:
            continue
        seen.add(cur.qualname)
        out.append(cur)
        todo.extend(children.get(cur.qualname, []))
    return out


def _metaclass_writes(node: ast.ClassDef) -> set[str]:
    """What a metaclass's methods write: ``param["name"] = ...`` into a namespace they are given,
    and ``setattr(c, "name", ...)`` / ``c.name = ...`` on the class (the first parameter, or
    a name bound from a ``__new__(...)`` call)."""
    names: set[str] = set()
    for fn in node.body:
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
        for stmt in ast.walk(fn):
            for t in _targets(stmt):
                if (
                    isinstance(t, ast.Subscript)
                    and isinstance(t.value, ast.Name)
                    and t.value.id in params
                    and isinstance(t.slice, ast.Constant)
                    and isinstance(t.slice.value, str)
                ):
                    names.add(t.slice.value)
        made = {
            t.id
            for stmt in ast.walk(fn)
            if isinstance(stmt, ast.Assign)
            and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Attribute)
            and stmt.value.func.attr == "__new__"
            for t in stmt.targets
            if isinstance(t, ast.Name)
        }
        names |= _set_on(fn, {first_param(fn) or "", *made})
    return names


def _set_on(fn: ast.FunctionDef | ast.AsyncFunctionDef, holders: set[str]) -> set[str]:
    """Names set on one of ``holders``: ``setattr(h, "name", ...)`` or ``h.name = ...``."""
    names: set[str] = set()
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "setattr"
            and len(node.args) >= 2
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id in holders
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            names.add(node.args[1].value)
        for t in _targets(node):
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name):
                if t.value.id in holders:
                    names.add(t.attr)
    return names


def _targets(stmt: ast.AST) -> list[ast.expr]:
    if isinstance(stmt, ast.Assign):
        return list(stmt.targets)
    if isinstance(stmt, ast.AnnAssign | ast.AugAssign):
        return [stmt.target]
    return []
