"""Which client modules run on a host release: a module imported only under gates runs only
where one of them holds (a package that picks ``vendored/vllm_v0_5/`` for vLLM 0.5 and
``vendored/vllm_v0_6/`` for 0.6 runs each only there).

A module's gate is the disjunction, over the places that import it, of the gate at that place
and the importing module's own gate. An import under ``if TYPE_CHECKING:`` is no such place: it
never runs, and the module it names for type checkers is loaded some other way (a package's
PEP 562 ``__getattr__`` that imports its submodules on first access). A module no client module imports (an entry point, an
API for the client's users), one imported anywhere without a gate (the files driftcheck does not
parse, which never name the host, count as importing without one), or one on an import cycle,
runs everywhere.

A module is dead (:func:`dead_modules`) only when no client module imports it or a module under
it, no text of the client names it (an entry point's ``pkg.mod:func``, ``python -m pkg.mod``,
``importlib.import_module("pkg.mod")``, a plugin registry's string, a script's file name: any
file other than its own), it does not run as a script (``if __name__ == "__main__":``), and it is
private (a part of its name starts with one underscore): a library's public modules are
imported by its users, so only a private one nobody names is known never to run. Its findings
are at most info, with that reason.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping

from driftcheck.gates import TYPE_ONLY, Gate

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


def dead_modules(
    sites: Iterable[Site], modules: dict[str, str], texts: Callable[[], Mapping[str, str]]
) -> dict[str, str]:
    """Module -> why it is dead, for the modules of ``modules`` (module -> its file) that are
    private, imported by no client module, and named in no client text but their own
    (``texts``: file -> text of the client's files, its packaging and entry-point files; read
    only when some module is a candidate)."""
    imported: set[str] = set()
    for target, _gate, importer in sites:
        for name in _with_parents(target):
            if name != importer:
                imported.add(name)
    candidates = [
        module
        for module in modules
        if _private(module)
        and module not in imported
        and not any(n in imported for n in modules if n.startswith(module + "."))
    ]
    if not candidates:
        return {}
    every = texts()
    words: dict[str, tuple[str, re.Pattern[str]]] = {}
    for module in candidates:
        own = modules[module]
        if _MAIN.search(every.get(own, "")):
            continue  # a script: run by its path
        word = re.compile(
            rf"(?<![\w.]){re.escape(module)}(?!\w)|{re.escape(own.rpartition('/')[2])}"
        )
        words[module] = own, word
    named: set[str] = set()
    for rel, text in every.items():  # each text read once (a kept text is decoded to read it)
        for module, (own, word) in words.items():
            if rel != own and module not in named and word.search(text):
                named.add(module)
        if len(named) == len(words):
            break
    return {
        module: (
            f"dead code: {module} is private, no module of the client imports it, and no entry "
            "point or other text of the client names it"
        )
        for module in words
        if module not in named
    }


_MAIN = re.compile(r"^if\s+__name__\s*==\s*[\"']__main__[\"']", re.M)


def _private(module: str) -> bool:
    """A part of the name after the top level starts with one underscore (``__main__`` and
    ``__init__`` are no private parts; a ``__main__`` module runs under ``python -m``)."""
    parts = module.split(".")
    return parts[-1] != "__main__" and any(
        p.startswith("_") and not p.startswith("__") for p in parts[1:]
    )


def module_gates(sites: Iterable[Site], modules: set[str]) -> dict[str, Gate]:
    """Module -> the gate it runs under, for the modules of ``modules`` that have one.

    Modules that import each other (an import cycle) run under the gates of the ways into the
    cycle from outside it; a cycle nothing outside imports runs everywhere. An import of a
    module's own parent package adds nothing: the parent always runs first.
    """
    into: dict[str, list[tuple[Gate | None, str]]] = {}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for target, gate, importer in sites:
        if gate is not None and _type_only(gate):
            continue  # for type checkers: says nothing of how the module is loaded at run time
        for name in _with_parents(target):
            if name not in modules or name == importer or importer.startswith(name + "."):
                continue
            into.setdefault(name, []).append((gate, importer))
            if importer in modules:
                graph[importer].add(name)
    component = _components(graph)
    members: dict[int, list[str]] = {}
    for module, c in component.items():
        members.setdefault(c, []).append(module)
    gate_of: dict[int, Gate | None] = {}
    for c in sorted(members, reverse=True):  # importers' components before their targets'
        alternatives: list[Gate] = []
        entries = [
            (gate, importer)
            for module in members[c]
            for gate, importer in into.get(module, [])
            if component.get(importer) != c
        ]
        result: Gate | None = None
        for gate, importer in entries:
            outer = gate_of.get(component[importer]) if importer in component else None
            parts = [g for g in (gate, outer) if g is not None]
            if not parts:
                alternatives = []
                break
            alternatives.append(parts[0] if len(parts) == 1 else Gate("and", tuple(parts)))
        if alternatives:
            unique = tuple(dict.fromkeys(alternatives))
            result = unique[0] if len(unique) == 1 else Gate("or", unique)
        gate_of[c] = result
    return {m: g for m, c in component.items() if (g := gate_of[c]) is not None}


def _type_only(gate: Gate) -> bool:
    """The gate holds only for type checkers (``TYPE_CHECKING``, alone or in a conjunction)."""
    return gate == TYPE_ONLY or (gate.op == "and" and any(_type_only(p) for p in gate.parts))


def _components(graph: dict[str, set[str]]) -> dict[str, int]:
    """Strongly connected components (Tarjan's, without recursion), numbered in the order
    Tarjan's finds them: a component's number is higher than those of the components its
    modules import."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: dict[str, int] = {}
    counter = 0
    found = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    out[member] = found
                    if member == node:
                        break
                found += 1
    return out


#: (function's qualified name, gate at the reference, qualified scope of the reference)
Reference = tuple[str, Gate | None, str]


def function_gates(
    references: Iterable[Reference], ungated: set[str], functions: set[str]
) -> dict[str, Gate]:
    """Function -> the gate it runs under: for a module-level function that the client names
    only under gates (``new if version >= X else old``), the disjunction of those gates. A
    function named anywhere without a gate, imported from another module (``ungated``), or
    never named in the client (it may be called from outside) runs everywhere."""
    by_function: dict[str, list[Gate | None]] = {}
    for name, gate, scope in references:
        if name in functions and not (scope == name or scope.startswith(name + ".")):
            by_function.setdefault(name, []).append(gate)
    out: dict[str, Gate] = {}
    for name, gates in by_function.items():
        if name in ungated or any(g is None for g in gates):
            continue
        unique = tuple(dict.fromkeys(g for g in gates if g is not None))
        out[name] = unique[0] if len(unique) == 1 else Gate("or", unique)
    return out


def _with_parents(module: str) -> list[str]:
    """``a.b.c`` -> ``a.b.c``, ``a.b``, ``a`` (importing a module imports its packages)."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(len(parts), 0, -1)]
