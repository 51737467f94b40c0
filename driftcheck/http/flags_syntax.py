"""The argparse forms the flag reader recognises: ``add_argument`` keywords and spreads,
deprecation texts, dataclass fields as flags, switches, loops over literal tuples."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import cast

from driftcheck.http.hostcode import Def, HostCode, dotted_name, literal_str

#: Text that says the flag itself is deprecated: a leading "[DEPRECATED]" / "(Deprecated)" /
#: "Deprecated:", or "is/has been deprecated", "deprecated in favor of", "deprecated and will be
#: removed". Not "deprecated quantization methods" (about something else), nor "will be
#: deprecated" (not yet).
DEPRECATED_TEXT = re.compile(
    r"^\W*deprecated\b|\b(?:is|are|was|has been|have been|now)\s+deprecated\b"
    r"|\bdeprecated\s*:|\bdeprecated\s+(?:in favou?r|and will|since|as of|in v?\d|;|,\s*use)",
    re.IGNORECASE,
)


def argument_keywords(call: ast.Call) -> tuple[ast.AST | None, dict[str, ast.AST]]:
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
    return text is not None and bool(text) and DEPRECATED_TEXT.search(text) is not None


def deprecation(kw: dict[str, ast.AST]) -> str | None:
    """An ``add_argument`` call's deprecation: ``deprecated="message"``, ``deprecated=True`` (with
    the help text when it says so), or a help text that says the flag is deprecated."""
    help_text = help_text_of(kw.get("help"))
    value = kw.get("deprecated")
    if isinstance(value, ast.Constant) and isinstance(value.value, str) and value.value:
        return value.value
    if isinstance(value, ast.Constant) and value.value:
        return help_text if says_deprecated(help_text) else "deprecated"
    if says_deprecated(help_text):
        return help_text
    return None


@dataclass(frozen=True)
class FieldInfo:
    annotation: str
    default: str | None
    doc: str | None


def dataclass_fields(code: HostCode, cls: Def, depth: int = 0) -> dict[str, FieldInfo]:
    """Annotated class attributes through the host bases (the class's own win)."""
    out: dict[str, FieldInfo] = {}
    node = cast(ast.ClassDef, cls.node)  # asked of classes only
    if depth < 10:
        for base in node.bases:
            found = code.resolve_class(cls.module, base)
            if found is not None:
                out.update(dataclass_fields(code, found, depth + 1))
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
            out[stmt.target.id] = FieldInfo(annotation, field_default(stmt.value), doc)
    return out


def field_default(value: ast.AST | None) -> str | None:
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


def is_bool(annotation: str) -> bool:
    """``bool``, ``bool | None``, ``Optional[bool]``, ``SkipValidation[bool]``: a switch
    (``bool | str`` and ``list[bool]`` are not)."""
    try:
        node = ast.parse(annotation, mode="eval").body
    except SyntaxError:
        return False
    kinds = type_kinds(node)
    return kinds is not None and kinds - {"None"} == {"bool"}


CONTAINERS = ("list", "dict", "set", "tuple", "frozenset", "Literal", "Sequence", "Mapping")


def type_kinds(node: ast.AST) -> set[str] | None:
    """The types a (union) annotation allows, wrappers such as ``Annotated[X, ...]`` opened."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left, right = type_kinds(node.left), type_kinds(node.right)
        return None if left is None or right is None else left | right
    if isinstance(node, ast.Constant) and node.value is None:
        return {"None"}
    if isinstance(node, ast.Subscript):
        head = (dotted_name(node.value) or "").rsplit(".", 1)[-1]
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if head in CONTAINERS:
            return {head}
        if head in ("Optional", "Union"):
            out: set[str] = set() if head == "Union" else {"None"}
            for arg in args:
                kinds = type_kinds(arg)
                if kinds is None:
                    return None
                out |= kinds
            return out
        return type_kinds(args[0])  # Annotated[X, ...], SkipValidation[X]
    name = dotted_name(node)
    return {name.rsplit(".", 1)[-1]} if name else None


def literal_rows(loop: ast.For) -> list[dict[str, ast.AST]]:
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
    for item in cast(ast.List | ast.Tuple, loop.iter).elts:  # the caller checks the literal
        values = item.elts if isinstance(item, ast.Tuple) and len(names) > 1 else [item]
        if len(values) != len(names):
            return []
        rows.append(dict(zip(names, values, strict=True)))
    return rows


def substituted(call: ast.Call, row: dict[str, ast.AST]) -> ast.Call:
    """``call`` with the loop's names replaced by one iteration's values."""

    class Sub(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            return row.get(node.id, node)

    import copy

    out = Sub().visit(copy.deepcopy(call))
    return ast.copy_location(out, call)


def help_text_of(node: ast.AST | None) -> str | None:
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
        left, right = help_text_of(node.left), help_text_of(node.right)
        return (left or "") + (right or "") or None
    return None


def loop_key(fstring: ast.JoinedStr) -> str | None:
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


def parser_candidates(module: str, tree: ast.Module) -> list[tuple[Def, ast.ClassDef | None]]:
    """Top-level functions, methods of top-level classes (with their class), and the module
    body itself."""
    out: list[tuple[Def, ast.ClassDef | None]] = [(Def(module, tree, "<module>"), None)]
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            out.append((Def(module, stmt, stmt.name), None))
        elif isinstance(stmt, ast.ClassDef):
            for inner in stmt.body:
                if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef):
                    out.append((Def(module, inner, f"{stmt.name}.{inner.name}"), stmt))
    return out


def walk_own(body: list[ast.stmt]) -> list[ast.AST]:
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
