"""A source-ordered walk that knows, at every node, the gates the code there runs under.

``if``/``else`` arms and conditional expressions run under their test (or its negation); the
statements after an ``if`` whose arm always leaves (``return``, ``raise``, ``continue``,
``break``) run under the other arm's condition; a ``try`` whose handlers catch ``ImportError``
(or ``AttributeError``, ``Exception``) runs its body only where what the body imports (or reads)
exists, and its handlers only where it does not (``ModuleNotFoundError`` alone: where the modules
it imports from exist, since a name missing from a module that is there raises ``ImportError``);
a handler that raises again or ends the program (``sys.exit``, ``exit``, ``quit``, ``os._exit``)
is no fallback; a name imported behind such a ``try`` is only there where its import works,
except in a call where the handler left it ``None`` (or unbound) and nothing tests it first;
``if TYPE_CHECKING:`` never runs.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from typing import cast

from driftcheck.client.compact import PLAIN
from driftcheck.client.gate_reader import GateReader, Scope, host_imports
from driftcheck.client.index import ClientIndex, FunctionInfo, ModuleInfo
from driftcheck.client.names import Walker
from driftcheck.gates import TYPE_ONLY, Gate, all_of, negate

_EXITS = (ast.Return, ast.Raise, ast.Continue, ast.Break)
_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError"}
_ANY = {"Exception", "BaseException"}
#: Calls that end the program: a handler that makes one recovers from nothing.
_ENDS = {"sys.exit", "os._exit", "os.abort"}
_ENDS_BUILTIN = {"exit", "quit"}


class GatedWalker(Walker):
    """A :class:`Walker` that keeps the stack of gates of the code being walked."""

    module: ModuleInfo
    roots: set[str]
    index: ClientIndex

    def __init__(self, reader: GateReader | None) -> None:
        super().__init__()
        self.reader = reader
        self.gates: list[Gate] = []
        #: Statement-list owner -> how many gates its early exits pushed for later siblings.
        self._tails: dict[ast.AST, int] = {}
        #: Local names bound by guarded imports -> the host name they bind.
        self.guarded_names: dict[str, str] = {}
        #: Local names a guarded import binds whose handler leaves them None (or unbound) ->
        #: the host name and the import's line: a call no test guards breaks where the import
        #: fails.
        self.no_fallback: dict[str, tuple[str, int]] = {}
        self._binding_counts: dict[str, int] | None = None
        #: Host names imported under ``if TYPE_CHECKING:`` (type-only).
        self.type_only: set[str] = set()
        #: Module-level name -> the host names imports bind it to, each under its gate.
        self.bindings: dict[str, list[tuple[str, Gate | None]]] = {}
        #: Client modules this module imports: (module, gate at the import, this module).
        self.import_sites: list[tuple[str, Gate | None, str]] = []
        #: Where the module's own functions are named: (function, gate there, scope there).
        self.function_refs: list[tuple[str, Gate | None, str]] = []
        self.uses: list = []

    @property
    def func(self) -> FunctionInfo | None:  # overridden by the collector
        return None

    def gate_for(self, symbol: str, *, member: bool, kind: str, fallback: int = 0) -> Gate | None:
        """The gate of a use of ``symbol`` at the current node. A name bound by a guarded
        import is only there where that import works (an import statement is no use of it:
        its own ``try`` gates it), except in a call of a name its handler left None
        (``fallback``: the import's line), which runs, and breaks, where the import fails."""
        extra: list[Gate] = []
        for bound in self.guarded_names.values() if kind != "import" and not fallback else ():
            if symbol == bound or symbol.startswith(bound + "."):
                extra.append(Gate("has", name=bound))
                break
        if not member and any(symbol == t or symbol.startswith(t + ".") for t in self.type_only):
            extra.append(TYPE_ONLY)
        return all_of([*self.gates, *extra])

    def fallback_line(self, call: ast.AST, symbol: str) -> int:
        """For a call of ``symbol`` through a local name whose guarded import's handler left it
        None or unbound: that import's line (0 otherwise)."""
        root = call.func if isinstance(call, ast.Call) else None
        while isinstance(root, ast.Attribute):
            root = root.value
        if not isinstance(root, ast.Name) or root.id not in self.no_fallback:
            return 0
        if self.func is not None and root.id in self.func.params:
            return 0  # a parameter of that name, not the import
        bound, line = self.no_fallback[root.id]
        return line if symbol == bound or symbol.startswith(bound + ".") else 0

    def record_import_site(self, base: str, names: Iterable[str] = ()) -> None:
        """An import of client module ``base`` (and of ``base.name``, which may be a submodule)
        under the current gates: what module reach is made of."""
        gate = all_of(list(self.gates))
        self.import_sites.append((base, gate, self.module.name))
        self.import_sites += [(f"{base}.{name}", gate, self.module.name) for name in names]

    def visit_Name(self, node: ast.Name) -> None:
        """A load of one of the module's own functions, under the current gates."""
        if isinstance(node.ctx, ast.Load) and node.id in self.module.names.defined:
            qualname = f"{self.module.name}.{node.id}"
            if qualname in self.index.functions:
                scope = self.func.qualname if self.func is not None else self.module.name
                self.function_refs.append((qualname, all_of(list(self.gates)), scope))

    def record_binding(self, local: str, path: str) -> None:
        """A module-level host import binding ``local`` under the current gates."""
        gate = all_of(list(self.gates))
        if gate is None:
            self.bindings[local] = [(path, None)]
        else:
            self.bindings.setdefault(local, []).append((path, gate))

    def alternatives(self, node: ast.AST, symbol: str) -> list[tuple[str, Gate | None]]:
        """For a use of a name that gated imports bind differently (``if new: from a import f``
        / ``else: from b import f``): each binding's symbol, under the gate where it is the one
        in force (a later binding wins where its gate holds)."""
        root = node
        while isinstance(root, (ast.Attribute, ast.Call)):
            root = root.value if isinstance(root, ast.Attribute) else root.func
        if not isinstance(root, ast.Name):
            return []
        options = self.bindings.get(root.id)
        if not options or len({p for p, _ in options}) < 2:
            return []
        current = self.module.names.imports.get(root.id, "")
        if not current or not (symbol == current or symbol.startswith(current + ".")):
            return []
        rest = symbol[len(current) :]
        out = []
        for i, (path, gate) in enumerate(options):
            later = [negate(g) for _, g in options[i + 1 :] if g is not None]
            out.append((path + rest, all_of([g for g in (gate, *later) if g is not None])))
        return out

    # -- conditions ------------------------------------------------------------------------
    def _read(self, test: ast.expr) -> Gate | None:
        if self.reader is None:
            return None
        return self.reader.gate(test, Scope(self.module, self.func))

    def _under(self, gate: Gate, nodes: Sequence[ast.AST], parent: ast.AST) -> None:
        self.gates.append(gate)
        try:
            self._walk_all(nodes, parent)
        finally:
            self.gates.pop()

    def _walk_all(self, nodes: Sequence[ast.AST], parent: ast.AST) -> None:
        for child in nodes:
            self.parents[child] = parent
            self._walk(child)
        self.pop_tails(parent)

    def visit_If(self, node: ast.If) -> bool | None:
        gate = self._read(node.test)
        if gate is None:
            return None
        self._walk_all([node.test], node)
        self._under(gate, node.body, node)
        self._under(negate(gate), node.orelse, node)
        if gate == TYPE_ONLY:
            for stmt in node.body:
                if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    self.type_only.update(host_imports([stmt], self.module, self.roots))
        body_exits = bool(node.body) and isinstance(node.body[-1], _EXITS)
        else_exits = bool(node.orelse) and isinstance(node.orelse[-1], _EXITS)
        owner = self.parents.get(node)
        if owner is not None and body_exits != else_exits:
            self.gates.append(negate(gate) if body_exits else gate)
            self._tails[owner] = self._tails.get(owner, 0) + 1
        return False

    def visit_IfExp(self, node: ast.IfExp) -> bool | None:
        gate = self._read(node.test)
        if gate is None:
            return None
        self._walk_all([node.test], node)
        self._under(gate, [node.body], node)
        self._under(negate(gate), [node.orelse], node)
        return False

    def pop_tails(self, owner: ast.AST) -> None:
        """Drop the gates early exits in ``owner``'s statements pushed (its block is over)."""
        count = self._tails.pop(owner, 0)
        if count:
            del self.gates[-count:]

    # -- try / except ----------------------------------------------------------------------
    def visit_Try(self, node: ast.Try) -> bool | None:
        caught = self._caught(node)
        if not caught:
            return None
        start = len(self.uses)
        self._walk_all(node.body, node)
        body = self.uses[start:]
        # ``except ModuleNotFoundError`` alone catches a missing module, not a name missing from
        # a module that is there (``from m import x`` then raises ImportError)
        modules = _imported_modules(node.body) if not caught & {"ImportError", *_ANY} else {}
        needed: list[str] = []
        for use in body:
            if use.kind == "import" and caught & (_IMPORT_ERRORS | _ANY):
                needed.append(modules.get(use.symbol, use.symbol))
            elif use.kind in ("attribute", "call") and caught & ({"AttributeError"} | _ANY):
                needed.append(use.symbol)
        body_gate = all_of([Gate("has", name=s) for s in dict.fromkeys(needed)])
        if body_gate is not None:
            for use in body:
                use.gate = all_of([g for g in (use.gate, body_gate) if g is not None])
        if caught & (_IMPORT_ERRORS | _ANY):
            local = {**_bound_names(node.body, self.roots)}
            self._no_fallback(node, local)
            for handler in node.handlers:
                local.update(_bound_names(handler.body, self.roots))
            self.guarded_names.update(local)
            if self.reader is not None:
                self.reader.guarded.setdefault(self.module.name, {}).update(local)
        if body_gate is None:
            self._walk_all([*node.orelse], node)
            for handler in node.handlers:
                self._walk_all([handler], node)
        else:
            self._under(body_gate, list(node.orelse), node)
            self._under(negate(body_gate), list(node.handlers), node)
        self._walk_all(list(node.finalbody), node)
        return False

    visit_TryStar = visit_Try

    # -- blocks whose early exits gate their later statements ------------------------------
    def leave_Module(self, node: ast.Module) -> None:
        self.pop_tails(node)

    def leave_For(self, node: ast.AST) -> None:
        self.pop_tails(node)

    leave_AsyncFor = leave_While = leave_With = leave_AsyncWith = leave_For
    leave_ExceptHandler = leave_match_case = leave_For

    def _caught(self, node: ast.Try) -> set[str]:
        """The import/attribute errors (or catch-alls) the handlers of ``node`` catch and
        recover from (a handler that raises again or ends the program is no fallback: the
        failure still breaks)."""
        out: set[str] = set()
        for handler in node.handlers:
            if self._ends(handler):
                continue
            if handler.type is None:
                out |= _ANY
                continue
            types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
            for t in types:
                name = t.attr if isinstance(t, ast.Attribute) else getattr(t, "id", "")
                if name in _IMPORT_ERRORS | _ANY | {"AttributeError"}:
                    out.add(name)
        return out

    def _ends(self, handler: ast.ExceptHandler) -> bool:
        """Whether ``handler`` always leaves by raising or by ending the program (its last
        statement: a conditional exit is a way through, not an end)."""
        last = handler.body[-1] if handler.body else None
        if isinstance(last, ast.Raise):
            return True
        if not (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)):
            return False
        func = last.value.func
        names = self.module.qualified(func)
        if isinstance(func, ast.Name) and not names:  # not imported, not the module's own
            return func.id in _ENDS_BUILTIN
        return any(n in _ENDS for n in names)

    def _no_fallback(self, node: ast.Try, local: dict[str, str]) -> None:
        """Record the names ``node``'s body imports that every handler recovering from the
        import leaves ``None`` or unbound, when nothing else in the module binds them."""
        handlers = [h for h in node.handlers if not self._ends(h)]
        if not handlers or all(h.body and isinstance(h.body[-1], _EXITS) for h in handlers):
            return  # where the import fails, the block is left: what follows has the name
        for name, host in local.items():
            nones = 0
            for handler in handlers:
                bound = [_binding_value(s, name) for s in handler.body]
                if any(b is not None and not _is_none(b) for b in bound):
                    break
                nones += sum(1 for b in bound if b is not None)
            else:
                if self._bindings().get(name, 0) == 1 + nones:
                    self.no_fallback[name] = (host, _import_line(node.body, name))

    def _bindings(self) -> dict[str, int]:
        """How many statements and expressions bind each name anywhere in the module."""
        if self._binding_counts is None:
            counts: dict[str, int] = {}
            for n in ast.walk(self.module.tree):
                names: list[str] = []
                if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
                    names = [n.id]
                elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names = [n.name]
                elif isinstance(n, (ast.Import, ast.ImportFrom)):
                    names = [a.asname or a.name.split(".")[0] for a in n.names]
                elif isinstance(n, (ast.Global, ast.Nonlocal)):
                    names = list(n.names)
                elif isinstance(n, ast.ExceptHandler) and n.name:
                    names = [n.name]
                for name in names:
                    counts[name] = counts.get(name, 0) + 1
            self._binding_counts = counts
        return self._binding_counts


