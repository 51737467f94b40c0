"""What a host says around its functions rather than in them: warnings a module gives when it
is imported, ``@deprecated`` on a class, and decorators that still take keyword-only
parameters by position with a warning."""

from __future__ import annotations

import ast
import re

from driftcheck.host.api import Found, HostAPI
from driftcheck.host.param_notes import DEPRECATION, decorator_params, literal, message_text


def module_notes(api: HostAPI, module: str) -> list[str]:
    """Deprecation warnings a module gives when it is imported (top-level ``warn(...)``)."""

    def compute() -> list[str]:
        text = api.module_text(module) or ""
        if "warn" not in text:
            return []
        tree = api._ast(module, text)
        out: list[str] = []
        for stmt in _top(tree.body if tree is not None else []):
            call = stmt.value if isinstance(stmt, ast.Expr) else None
            if (
                isinstance(call, ast.Call)
                and ast.unparse(call.func).endswith("warn")
                and call.args
                and DEPRECATION.search(ast.unparse(call))
            ):
                out.append(message_text(api, module, call.args[0]))
        return out

    return list(api.fact(f"module-deprecations:{module}", compute))


def _top(body: list[ast.stmt]) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, ast.If | ast.Try):
            out.extend(_top(stmt.body))
        else:
            out.append(stmt)
    return out


def class_notes(api: HostAPI, cls: Found) -> list[str]:
    """``@deprecated(...)`` on a class (the warning comes with every instance)."""

    def compute() -> list[str]:
        node = api.def_node(cls)
        decorators = getattr(node, "decorator_list", [])
        return [
            literal(d) or ast.unparse(d)
            for d in decorators
            if re.search(r"\bdeprecated\b", ast.unparse(d))
            and decorator_params(d, set(), False) is None
        ]

    return list(api.fact(f"class-deprecations:{cls.file}:{cls.line}:{cls.obj.name}", compute))


_POSITIONAL_USE = re.compile(r"positional|keyword[- ]only|as keyword", re.I)


def positional_decorated(api: HostAPI, func: Found) -> bool:
    """Whether a decorator of ``func`` still takes its keyword-only parameters by position, with
    a warning (scikit-learn's ``_deprecate_positional_args``, pandas'
    ``deprecate_nonkeyword_arguments``): read from the decorator's own body."""

    def compute() -> bool:
        node = api.def_node(func)
        for deco in getattr(node, "decorator_list", []):
            head = deco.func if isinstance(deco, ast.Call) else deco
            name = ast.unparse(head)
            found = api.resolve(f"{func.obj.module.path}.{name}")
            if not isinstance(found, Found) or found.kind != "function":
                continue
            body = api.def_node(found)
            for call in ast.walk(body) if body is not None else []:
                if (
                    isinstance(call, ast.Call)
                    and ast.unparse(call.func).endswith("warn")
                    and call.args
                    and _POSITIONAL_USE.search(literal(call.args[0]) or "")
                ):
                    return True
        return False

    key = f"positional-decorated:{func.file}:{func.line}:{func.obj.name}"
    return bool(api.fact(key, compute))
