"""Uses of members read off typed receivers (``self.engine.step()``): which host class the
receiver is, through which binding or branch, and whether the client's own class defines the
member first."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from driftcheck.client.index import (
    ClassInfo,
    ClientIndex,
    TypeRef,
    class_attrs,
    first_param,
)
from driftcheck.client.injected import client_mro, injected_names
from driftcheck.client.names import walk_statements
from driftcheck.client.use import Use
from driftcheck.gates import Gate, all_of

if TYPE_CHECKING:
    from driftcheck.client.index import FunctionInfo, ModuleInfo
    from driftcheck.client.names import Source
    from driftcheck.client.types import TypeInferrer


class MemberUses:
    """The member-use part of the use collector (a base class of it)."""

    if TYPE_CHECKING:  # what the collector supplies
        types: TypeInferrer
        index: ClientIndex
        module: ModuleInfo
        source: Source
        _add: Callable[..., Use]
        parents: dict[ast.AST, ast.AST]

        @property
        def func(self) -> FunctionInfo | None: ...

    def _member_use(self, kind: str, attr: ast.Attribute, at: ast.AST, **kw: Any) -> Use | None:
        if isinstance(attr.value, ast.Call) and isinstance(attr.value.func, ast.Name):
            if attr.value.func.id == "super":
                return self._super_use(kind, attr, at, **kw)
        arms = self.types.alternatives(attr.value, self.func, self.module)
        if arms:  # a receiver bound differently in the arms of an ``if`` on the host
            made = [self._member_of(kind, attr, at, owner, gate, **kw) for owner, gate in arms]
            return next((u for u in made if u is not None), None)
        return self._member_of(kind, attr, at, None, None, **kw)

    def _member_of(
        self,
        kind: str,
        attr: ast.Attribute,
        at: ast.AST,
        owner: TypeRef | None,
        gate: Gate | None,
        **kw: Any,
    ) -> Use | None:
        if owner is None:
            owner = self.types.infer(attr.value, self.func, self.module)
        if owner is None:
            return None
        cls = self.types.host_class(owner)
        if cls is None and owner.kind == "host" and owner.path in self.types.bound_classes:
            path = owner.path  # a class a binding names that only the other release has
        elif cls is None:
            return None
        else:
            path = cls.path
        member = attr.attr
        if owner.kind == "client":
            info = self.index.classes.get(owner.path)
            if info is not None and client_defines(self.index, info, member):
                return None
        use = self._add(
            kind,
            at,
            f"{path}.{member}",
            receiver=path,
            member=member,
            receiver_expr=self.source.segment(attr.value),
            via=self._via(attr.value) if gate is None else self._arm(attr.value, path, gate),
            holder=self._holder(attr.value),
            **kw,
        )
        if gate is not None:
            use.gate = all_of([g for g in (use.gate, gate) if g is not None])
        if isinstance(attr.value, ast.Attribute):
            use.stored_own = self._stored_own(attr.value.attr, path, member, at)
        return use

    def _stored_own(self, holder: str, cls: str, member: str, at: ast.AST) -> str:
        """``Class file:line`` where the client stores an instance of its own subclass of
        ``cls`` that sets ``member`` into an attribute named ``holder`` ("" when it does not),
        unconditionally or under a setting the read is under too (``if cfg.mine.enabled:``
        at both): the object read from that attribute is then the client's, with the member."""
        stores = own_stores(self.index).get(holder)
        if not stores:
            return ""
        settings = _settings(at, self.parents)
        for qualname, file, line, setting in stores:
            if setting and setting not in settings:
                continue
            info = self.index.classes.get(qualname)
            if info is None or not client_defines(self.index, info, member):
                continue
            bases = (self.types.host.resolve(b) for b in self.types.host_bases(qualname))
            if any(getattr(b, "path", None) == cls for b in bases):
                return f"{qualname.rsplit('.', 1)[-1]} {file}:{line}"
        return ""

    def _super_use(self, kind: str, attr: ast.Attribute, at: ast.AST, **kw: Any) -> Use | None:
        """``super().m(...)`` in an override: a use of the host class's ``m`` that the MRO
        reaches (``super().__init__(...)``: a call of that host class's constructor)."""
        owner = self.types.super_owner(attr.value, self.func, self.module, attr.attr)
        if owner is None or owner.kind != "host" or self.func is None:
            return None
        where = (self.func.class_name or "").rsplit(".", 1)[-1]
        if attr.attr == "__init__" and kind == "call":
            return self._add(kind, at, owner.path, via=f"super().__init__ in {where}", **kw)
        return self._add(
            kind,
            at,
            f"{owner.path}.{attr.attr}",
            receiver=owner.path,
            member=attr.attr,
            receiver_expr=self.source.segment(attr.value),
            via=f"super() in {where}",
            **kw,
        )

    def _arm(self, receiver: ast.AST, cls: str, gate: Gate) -> str:
        """Which branch bound the receiver: ``self.engine is a TurboEngine when ...``."""
        return f"{self.source.segment(receiver)} is a {cls.rsplit('.', 1)[-1]} when {gate.text()}"

    def _holder(self, receiver: ast.AST) -> str | None:
        """For ``a.b.member``: the host attribute ``A.b`` the receiver was read from."""
        if not isinstance(receiver, ast.Attribute):
            return None
        owner = self.types.host_class(self.types.infer(receiver.value, self.func, self.module))
        return f"{owner.path}.{receiver.attr}" if owner is not None else None

    def _via(self, receiver: ast.AST) -> str | None:
        """How the root of a receiver chain got a host type, when plain code does not show it."""
        root = receiver
        while isinstance(root, ast.Attribute):
            root = root.value
        func = self.func
        if not isinstance(root, ast.Name) or func is None:
            return None
        if first_param(func.node) != root.id:
            return None
        bound = [b for b in func.bound_self if b.kind != "unknown"]
        if bound:
            return f"{root.id} is bound with types.MethodType to {bound[0].path.rsplit('.', 1)[-1]}"
        info = self.index.classes.get(func.class_name or "")
        if info is not None and info.extra_bases:
            return f"{info.qualname} is mixed into {info.extra_bases[0]}"
        return None


