"""Command lines in the client that start the host's server, and the flags they pass.

Which commands mean "this host's server" comes from the host itself: the console scripts its
distribution declares (``[console_scripts]`` of its ``entry_points.txt``, or ``[project.scripts]``
of its ``pyproject.toml``), and ``python -m <module>`` of one of its own modules
(``sys.executable`` counts as ``python``). Read: argv list literals (``["vllm", "serve", m,
"--x"]``), grown by ``cmd += [...]``, ``cmd.append(...)`` and ``cmd.extend([...])`` in the same
function, or joined to other parts (``[...] + list(extra_args or [])``); flags built from the keys
of a dict in a loop (``for k, v in opts.items(): cmd += [f"--{k.replace('_', '-')}", str(v)]``:
each key of ``opts``, where its keys are known); and command strings given to ``shlex.split``, ``subprocess.*``, ``os.system`` or
``asyncio.create_subprocess_shell`` (directly or through a name assigned once). A part that is
not literal (a list from elsewhere, a dict whose keys are not known, a hole in a command string
that is no flag's value) may pass any flag: the command is open, and what it is is kept for the
findings that hold unless it passes one.
"""

from __future__ import annotations

import ast
import posixpath
import shlex
from typing import TYPE_CHECKING, cast

from driftcheck.client.http.use import HttpUse
from driftcheck.gates import Gate, all_of

if TYPE_CHECKING:
    from driftcheck.client.index import FunctionInfo, ModuleInfo
    from driftcheck.client.names import Source

Span = tuple[int, int, int, int]

_PYTHONS = frozenset({"python", "python3", "sys.executable"})
_SHELL_CALLS = frozenset(
    {
        "shlex.split",
        "os.system",
        "os.popen",
        "subprocess.Popen",
        "subprocess.run",
        "subprocess.call",
        "subprocess.check_call",
        "subprocess.check_output",
        "asyncio.create_subprocess_shell",
    }
)
_HOLE = "\0"


