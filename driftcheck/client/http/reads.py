"""What the client reads from a response: ``r.json()["k"]``, ``data = r.json(); data["k"]``,
``data.get("k")``, attribute reads on OpenAI SDK results (``res.choices[0].x``), ``getattr(res,
"k", None)`` and ``hasattr(res, "k")``; followed through assignments, ``await`` (also of a
coroutine kept in a name, and ``asyncio.wait_for``) and into a client function the result is
passed to. A read with a default (``.get``, ``getattr(..., None)``, a membership test) is
optional, unless the client raises right where it is missing.
"""

from __future__ import annotations

import ast
from dataclasses import replace
from typing import cast

from driftcheck.client.http.use import HttpUse
from driftcheck.client.index import ClientIndex, FunctionInfo, ModuleInfo
from driftcheck.gates import Gate, all_of

_DEPTH = 3
#: The field of a read that is the client's test that the body is empty.
EMPTY = "<empty>"
#: Methods of a parsed body that read one key with a default.
_GETS = frozenset({"get"})


class ReadFinder:
    """Finds the reads of one request's result."""

    def __init__(
        self,
        module: ModuleInfo,
        index: ClientIndex,
        parents: dict[ast.AST, ast.AST],
        node_gates: dict[int, Gate],
    ) -> None:
        self.module = module
        self.index = index
        self.parents = parents
        self.node_gates = node_gates
        self.out: list[HttpUse] = []
        self.seen: set[tuple[int, int, tuple[str, ...]]] = set()

    def reads(
        self, use: HttpUse, call: ast.Call, func: FunctionInfo | None, kind: str
    ) -> list[HttpUse]:
        """Every read of ``call``'s result (``use`` is its request; ``kind``: what the call
        gives, ``response``, ``body`` or ``sdk``)."""
        self.out, self.seen = [], set()
        self._from(call, use, func, kind, (), 0)
        return self.out

    # -- following the value ---------------------------------------------------------------
    def _from(
        self,
        node: ast.AST,
        use: HttpUse,
        func: FunctionInfo | None,
        kind: str,
        prefix: tuple[str, ...],
        depth: int,
    ) -> None:
        """Follow the value ``node`` evaluates to (a response, a parsed body or an SDK
        object, read as far as ``prefix``) up through the expressions that use it; a read is
        recorded where the path grew past ``prefix``."""
        optional = False
        base = len(prefix)
        while True:
            parent = self.parents.get(node)
            if parent is None:
                break
            if isinstance(parent, ast.Await):
                node = parent
                continue
            if isinstance(parent, ast.Call) and node in parent.args and _is_wait_for(parent):
                node = parent
                continue
            if kind == "response":
                if (
                    isinstance(parent, ast.Attribute)
                    and parent.attr == "json"
                    and isinstance(self.parents.get(parent), ast.Call)
                ):
                    node, kind = self.parents[parent], "body"
                    continue
                if isinstance(parent, ast.Attribute) and _expects_empty(parent, self.parents):
                    self._add(parent, use, func, (EMPTY,), False)
                elif isinstance(parent, (ast.Assign, ast.AnnAssign, ast.NamedExpr, ast.withitem)):
                    self._assigned(parent, node, use, func, kind, prefix, depth)
                elif isinstance(parent, ast.Call) and node in parent.args:
                    self._passed(parent, node, use, func, kind, prefix, depth)
                return
            if isinstance(parent, ast.Subscript) and parent.value is node:
                key = parent.slice
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    prefix = (*prefix, key.value)
                elif kind == "sdk" or isinstance(key, ast.Constant):
                    prefix = (*prefix, "[]")
                else:
                    break
                node = parent
                continue
            if isinstance(parent, ast.Attribute) and parent.value is node:
                grand = self.parents.get(parent)
                if isinstance(grand, ast.Call) and grand.func is parent:
                    if parent.attr in _GETS and kind == "body" and _const_arg(grand) is not None:
                        field = cast(str, _const_arg(grand))  # not None: tested just above
                        prefix, optional, node = (*prefix, field), True, grand
                        optional = not self._raises_if_missing(grand)
                        continue
                    break  # another method of the value: not a field read
                if kind != "sdk":
                    break
                prefix, node = (*prefix, parent.attr), parent
                continue
            if isinstance(parent, ast.Call) and node in parent.args and parent.args[0] is node:
                name = parent.func.id if isinstance(parent.func, ast.Name) else ""
                named = _const_arg(parent, 1)
                if name in ("getattr", "hasattr") and named is not None and kind == "sdk":
                    prefix = (*prefix, named)
                    missing_ok = name == "hasattr" or len(parent.args) > 2
                    optional = missing_ok and not self._raises_if_missing(parent)
                    if name == "hasattr":
                        self._add(parent, use, func, prefix, optional)
                        return
                    if optional:
                        self._add(parent, use, func, prefix, optional)
                        return  # the value may be a default: what it is read for is not known
                    node = parent
                    continue
            if isinstance(parent, ast.Compare) and kind == "body" and node in parent.comparators:
                key = parent.left
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    full = (*prefix, key.value)
                    self._add(parent, use, func, full, not self._raises_if_missing(parent))
                return
            if isinstance(parent, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
                if len(prefix) > base:
                    self._add(node, use, func, prefix, optional)
                self._assigned(parent, node, use, func, kind, prefix, depth)
                return
            if isinstance(parent, ast.Call) and node in parent.args:
                if len(prefix) > base:
                    self._add(node, use, func, prefix, optional)
                self._passed(parent, node, use, func, kind, prefix, depth)
                return
            break
        if len(prefix) > base:
            self._add(node, use, func, prefix, optional)

    def _assigned(
        self,
        stmt: ast.AST,
        value: ast.AST,
        use: HttpUse,
        func: FunctionInfo | None,
        kind: str,
        prefix: tuple[str, ...],
        depth: int,
    ) -> None:
        """``x = value``: follow every load of ``x`` in the same function."""
        if depth >= _DEPTH:
            return
        target = getattr(stmt, "optional_vars", None) or getattr(stmt, "target", None)
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
        if not isinstance(target, ast.Name):
            return
        scope = func.node if func is not None else self.module.tree
        for load in _loads(scope, target.id, stmt):
            self._from(load, use, func, kind, prefix, depth + 1)

    def _passed(
        self,
        call: ast.Call,
        value: ast.AST,
        use: HttpUse,
        func: FunctionInfo | None,
        kind: str,
        prefix: tuple[str, ...],
        depth: int,
    ) -> None:
        """``f(value, ...)`` of a client function of this module: follow its parameter."""
        if depth >= _DEPTH or not isinstance(call.func, ast.Name):
            return
        target = self.index.functions.get(f"{self.module.name}.{call.func.id}")
        if target is None:
            return
        position = call.args.index(cast(ast.expr, value))  # an argument of the call
        params = [p.arg for p in (*target.node.args.posonlyargs, *target.node.args.args)]
        if position >= len(params):
            return
        for load in _loads(target.node, params[position], None):
            self._from(load, use, target, kind, prefix, depth + 1)

    # -- what a read is --------------------------------------------------------------------
    def _add(
        self,
        node: ast.AST,
        use: HttpUse,
        func: FunctionInfo | None,
        field: tuple[str, ...],
        optional: bool,
    ) -> None:
        line, column = self.module.source.start(node)
        key = (line, column, field)
        if key in self.seen:
            return
        self.seen.add(key)
        end_line, end_column = self.module.source.end(node)
        gate = all_of([g for g in (use.gate, self.node_gates.get(id(node))) if g is not None])
        self.out.append(
            replace(
                use,
                kind="http-read",
                file=self.module.file,
                line=line,
                column=column + 1,
                end_line=end_line,
                end_column=end_column + 1,
                symbol=f"{use.symbol} -> {_dotted(field)}",
                scope=func.qualname if func is not None else self.module.name,
                gate=gate,
                field=field,
                optional=optional,
                payload=(),
                nested=(),
                narrow=self._narrow(node),
            )
        )

    def _narrow(self, node: ast.AST) -> tuple[tuple[str, ...], bool] | None:
        """The classes an enclosing ``if isinstance(x, C)`` narrows the value to."""
        child, parent = node, self.parents.get(node)
        while parent is not None and not isinstance(parent, (ast.FunctionDef, ast.Module)):
            if isinstance(parent, ast.If) and child is not parent.test:
                test = parent.test
                if (
                    isinstance(test, ast.Call)
                    and isinstance(test.func, ast.Name)
                    and test.func.id == "isinstance"
                    and len(test.args) == 2
                ):
                    kinds = test.args[1]
                    elts = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
                    names = tuple(n for e in elts for n in self.module.qualified(e))
                    return names, child in parent.body
            child, parent = parent, self.parents.get(parent)
        return None

    def _raises_if_missing(self, node: ast.AST) -> bool:
        """Does the client raise right where the value read at ``node`` is missing? (``if not
        hasattr(...): raise``, ``if "k" not in d: raise``, ``x = getattr(...)`` then ``if x is
        None: raise``.)"""
        parent = self.parents.get(node)
        if isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not):
            parent = self.parents.get(parent)
            return isinstance(parent, ast.If) and _raises(parent.body)
        if isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.NotIn):
            return isinstance(parent, ast.If) and parent.test is node and _raises(parent.body)
        if isinstance(parent, ast.Assign) and isinstance(parent.targets[0], ast.Name):
            name = parent.targets[0].id
            stmt: ast.AST = parent
            for _ in range(3):  # out of the arms of an ``if`` that assigns it in each
                holder = self.parents.get(stmt)
                if holder is None:  # the module: no arm left to leave
                    return False
                for body in (getattr(holder, "body", None), getattr(holder, "orelse", None)):
                    if isinstance(body, list) and stmt in body:
                        later = body[body.index(stmt) + 1 :]
                        if any(_none_raises(s, name) for s in later[:3]):
                            return True
                        if later or not isinstance(holder, ast.If):
                            return False
                stmt = holder
        return False