def _binding_value(stmt: ast.stmt, name: str) -> ast.AST | None:
    """What ``stmt`` binds ``name`` to (its value; the statement itself when it binds it some
    other way), or None when it does not bind it."""
    if isinstance(stmt, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == name for t in stmt.targets
    ):
        return stmt.value
    for n in ast.walk(stmt):
        if isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load):
            return stmt
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == name:
            return stmt
        if isinstance(n, (ast.Import, ast.ImportFrom)) and any(
            (a.asname or a.name.split(".")[0]) == name for a in n.names
        ):
            return stmt
    return None


def _import_line(body: list[ast.stmt], name: str) -> int:
    """The line of the import statement in ``body`` that binds ``name``."""
    for stmt in body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)) and any(
            (a.asname or a.name.split(".")[0]) == name for a in stmt.names
        ):
            return stmt.lineno
    return body[0].lineno


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _imported_modules(body: list[ast.stmt]) -> dict[str, str]:
    """Dotted name each ``from m import x`` in ``body`` imports -> ``m``, the module whose
    absence raises ``ModuleNotFoundError`` (a missing ``x`` raises a plain ``ImportError``)."""
    out: dict[str, str] = {}
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                for alias in node.names:
                    out.setdefault(f"{node.module}.{alias.name}", node.module)
    return out