def client_defines(index: ClientIndex, info: ClassInfo, member: str) -> bool:
    """Whether the client's class, a client base of it, or the client's own class machinery
    (:mod:`driftcheck.client.injected`) gives it the member (the names read once per class:
    every read of a member off an instance asks; the index is complete by then)."""
    memo: dict[str, tuple[frozenset[str], tuple[frozenset[str], ...]]]
    memo = index.__dict__.setdefault("_client_defines", {})
    got = memo.get(info.qualname)
    if got is None:
        # each class's own names once, shared by every class below it: the union of a whole
        # MRO kept per class held a base's hundreds of names once per subclass (transformers'
        # 17,900 classes: 29 MB at the scan's peak)
        own: dict[str, frozenset[str]] = index.__dict__.setdefault("_client_own_names", {})
        sets = []
        for cur in client_mro(index, info):
            names = own.get(cur.qualname)
            if names is None:
                names = own[cur.qualname] = frozenset(
                    (*cur.methods, *cur.attrs, *class_attrs(cur.node))
                )
            sets.append(names)
        got = memo[info.qualname] = (injected_names(index, info), tuple(sets))
    return member in got[0] or any(member in names for names in got[1])


def _setting(test: ast.expr) -> str:
    """The client setting an ``if`` tests, as its last two names (``self.cfg.mine.enabled`` and
    ``cfg.mine.enabled``: ``mine.enabled``), or the test's text."""
    parts: list[str] = []
    node: ast.expr = test
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    if parts and (isinstance(test, ast.Attribute) or isinstance(test, ast.Name)):
        return ".".join(reversed(parts[:2]))
    return ast.unparse(test)


def _settings(node: ast.AST, parents: dict) -> set[str]:
    """The settings of the ``if`` statements whose body holds ``node``."""
    out: set[str] = set()
    child, parent = node, parents.get(node)
    while parent is not None:
        if isinstance(parent, ast.If) and child in parent.body:
            out.add(_setting(parent.test))
        child, parent = parent, parents.get(parent)
    return out


#: Attribute name -> (client class, file, line, the setting the store is under, "" for none).
OwnStores = dict[str, list[tuple[str, str, int, str]]]


