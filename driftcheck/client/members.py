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
    assigns_class_attr,
    first_param,
)
from driftcheck.client.injected import injected_names
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
        return use

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
    (:mod:`driftcheck.client.injected`) gives it the member."""
    if member in injected_names(index, info):
        return True
    todo, seen = [info], set()
    while todo:
        cur = todo.pop()
        if cur.qualname in seen:
            continue
        seen.add(cur.qualname)
        if member in cur.methods or member in cur.attrs:
            return True
        if assigns_class_attr(cur.node, member):
            return True
        todo.extend(index.classes[b] for b in cur.bases if b in index.classes)
    return False
