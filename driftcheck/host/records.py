"""Constructors of record classes whose ``__init__`` is made from their annotated fields by a
base class outside the host: ``msgspec.Struct`` (an unknown keyword raises ``TypeError``, even
with the value ``None``), ``typing.NamedTuple``, and pydantic's ``BaseModel`` (keywords only;
unknown keywords are ignored unless the model forbids extras; aliases make the accepted names
other than the fields', so a model with aliases is not modelled)."""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from driftcheck.host.signature import Param, Signature, dataclass_fields


class Klass(Protocol):
    """A host class as the API model finds it (``host.api.Found``)."""

    obj: Any

    @property
    def file(self) -> str: ...

    @property
    def line(self) -> int: ...


K = TypeVar("K", bound=Klass)


#: External base -> the kind of record it makes.
RECORD_BASES = {
    "msgspec.Struct": "struct",
    "typing.NamedTuple": "namedtuple",
    "pydantic.BaseModel": "model",
    "pydantic.main.BaseModel": "model",
}


def record_kind(chain: Sequence[Klass]) -> str | None:
    """The record kind a class's host MRO reaches (None: not a record class)."""
    for klass in chain:
        for base in getattr(klass.obj, "bases", []):
            kind = RECORD_BASES.get(getattr(base, "canonical_path", None) or "")
            if kind is not None:
                return kind
    return None


def record_init(
    cls: K,
    chain: Sequence[K],
    kind: str,
    class_node: Callable[[K], ast.ClassDef | None],
) -> Signature | None:
    """The ``__init__`` a record class's fields make, or None when it cannot be known."""
    params: dict[str, Param] = {}
    forbid = False
    for klass in reversed(chain):
        node = class_node(klass)
        if node is None:
            return None
        kw_only = kind == "model" or _class_keyword(node, "kw_only") is True
        for param in dataclass_fields(node, kw_only=kw_only):
            if kind == "model" and _has_alias(node, param.name):
                return None
            params.pop(param.name, None)
            params[param.name] = param
        forbid = forbid or (kind == "model" and _forbids_extra(node))
    ordered = [p for p in params.values() if p.kind != "keyword_only"]
    ordered += [p for p in params.values() if p.kind == "keyword_only"]
    if kind == "model" and not forbid:
        ordered.append(Param("data", "var_keyword", has_default=True))
    return Signature(params=ordered, returns=None, file=cls.file, line=cls.line)


def _class_keyword(node: ast.ClassDef, name: str) -> object:
    for kw in node.keywords:
        if kw.arg == name and isinstance(kw.value, ast.Constant):
            return kw.value.value
    return None


def _forbids_extra(node: ast.ClassDef) -> bool:
    """``model_config = ConfigDict(extra="forbid")``, ``class Config: extra = "forbid"``, or
    ``class M(BaseModel, extra="forbid")``."""
    text = ast.unparse(node)
    return "forbid" in text and ("extra" in text)


def _has_alias(node: ast.ClassDef, field: str) -> bool:
    for stmt in node.body:
        if (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and stmt.target.id == field
            and isinstance(stmt.value, ast.Call)
        ):
            return any(k.arg in ("alias", "validation_alias") for k in stmt.value.keywords)
    return False
