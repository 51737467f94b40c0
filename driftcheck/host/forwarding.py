"""Keywords a host callable forwards: ``def __init__(self, model, **kwargs)`` that builds
``EngineArgs(model=model, **kwargs)`` accepts exactly what ``EngineArgs`` accepts (besides its
own parameters), so a keyword the final callee dropped is caught at the client's call, and a
keyword it still takes is no "no parameter named" error.

Followed only when certain: ``**kwargs`` goes to one call of a host callable whose signature is
known and has no ``**`` of its own, and is used otherwise only to read, set, test or pop keys
(``kwargs["x"] = ...``, ``kwargs.get("x")``, ``"x" in kwargs``, ``kwargs.pop("x")``).
A function that is nothing but ``return g(*args, **kwargs)`` binds as ``g`` does.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from driftcheck.host.signature import Param, Signature

_READS = ("get", "pop", "setdefault", "items", "keys", "values", "copy")


def forwarded(
    sig: Signature,
    node: ast.AST | None,
    callee_signature: Callable[[ast.expr], Signature | None],
) -> Signature:
    """``sig`` with its ``**kwargs`` replaced by what the function forwards them to."""
    var = next((p for p in sig.params if p.kind == "var_keyword"), None)
    if var is None or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return sig
    name = var.name
    calls: list[ast.Call] = []
    set_keys: set[str] = set()
    popped: set[str] = set()
    allowed: set[int] = set()  # ids of the Name nodes whose use is understood
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            for kw in sub.keywords:
                if kw.arg is None and isinstance(kw.value, ast.Name) and kw.value.id == name:
                    calls.append(sub)
                    allowed.add(id(kw.value))
            func = sub.func
            if (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id == name
                and func.attr in _READS
            ):
                allowed.add(id(func.value))
                key = _key(sub.args[0]) if sub.args else None
                if func.attr == "pop" and key:
                    popped.add(key)
                if func.attr == "setdefault" and key:
                    set_keys.add(key)
        elif (
            isinstance(sub, ast.Subscript)
            and isinstance(sub.value, ast.Name)
            and sub.value.id == name
        ):
            allowed.add(id(sub.value))
            key = _key(sub.slice)
            if key and isinstance(sub.ctx, ast.Store):
                set_keys.add(key)
            if key and isinstance(sub.ctx, ast.Del):
                popped.add(key)
        elif isinstance(sub, ast.Compare) and any(
            isinstance(op, (ast.In, ast.NotIn)) for op in sub.ops
        ):
            for right in sub.comparators:
                if isinstance(right, ast.Name) and right.id == name:
                    allowed.add(id(right))
    uses = [n for n in ast.walk(node) if isinstance(n, ast.Name) and n.id == name]
    if len(calls) != 1 or any(id(n) not in allowed for n in uses):
        return sig
    call = calls[0]
    target = callee_signature(call.func)
    if target is None or target.accepts_var_keyword:
        return sig
    own = {p.name for p in sig.params}
    explicit = {k.arg for k in call.keywords if k.arg} | set_keys
    extra = [
        Param(
            p.name,
            "keyword_only",
            has_default=p.has_default or p.name in set_keys,
            default=p.default,
        )
        for p in target.params
        if p.kind in ("positional_or_keyword", "keyword_only")
        and p.name not in own
        and p.name not in explicit - set_keys
    ]
    extra += [
        Param(k, "keyword_only", has_default=True)
        for k in sorted(popped - own)
        if k not in {p.name for p in extra}
    ]
    params = [p for p in sig.params if p is not var] + extra
    return Signature(params=params, returns=sig.returns, file=sig.file, line=sig.line)


def passed_through(sig: Signature, node: ast.AST | None) -> ast.expr | None:
    """The callee of a pure pass-through, ``def f(*arg, **kw): return g(*arg, **kw)`` (a
    function kept under an old name, SQLAlchemy's ``@moved_20`` wrappers): it binds its
    arguments exactly as ``g`` does. None when the function does anything else."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    star = next((p.name for p in sig.params if p.kind == "var_positional"), None)
    double = next((p.name for p in sig.params if p.kind == "var_keyword"), None)
    if star is None or double is None or len(sig.params) != 2:
        return None
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    if len(body) != 1 or not isinstance(body[0], ast.Return):
        return None
    call = body[0].value
    if (
        isinstance(call, ast.Call)
        and len(call.args) == 1
        and isinstance(call.args[0], ast.Starred)
        and isinstance(call.args[0].value, ast.Name)
        and call.args[0].value.id == star
        and len(call.keywords) == 1
        and call.keywords[0].arg is None
        and isinstance(call.keywords[0].value, ast.Name)
        and call.keywords[0].value.id == double
    ):
        return call.func
    return None


def _key(node: Any) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None
