"""Pydantic body models, read from class bodies: fields through the bases (nearest class wins),
required or not, alias, default, nested models, and ``extra`` (``model_config = ConfigDict(...)``,
a ``model_config`` dict, or a pydantic-v1 ``class Config``), inherited like pydantic does.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace
from typing import cast

from driftcheck.http.hostcode import Def, HostCode, dotted_name, keyword, literal_str
from driftcheck.http.surface_model import BodyModel, ModelField

_PYDANTIC_BASES = ("pydantic.BaseModel", "pydantic.main.BaseModel")
_WRAPPERS = ("Optional", "Annotated", "list", "List", "Sequence", "Union", "tuple", "Tuple")
_NOT_FIELDS = ("model_config", "Config")


@dataclass
class ModelReader:
    """Reads body models (and the models their fields name) on demand, each once."""

    code: HostCode
    models: dict[str, BodyModel] = field(default_factory=dict)
    _is_model: dict[str, bool] = field(default_factory=dict)

    def is_body_model(self, cls: Def, _depth: int = 0) -> bool:
        """True when the class derives from pydantic's ``BaseModel`` (through host classes)."""
        if cls.qualname in self._is_model:
            return self._is_model[cls.qualname]
        self._is_model[cls.qualname] = False
        result = False
        for base in cast(ast.ClassDef, cls.node).bases:  # asked of classes only
            if _names_pydantic_base(self.code, cls.module, base):
                result = True
            else:
                found = self.code.resolve_class(cls.module, base)
                if found is not None and _depth < 20 and self.is_body_model(found, _depth + 1):
                    result = True
            if result:
                break
        self._is_model[cls.qualname] = result
        return result

    def model_of(
        self, module: str, annotation: ast.AST | None, local: dict | None = None
    ) -> Def | None:
        """The body model an annotation names (``X``, ``X | None``, ``Annotated[X, ...]``, or a
        type alias of a union of models, read as one model: see :meth:`read`)."""
        found = self.models_in(module, annotation, local)
        return found[0] if found else None

    def models_in(
        self, module: str, annotation: ast.AST | None, local: dict | None = None
    ) -> list[Def]:
        """Every body model an annotation names (each arm of a union)."""
        out: list[Def] = []
        for expr in _class_names(annotation):
            cls = self._named(module, expr, local)
            if cls is not None and cls not in out:
                out.append(cls)
        return out

    def _named(self, module: str, expr: ast.AST, local: dict | None) -> Def | None:
        name = dotted_name(expr)
        found = self.code.resolve(module, name, local) if name else None
        if not isinstance(found, Def):
            return None
        if found.kind == "ClassDef":
            return found if self.is_body_model(found) else None
        if self._alias_members(found):
            return found
        return None

    def _alias_members(self, alias: Def) -> list[Def]:
        """The models a type alias (``X: TypeAlias = A | B``) unites."""
        if alias.kind not in ("Assign", "AnnAssign"):
            return []
        value = getattr(alias.node, "value", None)
        if value is None:
            return []
        out: list[Def] = []
        for expr in _class_names(value):
            cls = self.code.resolve_class(alias.module, expr)
            if cls is not None and self.is_body_model(cls) and cls not in out:
                out.append(cls)
        return out

    def read(self, cls: Def) -> BodyModel:
        """The model's fields (bases first, the class's own last) and ``extra``."""
        if cls.qualname in self.models:
            return self.models[cls.qualname]
        if not isinstance(cls.node, ast.ClassDef):
            return self._read_union(cls)
        node: ast.ClassDef = cls.node
        placeholder = BodyModel(cls.qualname, self.code.file(cls.module), node.lineno)
        self.models[cls.qualname] = placeholder  # a model that names itself stops here
        fields: dict[str, ModelField] = {}
        extra: str | None = None
        by_name: bool | None = None
        bases: list[str] = []
        for base in node.bases:
            found = self.code.resolve_class(cls.module, base)
            if found is not None and self.is_body_model(found):
                inherited = self.read(found)
                fields.update(inherited.fields)
                extra = inherited.extra if inherited.extra is not None else extra
                by_name = by_name or inherited.by_name
                bases.append(found.qualname)
            elif (name := dotted_name(base)) is not None:
                bases.append(name)
        own_extra = _extra_value(_config(node, "extra"))
        extra = own_extra if own_extra is not None else extra
        own_by_name = [_config(node, key) for key in _BY_NAME]
        if any(v is not None for v in own_by_name):
            by_name = any(isinstance(v, ast.Constant) and v.value is True for v in own_by_name)
        for stmt in node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                f = self._field(cls, stmt)
                if f is not None:
                    fields[f.name] = f
        model = BodyModel(
            cls.qualname,
            placeholder.file,
            placeholder.line,
            fields,
            extra,
            tuple(bases),
            by_name=bool(by_name),
        )
        self.models[cls.qualname] = model
        return model

    def _read_union(self, alias: Def) -> BodyModel:
        """A union alias as one model: a key any member accepts is a field, required only where
        every member requires it; ``extra`` is the most lenient member's."""
        members = [self.read(m) for m in self._alias_members(alias)]
        fields: dict[str, ModelField] = {}
        for m in members:
            for name, f in m.fields.items():
                if name not in fields:
                    required = all(name in o.fields and o.fields[name].required for o in members)
                    fields[name] = replace(f, required=required)
        extras = [m.extra for m in members]
        extra = next((e for e in ("allow", "ignore", None, "forbid") if e in extras), None)
        model = BodyModel(
            alias.qualname,
            self.code.file(alias.module),
            getattr(alias.node, "lineno", 0),
            fields,
            extra,
            (),
            tuple(m.qualname for m in members),
            by_name=any(m.by_name for m in members),
        )
        self.models[alias.qualname] = model
        return model

    def _field(self, cls: Def, stmt: ast.AnnAssign) -> ModelField | None:
        name = cast(ast.Name, stmt.target).id  # the caller takes name targets only
        annotation = ast.unparse(stmt.annotation)
        if (
            name.startswith("_")
            or name in _NOT_FIELDS
            or annotation.startswith(("ClassVar", "typing.ClassVar"))
        ):
            return None
        value = stmt.value
        required = value is None
        default = None if value is None else ast.unparse(value)
        alias = None
        info = _field_call(value) or _annotated_field(stmt.annotation)
        if info is not None:
            has_default = bool(info.args) and not _is_ellipsis(info.args[0])
            has_default = has_default or any(
                k.arg in ("default", "default_factory") for k in info.keywords
            )
            if info is _field_call(value):
                required = not has_default
                default = _default_text(info)
            alias = literal_str(keyword(info, "alias")) or literal_str(
                keyword(info, "validation_alias")
            )
        nested = self.model_of(cls.module, stmt.annotation)
        if nested is not None and nested.qualname != cls.qualname:
            self.read(nested)
        return ModelField(
            name=name,
            required=required,
            type=annotation,
            default=default,
            alias=alias,
            model=nested.qualname if nested else None,
            file=self.code.file(cls.module),
            line=stmt.lineno,
        )


