"""Conditions that register routes: their source text, and the CLI flags and environment
variables that make them true (``args.enable_foo`` -> ``--enable-foo``, ``envs.VLLM_X`` -> ``VLLM_X``).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from driftcheck.http.hostcode import HostCode, literal_str
from driftcheck.http.surface_model import CliFlag

_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")


@dataclass(frozen=True)
class Cond:
    """One guard on the way to a registration."""

    text: str
    flags: tuple[str, ...] = ()
    env: tuple[str, ...] = ()


def condition(
    code: HostCode, module: str, test: ast.expr, negated: bool, flags: dict[str, CliFlag]
) -> Cond:
    """The guard ``test`` (or ``not test``) read in ``module``."""
    if negated and isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, negated = test.operand, False
    text = ast.unparse(test)
    if isinstance(test, ast.BoolOp | ast.IfExp | ast.NamedExpr | ast.Lambda) and not negated:
        text = f"({text})"  # one conjunct of the route's condition
    if negated:
        text = f"not {text}" if _simple(test) else f"not ({text})"
    found_flags: list[str] = []
    found_env: list[str] = []
    _atoms(code, module, test, not negated, flags, found_flags, found_env)
    return Cond(text, tuple(dict.fromkeys(found_flags)), tuple(dict.fromkeys(found_env)))


def _simple(test: ast.expr) -> bool:
    return isinstance(test, ast.Name | ast.Attribute | ast.Call | ast.Subscript)


def _atoms(
    code: HostCode,
    module: str,
    node: ast.expr,
    positive: bool,
    flags: dict[str, CliFlag],
    out_flags: list[str],
    out_env: list[str],
) -> None:
    if isinstance(node, ast.BoolOp):
        for value in node.values:
            _atoms(code, module, value, positive, flags, out_flags, out_env)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        _atoms(code, module, node.operand, not positive, flags, out_flags, out_env)
    elif isinstance(node, ast.Compare):
        if len(node.ops) == 1 and _truthy_compare(node.ops[0], node.comparators[0]):
            _atoms(code, module, node.left, positive, flags, out_flags, out_env)
    elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        owner, attr = node.value.id, node.attr
        if _is_module(code, module, owner):
            if _ENV_NAME.match(attr) and positive:
                out_env.append(attr)
        else:
            _flag(owner, attr, positive, flags, out_flags)
    elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute):
        _flag(node.value.attr, node.attr, positive, flags, out_flags)  # app.state.args.x
    elif isinstance(node, ast.Call):
        name = _call_name(node.func)
        if name == "getattr" and len(node.args) >= 2:
            named = literal_str(node.args[1])
            owner = _call_name(node.args[0]).rsplit(".", 1)[-1]
            if named and owner:
                _flag(owner, named, positive, flags, out_flags)
        elif name in ("os.getenv", "os.environ.get", "getenv", "environ.get") and node.args:
            env = literal_str(node.args[0])
            if env and positive:
                out_env.append(env)
    elif isinstance(node, ast.Subscript) and _call_name(node.value) in ("os.environ", "environ"):
        env = literal_str(node.slice)
        if env and positive:
            out_env.append(env)


def _truthy_compare(op: ast.cmpop, right: ast.expr) -> bool:
    """True when ``x <op> right`` holds only for a set (truthy) value of ``x``."""
    if isinstance(op, ast.IsNot | ast.NotEq):
        return isinstance(right, ast.Constant) and right.value in (None, False, 0, "")
    if isinstance(op, ast.Eq):
        return isinstance(right, ast.Constant) and bool(right.value)
    return False


def _flag(owner: str, attr: str, positive: bool, flags: dict[str, CliFlag], out: list[str]) -> None:
    name = "--" + attr.replace("_", "-")
    flag = flags.get(name) or next((f for f in flags.values() if f.dest == attr), None)
    if flag is None:
        if not flags and owner == "args" and positive:
            out.append(name)  # no flag table read: the argparse convention
        return
    if positive:
        out.append(flag.name)
    elif flag.negatable:
        out.append("--no-" + flag.name[2:])


def _is_module(code: HostCode, module: str, name: str) -> bool:
    imported = code.imports(module).get(name)
    if imported is None:
        return False
    target, attr = imported
    full = target if attr is None else f"{target}.{attr}"
    return attr is None or code.has_module(full)


def _call_name(func: ast.AST) -> str:
    parts: list[str] = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return ".".join(reversed(parts))