def own_stores(index: ClientIndex) -> OwnStores:
    """Attribute name -> where ``obj.name = value`` stores an instance of a client class:
    ``Cls(...)``, ``Cls.factory(...)`` (a classmethod that returns ``cls(...)``), or a local
    bound to one just before; with the setting of the innermost ``if`` it is under. Read once
    per client."""
    cached: OwnStores | None = getattr(index, "_own_stores", None)
    if cached is not None:
        return cached
    out: OwnStores = {}
    functions: dict[int, list[FunctionInfo]] = {}
    for info in index.function_of_node.values():
        functions.setdefault(id(info.module), []).append(info)
    stored: dict[int, set[str]] = {}  # a statement's id -> the names it stores, walked once
    for module in index.modules.values():
        for owner, block in _blocks(module.tree):
            setting: str | None = None  # read once a store is found under it
            for i, node in enumerate(block):
                if not isinstance(node, ast.Assign):
                    continue
                targets = [t for t in node.targets if isinstance(t, ast.Attribute)]
                if not targets:
                    continue
                value = _latest(block, i, node.value, stored)
                if isinstance(value, ast.Call):  # a call is read without its function's locals
                    made = _instance_of(index, module, None, value)
                elif isinstance(value, ast.Name):
                    func = _enclosing(functions.get(id(module), []), node)
                    made = _instance_of(index, module, func, value)
                else:
                    continue
                if made is None:
                    continue
                if setting is None:
                    setting = (
                        _setting(owner.test)
                        if isinstance(owner, ast.If) and block is owner.body
                        else ""
                    )
                for t in targets:
                    out.setdefault(t.attr, []).append((made, module.file, node.lineno, setting))
    index.__dict__["_own_stores"] = out
    return out


def _blocks(tree: ast.AST) -> list[tuple[ast.AST, list[ast.stmt]]]:
    """Every statement list of a tree (bodies, ``else`` and ``finally`` arms, handlers), with
    the node that holds it."""
    out: list[tuple[ast.AST, list[ast.stmt]]] = []
    for node in walk_statements(tree):  # no expression holds a statement list
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                out.append((node, block))
    return out


def _latest(
    block: list[ast.stmt], i: int, value: ast.expr, stored: dict[int, set[str]]
) -> ast.expr:
    """``value``, or for a name the value the statements just before ``block[i]`` bound it to
    last (``x = Cls.make(...); obj.attr = x``). ``stored`` keeps the names each statement
    stores: an ``__init__`` of many ``self.a = a`` asked about each of them every time."""
    if not isinstance(value, ast.Name):
        return value
    for j in range(i - 1, -1, -1):
        stmt = block[j]
        if isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == value.id for t in stmt.targets
        ):
            return stmt.value
        names = stored.get(id(stmt))
        if names is None:
            names = stored[id(stmt)] = {
                n.id
                for n in ast.walk(stmt)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
            }
        if value.id in names:
            return value  # rebound in a way not read here
    return value


def _enclosing(functions: list[FunctionInfo], node: ast.AST) -> FunctionInfo | None:
    """The client function (of ``node``'s module) whose body holds ``node``: the innermost."""
    line = getattr(node, "lineno", 0)
    best: FunctionInfo | None = None
    for info in functions:
        if not (info.node.lineno <= line <= (info.node.end_lineno or 0)):
            continue
        if best is None or info.node.lineno >= best.node.lineno:
            best = info
    return best


def _instance_of(
    index: ClientIndex,
    module: ModuleInfo,
    func: FunctionInfo | None,
    value: ast.expr,
    depth: int = 0,
) -> str | None:
    """The client class ``value`` builds an instance of (None: not known)."""
    if isinstance(value, ast.Name) and func is not None and depth < 3:
        values = func.locals.get(value.id, [])
        return _instance_of(index, module, func, values[0], depth + 1) if len(values) == 1 else None
    if not isinstance(value, ast.Call):
        return None
    for name in module.qualified(value.func):
        if name in index.classes:
            return name
        owner, _, method = name.rpartition(".")
        info = index.classes.get(owner)
        factory = info.methods.get(method) if info is not None else None
        if factory is not None and _returns_cls(factory.node):
            return owner
    return None


def _returns_cls(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A classmethod whose ``return`` builds ``cls(...)``."""
    if not any(isinstance(d, ast.Name) and d.id == "classmethod" for d in node.decorator_list):
        return False
    first = first_param(node)
    return any(
        isinstance(r, ast.Return)
        and isinstance(r.value, ast.Call)
        and isinstance(r.value.func, ast.Name)
        and r.value.func.id == first
        for r in ast.walk(node)
    )
