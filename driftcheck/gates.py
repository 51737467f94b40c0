"""Gates: the conditions under which a use of the host runs, evaluated per host release.

Client code that supports several host releases checks first: it compares the host's version
(``Version(vllm.__version__) >= Version("0.10")``, ``importlib.metadata.version("vllm")``, a
tuple, a plain string as Python compares strings), asks ``hasattr(mod, "x")``, imports inside
``try``/``except ImportError``, or hides imports under ``if TYPE_CHECKING:``. A :class:`Gate` is
that condition as data (it outlives the syntax tree and is cached with the uses); ``holds(side)``
answers True, False or None (cannot be decided) for one host release, the way Python would.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from packaging.version import InvalidVersion, Version

#: What a gate needs of a host release: its version, whether it has a dotted name, and the
#: truth of a host flag the release fixes (None: not fixed there).
Side = tuple[str, Callable[[str], bool | None], Callable[[str], bool | None]]

_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}


@dataclass(frozen=True)
class Gate:
    """A condition on the host: a tree of ``and`` / ``or`` / ``not`` over atoms."""

    op: str  # "and" | "or" | "not" | "version" | "has" | "flag" | "never" | "unknown"
    parts: tuple[Gate, ...] = ()
    #: For "version": how the host's version is read ("str", "version", "tuple:N", "major_minor")
    #: and compared (an operator of _OPS, "startswith").
    form: str = ""
    cmp: str = ""
    value: object = None
    #: For "has": the dotted host name that must exist; for "flag": the host name whose truth
    #: is tested; for "unknown": the condition's text.
    name: str = ""

    def holds(self, side: Side) -> bool | None:
        """True or False on this host release, or None when it cannot be decided."""
        if self.op == "never":
            return False
        if self.op == "unknown":
            return None
        if self.op == "not":
            got = self.parts[0].holds(side)
            return None if got is None else not got
        if self.op in ("and", "or"):
            results = [p.holds(side) for p in self.parts]
            if self.op == "and":
                if False in results:
                    return False
                return None if None in results else True
            if True in results:
                return True
            return None if None in results else False
        if self.op == "has":
            return side[1](self.name)
        if self.op == "flag":
            return side[2](self.name)
        if self.op == "version":
            return _compare(side[0], self.form, self.cmp, self.value)
        return None

    def text(self) -> str:
        """The condition, roughly as the client wrote it."""
        if self.op == "not":
            return f"not ({self.parts[0].text()})"
        if self.op in ("and", "or"):
            return f" {self.op} ".join(f"({p.text()})" for p in self.parts)
        if self.op == "has":
            return f"the host has {self.name}"
        if self.op == "flag":
            return f"{self.name} is true"
        if self.op == "never":
            return self.name or "never"
        if self.op == "version":
            return f"host version {self.cmp} {self.value!r}"
        return self.name


NEVER = Gate("never")
ALWAYS = Gate("not", (NEVER,))
#: ``if TYPE_CHECKING:`` — never runs, and what it imports is for type checkers only.
TYPE_ONLY = Gate("never", name="TYPE_CHECKING")


def all_of(gates: list[Gate]) -> Gate | None:
    """The conjunction of ``gates`` (None when there are none)."""
    flat: list[Gate] = []
    for g in gates:
        flat.extend(g.parts if g.op == "and" else (g,))
    if not flat:
        return None
    return flat[0] if len(flat) == 1 else Gate("and", tuple(dict.fromkeys(flat)))


def negate(gate: Gate) -> Gate:
    """``not gate`` (double negations cancel)."""
    return gate.parts[0] if gate.op == "not" else Gate("not", (gate,))


def _compare(version: str, form: str, cmp: str, value: object) -> bool | None:
    """Compare the host's ``version`` read as ``form`` with ``value``, as Python would."""
    try:
        parsed = Version(version)
    except InvalidVersion:
        return None
    if form == "auto":  # a version attribute: a string, or a tuple when compared with one
        if isinstance(value, tuple):
            form = f"tuple:{len(value)}"
        elif isinstance(value, str):
            form = "str"
        else:
            return None
    if form == "str":
        left: object = version
    elif form == "version":
        left = parsed
        if isinstance(value, str):
            try:
                value = Version(value)
            except InvalidVersion:
                return None
    elif form.startswith("part:"):
        i = int(form.split(":", 1)[1])
        left = parsed.release[i] if i < len(parsed.release) else 0
    elif form.startswith("tuple:"):
        n = int(form.split(":", 1)[1])
        left = tuple(parsed.release[:n]) + (0,) * max(0, n - len(parsed.release))
    else:
        return None
    if cmp == "startswith":
        return isinstance(left, str) and isinstance(value, str) and left.startswith(value)
    try:
        return _OPS[cmp](left, value)
    except (KeyError, TypeError):
        return None