def _names_pydantic_base(code: HostCode, module: str, base: ast.AST) -> bool:
    name = dotted_name(base)
    if name is None:
        return False
    head, _, rest = name.partition(".")
    imported = code.imports(module).get(head)
    if imported is None:
        return False
    target, attr = imported
    full = ".".join(p for p in (target, attr, rest) if p)
    return full in _PYDANTIC_BASES


def _class_names(annotation: ast.AST | None) -> list[ast.AST]:
    """Names inside an annotation that could be classes (wrappers and unions opened)."""
    if annotation is None:
        return []
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return []
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return _class_names(annotation.left) + _class_names(annotation.right)
    if isinstance(annotation, ast.Subscript):
        head = dotted_name(annotation.value) or ""
        inner = annotation.slice
        parts = inner.elts if isinstance(inner, ast.Tuple) else [inner]
        if head.rsplit(".", 1)[-1] == "Annotated":
            parts = parts[:1]
        out: list[ast.AST] = []
        for part in parts:
            out.extend(_class_names(part))
        return out
    if isinstance(annotation, ast.Name | ast.Attribute):
        return [annotation]
    return []


def _field_call(value: ast.AST | None) -> ast.Call | None:
    if (
        isinstance(value, ast.Call)
        and (dotted_name(value.func) or "").rsplit(".", 1)[-1] == "Field"
    ):
        return value
    return None


def _annotated_field(annotation: ast.AST) -> ast.Call | None:
    """``Annotated[X, Field(alias=...)]``: the ``Field`` call of the annotation."""
    if isinstance(annotation, ast.Subscript) and isinstance(annotation.slice, ast.Tuple):
        if (dotted_name(annotation.value) or "").endswith("Annotated"):
            for part in annotation.slice.elts[1:]:
                if (call := _field_call(part)) is not None:
                    return call
    return None


def _is_ellipsis(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is Ellipsis


def _default_text(call: ast.Call) -> str | None:
    if call.args and not _is_ellipsis(call.args[0]):
        return ast.unparse(call.args[0])
    for k in call.keywords:
        if k.arg == "default":
            return ast.unparse(k.value)
        if k.arg == "default_factory":
            return f"{ast.unparse(k.value)}()"
    return None


#: The settings under which a model takes a field with an alias by its name too.
_BY_NAME = ("populate_by_name", "validate_by_name", "allow_population_by_field_name")


def _config(node: ast.ClassDef, key: str) -> ast.AST | None:
    """The value a class body sets a model setting to itself (``model_config =
    ConfigDict(key=...)`` or a dict literal, pydantic 1's ``class Config: key = ...``, or a
    class keyword ``class M(BaseModel, key=...)``), or None."""
    for stmt in node.body:
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) and stmt.targets else None
        if isinstance(stmt, ast.AnnAssign):
            target = stmt.target
        if isinstance(target, ast.Name) and target.id == "model_config":
            value = cast(ast.Assign | ast.AnnAssign, stmt).value  # only they have a target
            if isinstance(value, ast.Call) and (found := keyword(value, key)) is not None:
                return found
            if isinstance(value, ast.Dict):
                for k, v in zip(value.keys, value.values, strict=False):
                    if literal_str(k) == key:
                        return v
        if isinstance(stmt, ast.ClassDef) and stmt.name == "Config":
            for inner in stmt.body:
                if isinstance(inner, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == key for t in inner.targets
                ):
                    return inner.value
    for kw in node.keywords:
        if kw.arg == key:
            return kw.value
    return None


def _extra_value(node: ast.AST | None) -> str | None:
    text = literal_str(node)
    if text is None and isinstance(node, ast.Attribute):
        text = node.attr  # Extra.forbid
    return text if text in ("forbid", "allow", "ignore") else None