def _expects_empty(attr: ast.Attribute, parents: dict[ast.AST, ast.AST]) -> bool:
    """``r.content == b""``, ``not r.text``, ``len(r.content) == 0``, ``r.status_code == 204``:
    the client tests that the response has no body."""
    parent = parents.get(attr)
    if attr.attr in ("content", "text"):
        if isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not):
            return True
        tested: ast.AST = attr
        if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name):
            if parent.func.id == "len":
                tested, parent = parent, parents.get(parent)
        if isinstance(parent, ast.Compare) and len(parent.ops) == 1:
            other = parent.comparators[0] if parent.left is tested else parent.left
            return (
                isinstance(parent.ops[0], (ast.Eq, ast.Is))
                and isinstance(other, ast.Constant)
                and other.value in ("", b"", 0)
            )
    if attr.attr == "status_code" and isinstance(parent, ast.Compare) and len(parent.ops) == 1:
        other = parent.comparators[0] if parent.left is attr else parent.left
        return (
            isinstance(parent.ops[0], ast.Eq)
            and isinstance(other, ast.Constant)
            and other.value == 204
        )
    return False


def _none_raises(stmt: ast.stmt, name: str) -> bool:
    if not isinstance(stmt, ast.If) or not _raises(stmt.body):
        return False
    test = stmt.test
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return isinstance(test.operand, ast.Name) and test.operand.id == name
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == name
        and isinstance(test.ops[0], ast.Is)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    )


def _raises(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], ast.Raise)


def _is_wait_for(call: ast.Call) -> bool:
    f = call.func
    return (isinstance(f, ast.Attribute) and f.attr == "wait_for") or (
        isinstance(f, ast.Name) and f.id == "wait_for"
    )


def _const_arg(call: ast.Call, i: int = 0) -> str | None:
    if len(call.args) > i:
        arg = call.args[i]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return arg.value
    return None


def _loads(scope: ast.AST, name: str, after: ast.AST | None) -> list[ast.Name]:
    """The loads of ``name`` in ``scope`` (after the statement ``after``, when given)."""
    start = getattr(after, "lineno", 0) if after is not None else 0
    end = getattr(after, "end_lineno", 0) if after is not None else 0
    return [
        n
        for n in ast.walk(scope)
        if isinstance(n, ast.Name)
        and n.id == name
        and isinstance(n.ctx, ast.Load)
        and (after is None or n.lineno > end or (n.lineno >= start and n.lineno <= end and False))
    ]


def _dotted(field: tuple[str, ...]) -> str:
    out = ""
    for part in field:
        out += "[]" if part == "[]" else (f".{part}" if out else part)
    return out
