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

from driftcheck.http.hostcode import Def, HostCode, dotted_name, literal_str, local_imports
from driftcheck.http.surface_model import CliFlag

#: Text that says the flag itself is deprecated: a leading "[DEPRECATED]" / "(Deprecated)" /
#: "Deprecated:", or "is/has been deprecated", "deprecated in favor of", "deprecated and will be
#: removed". Not "deprecated quantization methods" (about something else), nor "will be
#: deprecated" (not yet).
_DEPRECATED = re.compile(
    r"^\W*deprecated\b|\b(?:is|are|was|has been|have been|now)\s+deprecated\b"
    r"|\bdeprecated\s*:|\bdeprecated\s+(?:in favou?r|and will|since|as of|in v?\d|;|,\s*use)",
    re.IGNORECASE,
)


@dataclass
class _Parser:
    """What one function adds: its own flags and the parser functions it calls."""

    flags: list[CliFlag] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)


@dataclass
class FlagReader:
    code: HostCode
    functions: dict[str, _Parser] = field(default_factory=dict)
    #: Top-level functions whose command line is the server's (``module:function``), once read.
    parsers: list[str] = field(default_factory=list)
    _defs: dict[str, Def] = field(default_factory=dict)
    _names: set[str] = field(default_factory=set)

    def read(self, reads: set[str]) -> dict[str, CliFlag]:
        """The flags of the command line that best covers ``reads`` (``args.<dest>`` names)."""
        for module in self.code.modules_containing("add_argument"):
            tree = self.code.parse(module)
            if tree is not None:
                for func in _functions(module, tree):
                    self._defs[func.qualname] = func
        self._names = {d.name.rsplit(".", 1)[-1] for d in self._defs.values()}
        for qualname in list(self._defs):
            self._parser(qualname)
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
                func = self._defs[qualname]
                if "." not in func.name and isinstance(func.node, ast.FunctionDef):
                    builders.append((len(flags), f"{func.module}:{func.name}"))
        self.parsers = [name for _, name in sorted(builders)]
        return dict(sorted(out.items()))

    def _parser(self, key: str) -> _Parser | None:
        """What a function adds (``qualname@Class``: a classmethod called on a subclass)."""
        if key not in self.functions:
            qualname, _, bound = key.partition("@")
            func = self._defs.get(qualname)
            if func is None:
                return None
            self.functions[key] = _Parser()  # a call cycle stops here
            self.functions[key] = self._read(func, self._bound(func, bound))
        return self.functions[key]

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
        nodes = _walk_own(body)
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
                rows = _literal_rows(node)
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
                first = node.args[0] if node.args else None
                rows = literal_loops.get(first.id) if isinstance(first, ast.Name) else None
                for call in [_substituted(node, row) for row in rows] if rows else [node]:
                    out.flags.extend(self._added(func, call, kwargs_of, deleted, loops))
            else:
                callee = self._callee(func, node, local)
                if callee is not None:
                    out.calls.append(callee)
        return out

    def _callee(self, func: Def, call: ast.Call, local: dict) -> str | None:
        target = call.func
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
        cls = (
            self.code.resolve_class(func.module, ast.parse(owner, mode="eval").body, local)
            if owner
            else None
        )
        if cls is not None:
            method = self.code.method(cls, attr)
            if method is not None and method.qualname in self._defs:
                bound = "" if method.qualname == f"{cls.qualname}.{attr}" else f"@{cls.qualname}"
                return method.qualname + bound
            return None
        found = self.code.resolve(func.module, name, local)
        if isinstance(found, Def) and found.qualname in self._defs:
            return found.qualname
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
        spread, kw = _keywords(call)
        file = self.code.file(func.module)
        fstring = next((a for a in call.args if isinstance(a, ast.JoinedStr)), None)
        if not names and fstring is not None:
            key = _loop_key(fstring)
            source = loops.get(key or "")
            cls = kwargs_of.get(source or "")
            if cls is None:
                return []
            skip = deleted.get(source or "", set())
            return [
                self._from_field(name, f, cls, file, call)
                for name, f in _dataclass_fields(self.code, cls).items()
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
                found = _dataclass_fields(self.code, cls).get(key)
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
        deprecated = _deprecation(kw)
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
        self, name: str, f: _Field, cls: Def, file: str, call: ast.Call, flag: str | None = None
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
            _is_bool(f.annotation),
        )


def _keywords(call: ast.Call) -> tuple[ast.AST | None, dict[str, ast.AST]]:
    """The ``**kwargs[...]`` spread of an ``add_argument`` call and its literal keywords
    (``**{**kw["x"], "default": None}`` included; the call's own keywords win)."""
    spread: ast.AST | None = None
    out: dict[str, ast.AST] = {}
    for k in call.keywords:
        if k.arg is not None:
            continue
        if isinstance(k.value, ast.Dict):
            for key, value in zip(k.value.keys, k.value.values, strict=False):
                if key is None:
                    spread = spread or value
                elif (name := literal_str(key)) is not None:
                    out[name] = value
        else:
            spread = spread or k.value
    out.update({k.arg: k.value for k in call.keywords if k.arg is not None})
    return spread, out


def says_deprecated(text: str | None) -> bool:
    """Whether a help text or docstring says the flag itself is deprecated."""
    return bool(text) and _DEPRECATED.search(text) is not None  # type: ignore[arg-type]


def _deprecation(kw: dict[str, ast.AST]) -> str | None:
    help_text = _text(kw.get("help"))
    value = kw.get("deprecated")
    if isinstance(value, ast.Constant) and value.value:
        return help_text if says_deprecated(help_text) else "deprecated"
    if says_deprecated(help_text):
        return help_text
    return None


