"""Call signatures of host functions and constructors: a function's own parameters (with the
keywords it forwards), a class's ``__init__``/``__new__``, or the ``__init__`` that dataclass,
attrs, pydantic-dataclass, PEP 681 and record bases make from the fields. Each signature is kept in
the host snapshot: synthesising one can mean parsing a large host module."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import replace
from typing import Any, cast

import griffe

from driftcheck.host.forwarding import forwarded, passed_through
from driftcheck.host.objects import Found, Lookup, canonical
from driftcheck.host.records import record_init, record_kind
from driftcheck.host.signature import Param, Signature, dataclass_fields, signature_of_function

#: attrs' class decorators: its ``__init__`` takes a private field ``_x`` as ``x``.
ATTRS_DECORATORS = {
    "attr.s",
    "attr.attrs",
    "attr.define",
    "attr.frozen",
    "attr.mutable",
    "attr.dataclass",
    "attrs.define",
    "attrs.frozen",
    "attrs.mutable",
}
DATACLASS_DECORATORS = {
    "dataclasses.dataclass",
    "pydantic.dataclasses.dataclass",
    *ATTRS_DECORATORS,
}
TRANSFORM_MARKERS = {"typing.dataclass_transform", "typing_extensions.dataclass_transform"}


class Signatures:
    """The signature part of :class:`driftcheck.host.api.HostAPI` (a base class of it)."""

    _sig_cache: dict[str, Signature | None]
    resolve: Callable[..., Lookup]
    mro: Callable[..., tuple[list[Found], bool]]
    fact: Callable[[str, Callable[[], object]], Any]
    owns: Callable[[str], bool]
    class_node: Callable[[Found], ast.ClassDef | None]
    def_node: Callable[[Found], ast.AST | None]
    _follow: Callable[..., Lookup]

    def signature(self, found: Found) -> Signature | None:
        """Call signature of a function or of a class's constructor; None when unknowable."""
        if found.path in self._sig_cache:
            return self._sig_cache[found.path]
        sig: Signature | None = None
        obj = found.obj
        self._sig_cache[found.path] = None  # a forwarding cycle reads as unknown

        def compute() -> dict | None:
            made: Signature | None = None
            if isinstance(obj, griffe.Function):
                made = signature_of_function(obj, bound=_is_bound_method(obj), file=found.file)
                made = self._forwarded(found, made)
                made = self._keyword_aliases(found, made)
            elif isinstance(obj, griffe.Class):
                made = self._constructor(found)
            return made.to_json() if made is not None else None

        # Kept in the snapshot: synthesising one can mean parsing a large host module.
        raw = self.fact(f"signature:{found.path}:{found.line}", compute)
        sig = Signature.from_json(raw) if isinstance(raw, dict) else None
        self._sig_cache[found.path] = sig
        return sig

    def _keyword_aliases(self, found: Found, sig: Signature) -> Signature:
        """Keywords a decorator takes for a parameter under an old name
        (``@deprecate_kwarg(old_arg_name="line_terminator", new_arg_name="lineterminator")``):
        a decorator call whose two string arguments are an unknown name and a parameter."""
        node = self.def_node(found)
        extra: list[Param] = []
        for deco in getattr(node, "decorator_list", []):
            if not isinstance(deco, ast.Call):
                continue
            texts = [
                a.value
                for a in (*deco.args, *(k.value for k in deco.keywords))
                if isinstance(a, ast.Constant) and isinstance(a.value, str)
            ]
            if len(texts) != 2 or any(not t.isidentifier() for t in texts):
                continue
            known = [t for t in texts if sig.param(t) is not None]
            unknown = [t for t in texts if sig.param(t) is None]
            # ``new`` is always found: ``known`` holds only names the signature has.
            if len(known) == 1 and len(unknown) == 1 and (new := sig.param(known[0])) is not None:
                extra.append(
                    Param(
                        unknown[0], "keyword_only", True, "None", new.annotation, alias_of=new.name
                    )
                )
        if not extra:
            return sig
        return replace(sig, params=[*sig.params, *extra])

    def _forwarded(self, found: Found, sig: Signature) -> Signature:
        """``sig`` with ``**kwargs`` replaced by the callee they are forwarded to."""
        if not sig.accepts_var_keyword:
            return sig
        module = found.obj.module.path

        def callee(func: ast.expr) -> Signature | None:
            dotted = ast.unparse(func)
            if dotted.startswith("self.") or "(" in dotted:
                return None
            for path in (f"{module}.{dotted}", dotted):
                got = self.resolve(path) if self.owns(path) else None
                if isinstance(got, Found) and got.kind in ("class", "function"):
                    return self.signature(got)
            return None

        node = self.def_node(found)
        through = passed_through(sig, node)
        if through is not None and (whole := callee(through)) is not None:
            return whole  # ``def f(*a, **k): return g(*a, **k)`` binds as ``g`` does
        return forwarded(sig, node, callee)

    def _constructor(self, cls: Found) -> Signature | None:
        chain, complete = self.mro(cls)
        kind = record_kind(chain)
        if kind is not None and not any(
            s in k.obj.members for k in chain for s in ("__init__", "__new__")
        ):
            return record_init(cls, chain, kind, self.class_node)
        for klass in chain:
            members = klass.obj.members
            if self.is_dataclass(klass) and "__init__" not in members:
                return self._dataclass_init(klass)
            for special in ("__init__", "__new__"):
                if special in members:
                    got = self._follow(members[special], f"{klass.path}.{special}", frozenset())
                    if isinstance(got, Found) and isinstance(got.obj, griffe.Function):
                        sig = signature_of_function(got.obj, bound=True, file=got.file)
                        return self._forwarded(got, sig)
                    return None
        if complete:
            return Signature(params=[], returns=None, file=cls.file, line=cls.line)
        return None

    def is_dataclass(self, cls: Found) -> bool:
        """True when a class's decorators make it a dataclass (stdlib, pydantic, PEP 681)."""
        for deco in cast(griffe.Class, cls.obj).decorators:
            value = deco.value
            func = getattr(value, "function", value)
            path = _canonical(func)
            if path is None:
                continue
            if path in DATACLASS_DECORATORS:
                return True
            if self.owns(path):
                target = self.resolve(path)
                if isinstance(target, Found) and isinstance(target.obj, griffe.Function):
                    for inner in target.obj.decorators:
                        inner_path = _canonical(getattr(inner.value, "function", inner.value))
                        if inner_path in TRANSFORM_MARKERS:
                            return True
        return False

    def _dataclass_init(self, cls: Found) -> Signature:
        chain, _ = self.mro(cls)
        params: dict[str, Param] = {}
        for klass in reversed(chain):
            if not self.is_dataclass(klass):
                continue
            node = self.class_node(klass)
            if node is None:
                continue
            attrs = any(
                _canonical(getattr(d.value, "function", d.value)) in ATTRS_DECORATORS
                for d in cast(griffe.Class, klass.obj).decorators
            )
            for param in dataclass_fields(node, kw_only=_decorator_kw_only(klass)):
                if attrs and param.name.startswith("_"):
                    param = replace(param, name=param.name.lstrip("_"))
                params.pop(param.name, None)
                params[param.name] = param
        ordered = [p for p in params.values() if p.kind != "keyword_only"]
        ordered += [p for p in params.values() if p.kind == "keyword_only"]
        return Signature(params=ordered, returns=None, file=cls.file, line=cls.line)


def _decorator_kw_only(cls: Found) -> bool:
    for deco in cast(griffe.Class, cls.obj).decorators:
        for arg in getattr(deco.value, "arguments", []) or []:
            if getattr(arg, "name", None) == "kw_only" and str(getattr(arg, "value", "")) == "True":
                return True
    return False


def _is_bound_method(func: griffe.Function) -> bool:
    if not isinstance(func.parent, griffe.Class):
        return False
    labels = func.labels
    if "staticmethod" in labels:
        return False
    return (
        bool(func.parameters)
        and func.parameters[0].name in ("self", "cls")
        or ("classmethod" in labels)
    )


_canonical = canonical
