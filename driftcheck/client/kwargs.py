"""Keyword dataflow: the keys of a dict built in the same function and passed as ``f(**d)``.

Followed in source order, under the gates of the code that writes them: a dict literal,
``dict(k=...)``, ``{**other, "k": v}``, ``d["k"] = v``, ``d.update(k=v)`` / ``d.update({...})``,
``d.pop("k")``, ``del d["k"]``. An assignment in a gated arm is a dict of its own (the two arms
of an ``if`` on the host's version are two dicts); a key added or removed under a gate is there
only where the gate holds. A dict whose keys are not all known (built from a call, updated from
another mapping) still contributes the keys that are certain. The keys of a dict (or a list of
dicts) written as a key's value are kept too (:attr:`_Dict.inner`): a request body's nested
objects.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from driftcheck.gates import Gate, all_of, negate
from driftcheck.host.signature import KeyOp

if TYPE_CHECKING:
    from driftcheck.client.index import FunctionInfo
    from driftcheck.client.names import Source

Span = tuple[int, int, int, int]


#: A key written in a nested dict: the keys above it (``"[]"`` for a list's items), and its op.
Nested = tuple[tuple[str, ...], KeyOp]


@dataclass
class _Dict:
    ops: list[KeyOp]
    complete: bool
    #: The keys of the dicts written as values of this one's keys.
    inner: list[Nested] = field(default_factory=list)


class KwargsFlow:
    """Mixin for the use collector: tracks local dicts per function."""

    gates: list[Gate]

    if TYPE_CHECKING:  # what the collector supplies
        source: Source

        @property
        def func(self) -> FunctionInfo | None: ...

    def _dicts(self) -> dict[str, _Dict]:
        key = id(self.func) if self.func is not None else 0
        store: dict[int, dict[str, _Dict]] = self.__dict__.setdefault("_kwargs_store", {})
        return store.setdefault(key, {})

    def _gate(self) -> Gate | None:
        return all_of(list(self.gates))

    def _span(self, node: ast.AST) -> Span:
        return self.source.span(node)

    # -- writes ------------------------------------------------------------------------------
    def track_assign(self, node: ast.Assign) -> None:
        """``d = {...}`` / ``d = dict(...)`` / ``d["k"] = v``."""
        for target in node.targets:
            if isinstance(target, ast.Name):
                self._bind(target.id, self._value(node.value))
            elif (
                isinstance(target, ast.Subscript)
                and isinstance(target.value, ast.Name)
                and target.value.id in self._dicts()
            ):
                key = target.slice
                d = self._dicts()[target.value.id]
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    d.ops.append(KeyOp("+", key.value, self._gate(), self._span(key)))
                    d.inner += self._inner(key.value, node.value)
                else:
                    d.complete = False

    def track_delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            if (
                isinstance(target, ast.Subscript)
                and isinstance(target.value, ast.Name)
                and target.value.id in self._dicts()
                and isinstance(target.slice, ast.Constant)
                and isinstance(target.slice.value, str)
            ):
                self._dicts()[target.value.id].ops.append(
                    KeyOp("-", target.slice.value, self._gate(), None)
                )

    def track_method(self, node: ast.Call) -> None:
        """``d.update(...)``, ``d.pop("k")``, ``d.setdefault("k", v)``."""
        func = node.func
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
            return
        d = self._dicts().get(func.value.id)
        if d is None:
            return
        gate = self._gate()
        if func.attr in ("pop", "setdefault") and node.args:
            key = node.args[0]
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                op = "-" if func.attr == "pop" else "+"
                d.ops.append(KeyOp(op, key.value, gate, self._span(key) if op == "+" else None))
        elif func.attr == "update":
            for kw in node.keywords:
                if kw.arg is None:
                    d.complete = False
                else:
                    d.ops.append(KeyOp("+", kw.arg, gate, self._span(kw)))
            for arg in node.args:
                other = self._value(arg)
                if other is None:  # another mapping: its keys are not known
                    d.complete = False
                    continue
                d.ops += [
                    KeyOp(o.op, o.key, all_of([g for g in (o.gate, gate) if g]), o.span)
                    for o in other.ops
                ]
                d.inner += other.inner
                d.complete = d.complete and other.complete
        elif func.attr == "clear":
            d.ops.append(KeyOp("clear", "", gate, None))

    def _bind(self, name: str, value: _Dict | None) -> None:
        dicts = self._dicts()
        gate = self._gate()
        if value is None:
            dicts.pop(name, None)
            return
        before = dicts.get(name)
        if gate is None or before is None:
            dicts[name] = value
            return
        # A gated assignment: the old dict where the gate fails, the new one where it holds.
        not_gate = negate(gate)
        ops = [
            KeyOp(o.op, o.key, all_of([g for g in (o.gate, not_gate) if g]), o.span)
            for o in before.ops
        ]
        ops.append(KeyOp("clear", "", gate, None))
        ops += value.ops
        dicts[name] = _Dict(ops, before.complete and value.complete, before.inner + value.inner)

    def _value(self, node: ast.expr) -> _Dict | None:
        """The dict an expression builds (None: not a dict we can follow)."""
        gate = self._gate()
        if isinstance(node, ast.Dict):
            d = _Dict([], True)
            for key, value in zip(node.keys, node.values, strict=True):
                if key is None:  # ``**other``
                    other = self._value(value)
                    if other is None:
                        d.complete = False
                    else:
                        d.ops += other.ops
                        d.inner += other.inner
                        d.complete = d.complete and other.complete
                elif isinstance(key, ast.Constant) and isinstance(key.value, str):
                    d.ops.append(KeyOp("+", key.value, gate, self._span(key)))
                    d.inner += self._inner(key.value, value)
                else:
                    d.complete = False
            return d
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "dict"
            and not node.args
        ):
            d = _Dict([], True)
            for kw in node.keywords:
                if kw.arg is None:
                    other = self._value(kw.value)
                    d.complete = d.complete and other is not None and other.complete
                    d.ops += other.ops if other is not None else []
                    d.inner += other.inner if other is not None else []
                else:
                    d.ops.append(KeyOp("+", kw.arg, gate, self._span(kw)))
                    d.inner += self._inner(kw.arg, kw.value)
            return d
        if isinstance(node, ast.Name) and node.id in self._dicts():
            src = self._dicts()[node.id]
            return _Dict(list(src.ops), src.complete, list(src.inner))
        return None

    def _inner(self, key: str, value: ast.expr) -> list[Nested]:
        """The keys written under ``key`` when its value is a dict, or a list of dicts."""
        items: list[tuple[tuple[str, ...], ast.expr]] = [((key,), value)]
        if isinstance(value, (ast.List, ast.Tuple)):
            items = [((key, "[]"), e) for e in value.elts]
        out: list[Nested] = []
        for path, expr in items:
            if not isinstance(expr, (ast.Dict, ast.Call, ast.Name)):
                continue
            d = self._value(expr)
            if d is None:
                continue
            out += [(path, op) for op in d.ops]
            out += [((*path, *p), op) for p, op in d.inner]
        return out

    # -- reads -------------------------------------------------------------------------------
    def spread(self, node: ast.Call) -> tuple[tuple[KeyOp, ...], bool]:
        """The key operations of every ``**d`` of a call, and whether all its keys are known."""
        ops: list[KeyOp] = []
        complete = True
        for kw in node.keywords:
            if kw.arg is not None:
                continue
            d = self._value(kw.value)
            if d is None:
                complete = False
                continue
            ops += d.ops
            complete = complete and d.complete
        return tuple(ops), complete
