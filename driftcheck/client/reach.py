"""Which client modules run on a host release: a module imported only under gates runs only
where one of them holds (a package that picks ``vendored/vllm_v0_5/`` for vLLM 0.5 and
``vendored/vllm_v0_6/`` for 0.6 runs each only there).

A module's gate is the disjunction, over the places that import it, of the gate at that place
and the importing module's own gate. A module no client module imports (an entry point, an
API for the client's users), one imported anywhere without a gate, one whose name appears in a
file driftcheck did not read, or one on an import cycle, runs everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from driftcheck.gates import Gate

#: (imported module, gate at the import, importing module)
Site = tuple[str, Gate | None, str]


def module_gates(
    sites: Iterable[Site], modules: set[str], unread_texts: Iterable[str] = ()
) -> dict[str, Gate]:
    """Module -> the gate it runs under, for the modules of ``modules`` that have one."""
    by_target: dict[str, list[tuple[Gate | None, str]]] = {}
    for target, gate, importer in sites:
        for name in _with_parents(target):
            if name in modules and name != importer:
                by_target.setdefault(name, []).append((gate, importer))
    unread = {word for text in unread_texts for word in re.findall(r"\w+", text)}
    memo: dict[str, Gate | None] = {}
    busy: set[str] = set()

    def gate_of(module: str) -> Gate | None:
        if module in memo:
            return memo[module]
        found = by_target.get(module)
        short = module.rsplit(".", 1)[-1]
        if not found or module in busy or short in unread:
            memo[module] = None
            return None
        busy.add(module)
        alternatives: list[Gate] = []
        for gate, importer in found:
            outer = gate_of(importer)
            parts = [g for g in (gate, outer) if g is not None]
            if not parts:
                alternatives = []
                break
            alternatives.append(parts[0] if len(parts) == 1 else Gate("and", tuple(parts)))
        busy.discard(module)
        result = None
        if alternatives:
            unique = tuple(dict.fromkeys(alternatives))
            result = unique[0] if len(unique) == 1 else Gate("or", unique)
        memo[module] = result
        return result

    out = {}
    for module in modules:
        got = gate_of(module)
        if got is not None:
            out[module] = got
    return out


def _with_parents(module: str) -> list[str]:
    """``a.b.c`` -> ``a.b.c``, ``a.b``, ``a`` (importing a module imports its packages)."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(len(parts), 0, -1)]