def _bound_names(body: list[ast.stmt], roots: set[str]) -> dict[str, str]:
    """Local name -> host name, for the imports directly in ``body``."""
    out: dict[str, str] = {}
    for stmt in body:
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                if a.name.split(".")[0] in roots:
                    out[a.asname or a.name.split(".")[0]] = (
                        a.name if a.asname else a.name.split(".")[0]
                    )
        elif isinstance(stmt, ast.ImportFrom) and not stmt.level and stmt.module:
            if stmt.module.split(".")[0] in roots:
                for a in stmt.names:
                    if a.name != "*":
                        out[a.asname or a.name] = f"{stmt.module}.{a.name}"
    return out


#: Statements that hold no statement list (most of a module's): nothing below them to read;
#: their compact classes too (:mod:`driftcheck.client.compact`), the index's trees being built
#: of those.
_PLAIN_NO_BLOCKS = frozenset(
    (
        ast.Expr,
        ast.Assign,
        ast.AnnAssign,
        ast.AugAssign,
        ast.Return,
        ast.Import,
        ast.ImportFrom,
        ast.Raise,
        ast.Pass,
        ast.Break,
        ast.Continue,
        ast.Delete,
        ast.Global,
        ast.Nonlocal,
        ast.Assert,
    )
)
_NO_BLOCKS = _PLAIN_NO_BLOCKS | {kind for kind, plain in PLAIN.items() if plain in _PLAIN_NO_BLOCKS}


