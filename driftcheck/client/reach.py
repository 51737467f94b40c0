"""Which client modules run on a host release: a module imported only under gates runs only
where one of them holds (a package that picks ``vendored/vllm_v0_5/`` for vLLM 0.5 and
``vendored/vllm_v0_6/`` for 0.6 runs each only there).

A module's gate is the disjunction, over the places that import it, of the gate at that place
and the importing module's own gate. A module no client module imports (an entry point, an
API for the client's users), one imported anywhere without a gate (the files driftcheck does not
parse, which never name the host, count as importing without one), or one on an import cycle,
runs everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from driftcheck.gates import Gate

#: (imported module, gate at the import, importing module)
Site = tuple[str, Gate | None, str]


_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+\(?([\w, \t\n]+)|import[ \t]+([\w., \t]+))",
    re.M,
)


def unread_sites(unread: Iterable[tuple[str, bool, str]]) -> list[Site]:
    """The imports of the files that are not parsed ((module, is a package, text)), as ungated
    sites."""
    out: list[Site] = []
    for module, is_package, text in unread:
        package = module if is_package else module.rpartition(".")[0]
        for base, names, plain in _IMPORT.findall(text):
            if plain:
                out += [(n.split(" as ")[0].strip(), None, module) for n in plain.split(",")]
                continue
            dots = len(base) - len(base.lstrip("."))
            if dots:
                parts = package.split(".")
                head = parts[: len(parts) - dots + 1] if dots > 1 else parts
                base = ".".join([*head, *([base.lstrip(".")] if base.lstrip(".") else [])])
            out.append((base, None, module))
            out += [
                (f"{base}.{n.split(' as ')[0].strip()}", None, module)
                for n in names.split(",")
                if n.strip()
            ]
    return out


def module_gates(sites: Iterable[Site], modules: set[str]) -> dict[str, Gate]:
    """Module -> the gate it runs under, for the modules of ``modules`` that have one."""
    by_target: dict[str, list[tuple[Gate | None, str]]] = {}
    for target, gate, importer in sites:
        for name in _with_parents(target):
            if name in modules and name != importer:
                by_target.setdefault(name, []).append((gate, importer))
    memo: dict[str, Gate | None] = {}
    busy: set[str] = set()

    def gate_of(module: str) -> Gate | None:
        if module in memo:
            return memo[module]
        found = by_target.get(module)
        if not found or module in busy:
            memo[module] = None
            return None
        busy.add(module)
        alternatives: list[Gate] = []
        for gate, importer in found:
            outer = gate_of(importer) if importer in modules else None
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
