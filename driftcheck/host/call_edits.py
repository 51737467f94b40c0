"""The host's own edit of its calls of a callable whose signature changed: the fix it made.

When a release removes a parameter or adds a required one, the host usually edits its own calls
in the same release (vLLM's ``get_kv_cache_config_from_groups(...)`` lost ``kv_cache_specs`` and
its caller stopped passing it; ``Scheduler(...)`` gained ``block_size`` and the engine core passes
``vllm_config.cache_config.block_size * ...``). Each host call (``callers.keyword_calls``, mined
per release) is bound to its release's signature, paired by the file and function that hold it,
and read as evidence: a parameter every call dropped with none added in its place, or the value
every call passes for a new one, in the terms of the callable's own parameters.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass

from driftcheck.host.api import HostAPI
from driftcheck.host.callers import KeywordCall, keyword_calls
from driftcheck.host.positions import slots
from driftcheck.host.signature import Signature

#: Names an expression may hold and still read nothing of the host's own state.
_BUILTINS = frozenset(dir(builtins))


@dataclass(frozen=True)
class Drop:
    """A host call that passed ``keyword`` on one release and its counterpart that does not."""

    before: KeywordCall
    after: KeywordCall


@dataclass(frozen=True)
class HostValue:
    """What one host call passes for a parameter, rewritten in the callable's parameters.

    Attributes:
        call: The host's call.
        source: The value as the host writes it (its locals bound once inlined).
        template: The value with each part the host passes for parameter ``P`` as ``{arg:P}``.
        complete: Every name of the value is such a part (or a builtin): the value reads
            nothing but the call's own arguments and literals.
        uses: The parameters the template names.
    """

    call: KeywordCall
    source: str
    template: str
    complete: bool
    uses: tuple[str, ...]


def bound(call: KeywordCall, sig: Signature) -> dict[str, str] | None:
    """The parameter each argument of ``call`` lands on (name → source); None when the call
    does not bind (too many positional arguments, a keyword the callable does not take)."""
    out: dict[str, str] = {}
    places = slots(sig)
    if len(call.positional) > len(places) and not sig.accepts_var_positional:
        return None
    for param, source in zip(places, call.positional, strict=False):
        out[param.name] = source
    for keyword, source in zip(call.keywords, call.values, strict=False):
        if sig.param(keyword) is None and not sig.accepts_var_keyword:
            return None
        if keyword in out:
            return None
        out[keyword] = source
    return out


def _package_code(call: KeywordCall) -> bool:
    """A call in the host's package, not in its tests (tests call what they test oddly)."""
    parts = call.file.replace("\\", "/").split("/")
    return not any(p in ("tests", "test", "testing") or p.startswith("test_") for p in parts)


def host_dropped(
    before: HostAPI,
    after: HostAPI,
    names: tuple[str, str],
    sigs: tuple[Signature, Signature],
    keyword: str,
) -> list[Drop]:
    """The host's own calls of the callable (``names``: its name on each release) that passed
    ``keyword`` on ``before`` and, in the same function of the same file, pass neither it nor
    any argument the old call did not pass on ``after``. Every call that passed it must have
    such a counterpart, and no call on ``after`` may still pass it; else ``[]`` (no evidence)."""
    sig_b, sig_t = sigs
    if any(keyword in c.keywords for c in keyword_calls(after, names[1]) if _package_code(c)):
        return []
    old = [
        (c, b)
        for c in keyword_calls(before, names[0])
        if _package_code(c) and (b := bound(c, sig_b)) is not None and keyword in b
    ]
    if not old or any(c.open for c, _ in old):
        return []
    new: dict[tuple[str, str], list[tuple[KeywordCall, dict[str, str]]]] = {}
    for call in keyword_calls(after, names[1]):
        b = bound(call, sig_t)
        if b is not None and _package_code(call):
            new.setdefault((call.file, call.function), []).append((call, b))
    out: list[Drop] = []
    for call, was in old:
        mates = new.get((call.file, call.function), [])
        if not mates:
            return []  # moved or gone: the host's edit is not there to read
        for mate, now in mates:
            if mate.open or keyword in now or set(now) - set(was):
                return []  # the same call passes something in its place: not a plain drop
        out.append(Drop(call, mates[0][0]))
    return out


def host_values(after: HostAPI, name: str, sig: Signature, param: str) -> list[HostValue]:
    """What each of the host's own calls of the callable passes for ``param`` on ``after``."""
    out: list[HostValue] = []
    for call in keyword_calls(after, name):
        b = bound(call, sig) if _package_code(call) else None
        if b is None or param not in b:
            continue
        template, complete, uses = in_terms_of_arguments(b[param], b, param)
        out.append(HostValue(call, b[param], template, complete, uses))
    return out


def in_terms_of_arguments(
    source: str, arguments: dict[str, str], param: str
) -> tuple[str, bool, tuple[str, ...]]:
    """``source`` with each part that the same call passes for another parameter ``P`` written
    ``{arg:P}`` (the host's ``vllm_config.cache_config.block_size`` with ``vllm_config=
    vllm_config`` → ``{arg:vllm_config}.cache_config.block_size``); whether nothing else is
    named; the parameters named."""
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, RecursionError):
        return source, False, ()
    parts: dict[str, str] = {}
    for other, text in arguments.items():
        if other == param:
            continue
        try:
            parts.setdefault(ast.dump(ast.parse(text, mode="eval").body), other)
        except (SyntaxError, ValueError, RecursionError):
            continue
    used: list[str] = []

    class Swap(ast.NodeTransformer):
        def visit(self, node: ast.AST) -> ast.AST:
            other = parts.get(ast.dump(node)) if isinstance(node, ast.expr) else None
            if other is not None:
                used.append(other)
                return ast.Name(id=f"__arg_{other}__", ctx=ast.Load())
            return super().visit(node)

    swapped = Swap().visit(tree)
    free = {
        n.id
        for n in ast.walk(swapped)
        if isinstance(n, ast.Name) and not (n.id.startswith("__arg_") and n.id.endswith("__"))
    }
    complete = not (free - _BUILTINS) and not any(
        isinstance(n, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom))
        for n in ast.walk(swapped)
    )
    text = ast.unparse(swapped)
    for other in set(used):
        text = text.replace(f"__arg_{other}__", "{arg:" + other + "}")
    return text, complete, tuple(dict.fromkeys(used))