def assignment_gates(module: ModuleInfo, reader: GateReader) -> dict[int, Gate]:
    r"""``id()`` of each assigned value -> the gate its assignment runs under, for assignments in
    the arms of ``if``\ s on the host (a statement walk: no expression is visited)."""
    out: dict[int, Gate] = {}

    def block(body: list[ast.stmt], gates: list[Gate], func: FunctionInfo | None) -> None:
        gates = list(gates)
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                block(stmt.body, gates, reader.index.function_of_node.get(stmt, func))
                continue
            if isinstance(stmt, ast.ClassDef):
                block(stmt.body, gates, func)
                continue
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and gates and stmt.value is not None:
                out[id(stmt.value)] = cast(Gate, all_of(gates))  # gates is not empty
                continue
            if type(stmt) in _NO_BLOCKS:
                continue
            if isinstance(stmt, ast.If):
                gate = reader.gate(stmt.test, Scope(module, func))
                if gate is None:
                    block(stmt.body, gates, func)
                    block(stmt.orelse, gates, func)
                    continue
                block(stmt.body, [*gates, gate], func)
                block(stmt.orelse, [*gates, negate(gate)], func)
                body_exits = bool(stmt.body) and isinstance(stmt.body[-1], _EXITS)
                else_exits = bool(stmt.orelse) and isinstance(stmt.orelse[-1], _EXITS)
                if body_exits != else_exits:
                    gates.append(negate(gate) if body_exits else gate)
                continue
            for name in ("body", "orelse", "finalbody"):
                inner = getattr(stmt, name, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    block(inner, gates, func)
            for handler in getattr(stmt, "handlers", None) or []:
                block(handler.body, gates, func)

    block(module.tree.body, [], None)
    return out
