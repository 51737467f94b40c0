"""Where a symbol went: a same-named class or function elsewhere in the target host."""

from __future__ import annotations

import re

from driftcheck.host.api import Found, HostAPI

_DEF_RE = re.compile(r"^(?:class|def|async def)\s+(\w+)|^(\w+)\s*(?::[^=]+)?=", re.M)


def definitions(api: HostAPI) -> dict[str, list[str]]:
    """Top-level names defined in each host module (read as text once per release)."""

    def compute() -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        tree = getattr(api.tree, "real", api.tree)
        for rel in api.tree.python_files():
            module = api.tree.module_name(rel)
            if not api.owns(module):
                continue
            try:
                text = tree.read_text(rel)
            except Exception:  # an unreadable member only narrows the search
                continue
            for m in _DEF_RE.finditer(text):
                out.setdefault(m.group(1) or m.group(2), []).append(module)
        return out

    return api.fact("definitions", compute)  # type: ignore[return-value]


def find_new_home(api: HostAPI, gone: str, baseline: HostAPI | None = None) -> Found | None:
    """The target's definition of ``gone``'s last name, nearest to its old module."""
    if "." not in gone:
        return None
    old_module, name = gone.rsplit(".", 1)
    if not name or name[0] == "_" and name.startswith("__"):
        return None
    kind = None
    if baseline is not None:
        before = baseline.resolve(gone)
        kind = before.kind if isinstance(before, Found) else None
        if kind == "module":
            return None
    candidates = definitions(api).get(name, [])

    def closeness(module: str) -> int:
        a, b = module.split("."), old_module.split(".")
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        return n

    for module in sorted(candidates, key=lambda m: (-closeness(m), m)):
        found = api.resolve(f"{module}.{name}")
        if isinstance(found, Found) and (kind is None or found.kind == kind):
            if found.path != gone:
                return found
    return None