@dataclass(frozen=True)
class _Field:
    annotation: str
    default: str | None
    doc: str | None


def _dataclass_fields(code: HostCode, cls: Def, depth: int = 0) -> dict[str, _Field]:
    """Annotated class attributes through the host bases (the class's own win)."""
    out: dict[str, _Field] = {}
    node: ast.ClassDef = cls.node  # type: ignore[assignment]
    if depth < 10:
        for base in node.bases:
            found = code.resolve_class(cls.module, base)
            if found is not None:
                out.update(_dataclass_fields(code, found, depth + 1))
    for i, stmt in enumerate(node.body):
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            annotation = ast.unparse(stmt.annotation)
            if annotation.startswith(("ClassVar", "typing.ClassVar", "InitVar")):
                continue
            doc = None
            if i + 1 < len(node.body):
                nxt = node.body[i + 1]
                if isinstance(nxt, ast.Expr):
                    doc = literal_str(nxt.value)
            out[stmt.target.id] = _Field(annotation, _field_default(stmt.value), doc)
    return out


def _field_default(value: ast.AST | None) -> str | None:
    """A field's default: the value, or what ``field(...)`` / ``Field(...)`` says it is."""
    if value is None:
        return None
    if isinstance(value, ast.Call) and (dotted_name(value.func) or "").rsplit(".", 1)[-1] in (
        "field",
        "Field",
    ):
        for k in value.keywords:
            if k.arg == "default":
                return ast.unparse(k.value)
            if k.arg == "default_factory":
                return f"{ast.unparse(k.value)}()"
        if value.args:
            return ast.unparse(value.args[0])
        return None
    return ast.unparse(value)


def _is_bool(annotation: str) -> bool:
    """``bool``, ``bool | None``, ``Optional[bool]``, ``SkipValidation[bool]``: a switch
    (``bool | str`` and ``list[bool]`` are not)."""
    try:
        node = ast.parse(annotation, mode="eval").body
    except SyntaxError:
        return False
    kinds = _kinds(node)
    return kinds is not None and kinds - {"None"} == {"bool"}


_CONTAINERS = ("list", "dict", "set", "tuple", "frozenset", "Literal", "Sequence", "Mapping")


def _kinds(node: ast.AST) -> set[str] | None:
    """The types a (union) annotation allows, wrappers such as ``Annotated[X, ...]`` opened."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left, right = _kinds(node.left), _kinds(node.right)
        return None if left is None or right is None else left | right
    if isinstance(node, ast.Constant) and node.value is None:
        return {"None"}
    if isinstance(node, ast.Subscript):
        head = (dotted_name(node.value) or "").rsplit(".", 1)[-1]
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if head in _CONTAINERS:
            return {head}
        if head in ("Optional", "Union"):
            out: set[str] = set() if head == "Union" else {"None"}
            for arg in args:
                kinds = _kinds(arg)
                if kinds is None:
                    return None
                out |= kinds
            return out
        return _kinds(args[0])  # Annotated[X, ...], SkipValidation[X]
    name = dotted_name(node)
    return {name.rsplit(".", 1)[-1]} if name else None


def _literal_rows(loop: ast.For) -> list[dict[str, ast.AST]]:
    """``for arg, kind in [("--a", str), ("--b", bool)]``: each iteration's names and values."""
    target = loop.target
    names = (
        [t.id for t in target.elts if isinstance(t, ast.Name)]
        if isinstance(target, ast.Tuple)
        else [target.id]
        if isinstance(target, ast.Name)
        else []
    )
    rows: list[dict[str, ast.AST]] = []
    for item in loop.iter.elts:  # type: ignore[attr-defined]
        values = item.elts if isinstance(item, ast.Tuple) and len(names) > 1 else [item]
        if len(values) != len(names):
            return []
        rows.append(dict(zip(names, values, strict=True)))
    return rows


def _substituted(call: ast.Call, row: dict[str, ast.AST]) -> ast.Call:
    """``call`` with the loop's names replaced by one iteration's values."""

    class Sub(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            return row.get(node.id, node)

    import copy

    out = Sub().visit(copy.deepcopy(call))
    return ast.copy_location(out, call)


def _text(node: ast.AST | None) -> str | None:
    """A help text: a literal, concatenated literals, or an f-string (its fields as ``{...}``,
    a field that is a literal as itself)."""
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            inner = value.value if isinstance(value, ast.FormattedValue) else value
            text = literal_str(inner)
            parts.append(text if text is not None else "{...}")
        return "".join(parts) or None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left), _text(node.right)
        return (left or "") + (right or "") or None
    return None


def _loop_key(fstring: ast.JoinedStr) -> str | None:
    """``f"--{key.replace('_', '-')}"``: ``key``."""
    if not (fstring.values and literal_str(fstring.values[0]) == "--"):
        return None
    for value in fstring.values[1:]:
        if isinstance(value, ast.FormattedValue):
            inner = value.value
            if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute):
                inner = inner.func.value
            if isinstance(inner, ast.Name):
                return inner.id
    return None


def _functions(module: str, tree: ast.Module) -> list[Def]:
    """Top-level functions, methods of top-level classes, and the module body itself."""
    out = [Def(module, tree, "<module>")]
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            out.append(Def(module, stmt, stmt.name))
        elif isinstance(stmt, ast.ClassDef):
            for inner in stmt.body:
                if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef):
                    out.append(Def(module, inner, f"{stmt.name}.{inner.name}"))
    return out


def _walk_own(body: list[ast.stmt]) -> list[ast.AST]:
    """Every node of ``body``, not entering nested functions or classes."""
    out: list[ast.AST] = []
    todo: list[ast.AST] = list(reversed(body))
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        todo.extend(reversed(list(ast.iter_child_nodes(node))))
    return out