class LaunchFinder:
    """Mixin for the HTTP collector: the server command lines of one module."""

    scripts: frozenset[str]
    roots: set[str]
    uses: list

    if TYPE_CHECKING:  # what the collector supplies
        module: ModuleInfo
        source: Source
        parents: dict[ast.AST, ast.AST]
        gates: list[Gate]

        @property
        def func(self) -> FunctionInfo | None: ...

    def _argvs(self) -> dict[str, HttpUse]:
        key = id(self.func) if self.func is not None else 0
        store: dict[int, dict[str, HttpUse]] = self.__dict__.setdefault("_argv_store", {})
        return store.setdefault(key, {})

    def _token(self, node: ast.expr) -> str | None:
        """A literal argv element (``sys.executable`` as itself), else None."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):  # ``flag = "--x"; cmd.append(flag)``
            value = _assigned(node.id, self.func, self.module)
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                return value.value
        names = self.module.qualified(node)
        return "sys.executable" if "sys.executable" in names else None

    def _is_server(self, tokens: list[str | None]) -> bool:
        if not tokens or tokens[0] is None:
            return False
        first = posixpath.basename(tokens[0])
        if first in self.scripts:
            return True
        if first in _PYTHONS and len(tokens) >= 3 and tokens[1] == "-m" and tokens[2]:
            return tokens[2].split(".", 1)[0] in self.roots
        return False

    def visit_List(self, node: ast.List) -> None:
        tokens = [self._token(e) for e in node.elts[:3]]
        if not self._is_server(tokens):
            return
        parent = self.parents.get(node)
        if isinstance(parent, ast.Compare) and node in parent.comparators:
            return  # ``name in ["vllm"]``: names to test against, not a command
        use = self._launch(node, argv_list=True)
        self._add_elements(use, node.elts, node)
        # ``[...] + list(extra or [])``: the parts joined after the command.
        top: ast.expr = node
        while isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Add):
            if parent.left is not top:
                return
            self._grow(use, parent.right, parent)
            top, parent = parent, self.parents.get(parent)
        if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
            target = parent.targets[0]
            if isinstance(target, ast.Name):
                self._argvs()[target.id] = use

    def visit_BinOp(self, node: ast.BinOp) -> None:
        """``cmd + list(extra or [])`` of a known argv (returned or passed on)."""
        if isinstance(node.op, ast.Add) and isinstance(node.left, ast.Name):
            use = self._argvs().get(node.left.id)
            if use is not None:
                self._grow(use, node.right, node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name) and isinstance(node.op, ast.Add):
            use = self._argvs().get(node.target.id)
            if use is not None:
                self._grow(use, node.value, node)

    def track_argv_call(self, node: ast.Call) -> None:
        """``cmd.append(x)`` / ``cmd.extend([...])`` of a known argv; a command string given to
        a shell-like call."""
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            use = self._argvs().get(func.value.id)
            if use is not None and node.args:
                if func.attr == "append":
                    self._add_elements(use, [node.args[0]], node)
                elif func.attr in ("extend", "__iadd__"):
                    self._grow(use, node.args[0], node)
        names = self.module.qualified(func)
        if node.args and any(n in _SHELL_CALLS for n in names):
            arg = node.args[0]
            if isinstance(arg, ast.Name):
                values = _assigned(arg.id, self.func, self.module)
                arg = values if values is not None else arg
            self._shell_string(arg)

    def _grow(self, use: HttpUse, value: ast.expr, at: ast.AST) -> None:
        """``value`` joined to the command at ``at`` (a node whose parents are known)."""
        if isinstance(value, (ast.List, ast.Tuple)):
            self._add_elements(use, value.elts, at)
        else:
            _open(use, value)

    def _add_elements(self, use: HttpUse, elts: list[ast.expr], at: ast.AST) -> None:
        flags = list(use.flags)
        gates = list(use.flag_gates) + [None] * (len(flags) - len(use.flag_gates))
        gate = all_of(list(self.gates))
        for e in elts:
            if isinstance(e, ast.Starred):
                _open(use, e.value)
                continue
            token = self._token(e)
            if token is not None and token.startswith("--"):
                flags.append((token.split("=", 1)[0], self.source.span(e)))
                gates.append(gate)
                continue
            keyed = self._keyed_flags(use, e, at)
            for name, span, key_gate in keyed:
                flags.append((name, span))
                gates.append(all_of([g for g in (gate, key_gate) if g is not None]))
            use.keyed_flags += tuple(span for _, span, _ in keyed)
        use.flags = tuple(flags)
        use.flag_gates = tuple(gates)

    def _keyed_flags(
        self, use: HttpUse, e: ast.expr, at: ast.AST
    ) -> list[tuple[str, Span, Gate | None]]:
        """``f"--{k}"`` (``"--" + k``, ``k.replace("_", "-")``) where ``k`` is a key of a dict
        a loop goes through: a flag per key of the dict, written where the key is; the dict's
        keys not all known leave the command open."""
        pieces: list[ast.expr]
        if isinstance(e, ast.JoinedStr):
            pieces = list(e.values)
        elif isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
            pieces = [e.left, e.right]
        else:
            return []
        if not (
            len(pieces) >= 2 and isinstance(pieces[0], ast.Constant) and pieces[0].value == "--"
        ):
            return []
        key_expr = pieces[1].value if isinstance(pieces[1], ast.FormattedValue) else pieces[1]
        var = _key_var(key_expr)
        mapping = self._loop_mapping(at, var) if var is not None else None
        if mapping is None:
            return []
        if len(pieces) > 2 and not (
            isinstance(pieces[2], ast.Constant) and str(pieces[2].value).startswith("=")
        ):
            return []  # more of the flag's name follows: not the key alone
        d = self._value(mapping)  # type: ignore[attr-defined]  # KwargsFlow, beside this mixin
        if d is None or not d.complete:
            _open(use, mapping)
        out: list[tuple[str, Span, Gate | None]] = []
        for op in d.ops if d is not None else []:
            if op.op == "+":
                name = _apply(key_expr, op.key)
                if name is not None:
                    out.append(("--" + name, op.span or self.source.span(e), op.gate))
            elif op.op == "-":
                out = [f for f in out if f[0] != "--" + (_apply(key_expr, op.key) or "")]
        return out

    def _loop_mapping(self, node: ast.AST, var: str) -> ast.expr | None:
        """The dict an enclosing ``for var[, v] in d.items()`` (``d.keys()``, ``d``) goes
        through."""
        parent: ast.AST | None = node
        while parent is not None and not isinstance(parent, (ast.FunctionDef, ast.Module)):
            if isinstance(parent, ast.For):
                target = parent.target
                first = target.elts[0] if isinstance(target, ast.Tuple) and target.elts else target
                if isinstance(first, ast.Name) and first.id == var:
                    it = parent.iter
                    if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute):
                        if it.func.attr in ("items", "keys") and not it.args:
                            return it.func.value
                        return None
                    return it if isinstance(target, ast.Name) else None
            parent = self.parents.get(parent)
        return None

    def _shell_string(self, node: ast.expr) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        elif isinstance(node, ast.JoinedStr):
            # An f-string's literal pieces are str constants.
            text = "".join(
                cast(str, v.value) if isinstance(v, ast.Constant) else _HOLE for v in node.values
            )
        else:
            return
        try:
            tokens = shlex.split(text)
        except ValueError:
            return
        head: list[str | None] = [None if _HOLE in t else t for t in tokens[:3]]
        if not self._is_server(head):
            return
        use = self._launch(node, argv_list=False)
        span = self.source.span(node)
        use.flags = tuple(
            (t.split("=", 1)[0], span) for t in tokens if t.startswith("--") and _HOLE not in t
        )
        # A hole after a flag is that flag's value, and one after a console script's
        # subcommand its positional argument (``vllm serve {model}``); one anywhere else may
        # be any flag.
        script = posixpath.basename(tokens[0]) in self.scripts
        use.argv_open = any(
            _HOLE in t
            and not (i and tokens[i - 1].startswith("--") and "=" not in tokens[i - 1])
            and not (script and i == 2)
            for i, t in enumerate(tokens)
            if not t.startswith("--")
        )
        if use.argv_open:
            use.argv_tails = ("the command string's non-literal parts",)

    def _launch(self, node: ast.expr, *, argv_list: bool) -> HttpUse:

        line, column = self.source.start(node)
        end_line, end_column = self.source.end(node)
        func = self.func
        use = HttpUse(
            kind="launch",
            file=self.module.file,
            line=line,
            column=column + 1,
            end_line=end_line,
            end_column=end_column + 1,
            symbol="launch",
            scope=func.qualname if func is not None else self.module.name,
            order=len(self.uses),
            gate=all_of(list(self.gates)),
            argv_list=argv_list,
        )
        self.uses.append(use)
        return use


def _open(use: HttpUse, part: ast.expr) -> None:
    """The command takes a part that is not literal (named as written, for the findings)."""
    use.argv_open = True
    called = {id(n.func) for n in ast.walk(part) if isinstance(n, ast.Call)}
    named = next(
        (
            n
            for n in ast.walk(part)
            if isinstance(n, (ast.Name, ast.Attribute)) and id(n) not in called
        ),
        part,
    )
    text = ast.unparse(named)
    text = text if len(text) <= 40 else text[:37] + "..."
    if text not in use.argv_tails:
        use.argv_tails = (*use.argv_tails, text)


def _key_var(expr: ast.expr) -> str | None:
    """The name a flag's key expression starts from (``k`` of ``k.replace("_", "-")``)."""
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        expr = expr.func.value
    return expr.id if isinstance(expr, ast.Name) else None


def _apply(expr: ast.expr, key: str) -> str | None:
    """The text ``expr`` makes of the key (``.replace(a, b)``, ``.lower()``, ``.strip()``);
    None for anything else."""
    if isinstance(expr, ast.Name):
        return key
    if not (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute)):
        return None
    inner = _apply(expr.func.value, key)
    args = [a.value for a in expr.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if inner is None or len(args) != len(expr.args) or expr.keywords:
        return None
    if expr.func.attr == "replace" and len(args) == 2:
        return inner.replace(args[0], args[1])
    if expr.func.attr in ("lower", "strip") and not args:
        return inner.lower() if expr.func.attr == "lower" else inner.strip()
    return None


def _assigned(name: str, func: object, module: object) -> ast.expr | None:
    values = getattr(func, "locals", {}).get(name) if func is not None else None
    if values is None:
        values = getattr(module, "globals", {}).get(name, [])
    return values[0] if len(values) == 1 else None
