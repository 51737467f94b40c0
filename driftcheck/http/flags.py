"""The server's command-line flags, read from argparse code.

``parser.add_argument("--x", "-x", type=..., default=..., deprecated=True, help=...)`` gives a flag
directly. Dataclass-driven flags come from ``kw = helper(SomeDataclass)`` and then either
``add_argument("--x", **kw["x"])`` (one field) or ``for key, value in kw.items():
add_argument(f"--{key.replace('_', '-')}", **value)`` (every field, less the ones ``del``-eted): a
field's annotation and default describe the flag, a ``bool`` field is also ``--no-x``, and an
attribute docstring that says "deprecated" deprecates it.

Functions that add arguments call each other with the parser (``make_arg_parser`` calls
``FrontendArgs.add_cli_args``, a classmethod whose ``cls`` is the class it is called on); each
function's flags with its callees' are one command line. The server's flags are those of every
command line that names the most of what the app's builder (and the functions it calls with
the app) read from ``args`` (``args.root_path``, ``getattr(args, "x", ...)``), united: a
benchmark's parser does not qualify, and a flag any qualifying command line accepts is kept
(a missed removal is better than a false one).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from driftcheck.http.flags_syntax import (
    FieldInfo,
    argument_keywords,
    dataclass_fields,
    deprecation,
    is_bool,
    literal_rows,
    loop_key,
    parser_candidates,
    says_deprecated,
    substituted,
    walk_own,
)
from driftcheck.http.hostcode import (
    Def,
    HostCode,
    Imports,
    dotted_name,
    literal_str,
    local_imports,
)
from driftcheck.http.surface_model import CliFlag


@dataclass
class _Parser:
    """What one function adds: its own flags and the parser functions it calls."""

    flags: list[CliFlag] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    #: The calls that may be of a parser function (``call.func`` and the function's own
    #: imports), resolved once every candidate is known.
    pending: list[tuple[ast.expr, Imports]] = field(default_factory=list)


@dataclass(frozen=True)
class _Candidate:
    """A function that may add arguments, by name (its node is not kept once read)."""

    module: str
    name: str
    #: A plain ``def`` (not async, not the module body).
    function: bool

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.name}"


#: A ``def`` in a module's text: the names a call must have to be a parser function's.
_DEF_NAME = re.compile(r"\bdef\s+(\w+)")


@dataclass
class FlagReader:
    code: HostCode
    functions: dict[str, _Parser] = field(default_factory=dict)
    #: Top-level functions whose command line is the server's (``module:function``), once read.
    parsers: list[str] = field(default_factory=list)
    _defs: dict[str, _Candidate] = field(default_factory=dict)
    _names: set[str] = field(default_factory=set)
    #: Every ``def`` name of the modules read (what :attr:`_names` will be among).
    _maybe: set[str] = field(default_factory=set)

    def read(self, reads: set[str]) -> dict[str, CliFlag]:
        """The flags of the command line that best covers ``reads`` (``args.<dest>`` names).

        Each module is parsed once and every function in it read then (its tree dropped after);
        the calls between them are resolved once all are known."""
        modules = self.code.modules_containing("add_argument")
        for module in modules:
            self._maybe.update(_DEF_NAME.findall(self.code.text(module)))
        for module in modules:
            tree = self.code.parse(module)
            if tree is None:
                continue
            spans = self.code.spans(module)
            for func, owner in parser_candidates(module, tree):
                self._defs[func.qualname] = _Candidate(
                    module, func.name, isinstance(func.node, ast.FunctionDef)
                )
                bound = None
                if owner is not None:
                    if spans.get(owner.name, (0,) * 6)[3:5] == (owner.lineno, owner.col_offset):
                        bound = Def(module, owner, owner.name)
                    else:
                        bound = self._bound(func, "")
                self.functions[func.qualname] = self._read(func, bound)
        self._names = {d.name.rsplit(".", 1)[-1] for d in self._defs.values()}
        for qualname, parser in self.functions.items():
            self._resolve_calls(self._defs[qualname], parser)
        scored: list[tuple[str, int, dict[str, CliFlag]]] = []
        for qualname in sorted(self._defs):
            flags = self._flags_of(qualname, frozenset())
            if flags:
                scored.append((qualname, len(reads & {f.dest for f in flags.values()}), flags))
        if not scored:
            return {}
        top = max(score for _, score, _ in scored)
        if top == 0:  # nothing the app reads: the largest command line
            return max((flags for _, _, flags in scored), key=len)
        out: dict[str, CliFlag] = {}
        builders: list[tuple[int, str]] = []
        for qualname, score, flags in scored:
            if score == top:
                for name, flag in flags.items():
                    out.setdefault(name, flag)
                cand = self._defs[qualname]
                if "." not in cand.name and cand.function:
                    builders.append((len(flags), f"{cand.module}:{cand.name}"))
        self.parsers = [name for _, name in sorted(builders)]
        return dict(sorted(out.items()))

    def _parser(self, key: str) -> _Parser | None:
        """What a function adds (``qualname@Class``: a classmethod called on a subclass)."""
        if key not in self.functions:
            qualname, _, bound = key.partition("@")
            cand = self._defs.get(qualname)
            func = self._node(cand) if cand is not None else None
            if cand is None or func is None:
                return None
            self.functions[key] = _Parser()  # a call cycle stops here
            parser = self._read(func, self._bound(func, bound))
            self._resolve_calls(cand, parser)
            self.functions[key] = parser
        return self.functions[key]

    def _node(self, cand: _Candidate) -> Def | None:
        """A candidate's node again (a classmethod read for another class it is called on)."""
        head, _, method = cand.name.partition(".")
        node = self.code.defs(cand.module).get(head)
        if method and isinstance(node, ast.ClassDef):
            node = next(
                (
                    s
                    for s in reversed(node.body)
                    if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef) and s.name == method
                ),
                None,
            )
        return Def(cand.module, node, cand.name) if node is not None else None

    def _resolve_calls(self, cand: _Candidate, parser: _Parser) -> None:
        func = Def(cand.module, ast.Pass(), cand.name)  # _callee reads its module and name
        for target, local in parser.pending:
            callee = self._callee(func, target, local)
            if callee is not None:
                parser.calls.append(callee)
        parser.pending = []

    def _bound(self, func: Def, bound: str) -> Def | None:
        """The class ``cls`` names in a method: the one it was called on, else its own."""
        if bound:
            module, _, name = bound.rpartition(".")
            node = self.code.defs(module).get(name)
            if isinstance(node, ast.ClassDef):
                return Def(module, node, name)
        if "." in func.name:
            node = self.code.defs(func.module).get(func.name.split(".")[0])
            if isinstance(node, ast.ClassDef):
                return Def(func.module, node, node.name)
        return None

    def _flags_of(self, qualname: str, seen: frozenset[str]) -> dict[str, CliFlag]:
        parser = self._parser(qualname)
        if parser is None or qualname in seen:
            return {}
        out: dict[str, CliFlag] = {}
        for callee in parser.calls:
            for name, flag in self._flags_of(callee, seen | {qualname}).items():
                out.setdefault(name, flag)
        for flag in parser.flags:
            out[flag.name] = flag
        return out

    # -- one function ------------------------------------------------------------------------
    def _read(self, func: Def, bound: Def | None) -> _Parser:
        out = _Parser()
        module = func.module
        local = local_imports(func.node, module, self.code.is_package(module))
        kwargs_of: dict[str, Def] = {}  # name -> the dataclass a helper turned into kwargs
        deleted: dict[str, set[str]] = {}
        loops: dict[str, str] = {}  # loop key variable -> kwargs name
        literal_loops: dict[str, list[dict[str, ast.AST]]] = {}  # for a, b in [(..), ..]
        body = (
            func.node.body if isinstance(func.node, ast.FunctionDef | ast.AsyncFunctionDef) else []
        )
        if isinstance(func.node, ast.Module):
            body = [
                s
                for s in func.node.body
                if not isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            ]
        nodes = walk_own(body)
        for node in nodes:
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Call)
                and node.value.args
            ):
                first = node.value.args[0]
                if isinstance(first, ast.Name) and first.id == "cls" and bound is not None:
                    cls: Def | None = bound
                else:
                    cls = self.code.resolve_class(module, first, local)
                if cls is not None:
                    for t in node.targets:
                        if isinstance(t, ast.Name):
                            kwargs_of[t.id] = cls
            elif isinstance(node, ast.Delete):
                for t in node.targets:
                    if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                        key = literal_str(t.slice)
                        if key:
                            deleted.setdefault(t.value.id, set()).add(key)
            elif isinstance(node, ast.For) and isinstance(node.iter, ast.List | ast.Tuple):
                rows = literal_rows(node)
                if rows:
                    literal_loops.update({name: rows for name in rows[0]})
            elif isinstance(node, ast.For) and isinstance(node.iter, ast.Call):
                it = node.iter.func
                if (
                    isinstance(it, ast.Attribute)
                    and it.attr == "items"
                    and isinstance(it.value, ast.Name)
                ):
                    target = node.target
                    if isinstance(target, ast.Tuple) and isinstance(target.elts[0], ast.Name):
                        loops[target.elts[0].id] = it.value.id
        for node in nodes:
            if not isinstance(node, ast.Call):
                continue
            if isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
                arg0 = node.args[0] if node.args else None
                loop_rows = literal_loops.get(arg0.id) if isinstance(arg0, ast.Name) else None
                for call in [substituted(node, row) for row in loop_rows] if loop_rows else [node]:
                    out.flags.extend(self._added(func, call, kwargs_of, deleted, loops))
            else:
                target = node.func
                last = target.attr if isinstance(target, ast.Attribute) else None
                if (last or getattr(target, "id", "")) in self._maybe:
                    out.pending.append((target, local))
        return out

    def _callee(self, func: Def, target: ast.expr, local: dict) -> str | None:
        last = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if last not in self._names:  # cheap: only a parser function's name can be one
            return None
        if (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Call)
            and dotted_name(target.value.func) == "super"
        ):
            cls_name = func.name.split(".")[0]
            cls = self.code.defs(func.module).get(cls_name)
            for base in getattr(cls, "bases", []):
                found = self.code.resolve_class(func.module, base, local)
                if found is not None:
                    qual = f"{found.qualname}.{target.attr}"
                    if qual in self._defs:
                        return qual
            return None
        name = dotted_name(target)
        if name is None:
            return None
        owner, _, attr = name.rpartition(".")
        owner_cls = (
            self.code.resolve_class(func.module, ast.parse(owner, mode="eval").body, local)
            if owner
            else None
        )
        if owner_cls is not None:
            method = self.code.method(owner_cls, attr)
            if method is not None and method.qualname in self._defs:
                bound = (
                    ""
                    if method.qualname == f"{owner_cls.qualname}.{attr}"
                    else f"@{owner_cls.qualname}"
                )
                return method.qualname + bound
            return None
        resolved = self.code.resolve(func.module, name, local)
        if isinstance(resolved, Def) and resolved.qualname in self._defs:
            return resolved.qualname
        return None

    def _added(
        self,
        func: Def,
        call: ast.Call,
        kwargs_of: dict[str, Def],
        deleted: dict[str, set[str]],
        loops: dict[str, str],
    ) -> list[CliFlag]:
        names = [s for a in call.args if (s := literal_str(a)) is not None and s.startswith("-")]
        spread, kw = argument_keywords(call)
        file = self.code.file(func.module)
        fstring = next((a for a in call.args if isinstance(a, ast.JoinedStr)), None)
        if not names and fstring is not None:
            key = loop_key(fstring)
            source = loops.get(key or "")
            cls = kwargs_of.get(source or "")
            if cls is None:
                return []
            skip = deleted.get(source or "", set())
            return [
                self._from_field(name, f, cls, file, call)
                for name, f in dataclass_fields(self.code, cls).items()
                if name not in skip
            ]
        longs = [n for n in names if n.startswith("--")]
        if not longs:
            return []
        dest = literal_str(kw.get("dest")) or longs[0][2:].replace("-", "_")
        field_flag = None
        if isinstance(spread, ast.Subscript) and isinstance(spread.value, ast.Name):
            cls = kwargs_of.get(spread.value.id)
            key = literal_str(spread.slice)
            if cls is not None and key:
                found = dataclass_fields(self.code, cls).get(key)
                if found is not None:
                    field_flag = self._from_field(key, found, cls, file, call, longs[0])
        action = kw.get("action")
        action_text = ast.unparse(action) if action is not None else ""
        type_node = kw.get("type")
        type_text = ast.unparse(type_node) if type_node is not None else None
        default = kw.get("default")
        if action_text in ("'store_true'", "'store_false'"):
            type_text = "bool"
            if default is None:  # argparse's own default for the action
                default = ast.Constant(action_text == "'store_false'")
        deprecated = deprecation(kw)
        aliases = tuple(n for n in names if n != longs[0])
        if field_flag is not None:
            return [
                CliFlag(
                    longs[0],
                    dest,
                    type_text or field_flag.type,
                    ast.unparse(default) if default is not None else field_flag.default,
                    aliases,
                    deprecated or field_flag.deprecated,
                    file,
                    call.lineno,
                    field_flag.negatable or "BooleanOptionalAction" in action_text,
                )
            ]
        return [
            CliFlag(
                longs[0],
                dest,
                type_text,
                ast.unparse(default) if default is not None else None,
                aliases,
                deprecated,
                file,
                call.lineno,
                "BooleanOptionalAction" in action_text,
            )
        ]

    def _from_field(
        self, name: str, f: FieldInfo, cls: Def, file: str, call: ast.Call, flag: str | None = None
    ) -> CliFlag:
        deprecated = f.doc if says_deprecated(f.doc) else None
        return CliFlag(
            flag or "--" + name.replace("_", "-"),
            name,
            f.annotation,
            f.default,
            (),
            deprecated,
            file,
            call.lineno,
            is_bool(f.annotation),
        )
