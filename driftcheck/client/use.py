"""One place where the client touches the host, as data (cached with the client's analysis)."""

from __future__ import annotations

from dataclasses import dataclass

from driftcheck.gates import Gate
from driftcheck.host.signature import CallShape


@dataclass(slots=True)
class Use:
    """One place where the client touches the host.

    Attributes:
        kind: import / attribute / call / subclass / override / string-ref / declaration (a
            hook name a client class declares: ``member``, its class in ``receiver_expr``).
        file: Client file, relative to the client's root.
        line: 1-based line.
        column: 1-based column.
        symbol: Host dotted path as the client reaches it (``Class.member`` for members).
        receiver: Host class path for a member of a typed receiver.
        member: The member name for receiver uses and overrides.
        shape: Arguments of a call.
        result: How a call's result is used (discarded, assigned, returned, subscripted,
            attribute, truth-tested, passed, iterated, used).
        receiver_expr: Source of the receiver expression (``self.executor``).
        scope: Qualified name of the enclosing client function.
        order: Position of the use within the file (for "followed by" conditions).
        params: For overrides: the client function's parameters as a signature-like list.
        via: How the receiver type was found, when not from plain code (worker extension, …).
    """

    kind: str
    file: str
    line: int
    column: int
    symbol: str
    receiver: str | None = None
    member: str | None = None
    shape: CallShape | None = None
    result: str | None = None
    receiver_expr: str | None = None
    scope: str = ""
    order: int = 0
    end_line: int = 0
    #: 1-based column just past the use on ``end_line`` (0: not known).
    end_column: int = 0
    params: list | None = None
    via: str | None = None
    #: The condition on the host under which the use runs (None: always).
    gate: Gate | None = None
    result_indexed: bool = False
    holder: str | None = None
    #: Attribute reads after the client's imported name (``np.compat.os_fspath``: 2): what the
    #: client imports is the symbol without them; 0 for imports and members.
    reads: int = 0
    #: For calls of host functions: the host classes of the positional arguments ('' where
    #: unknown; None when none is known).
    arg_classes: tuple[str, ...] | None = None
    #: For a tested call: what the client does when it is False (``raise ValueError``,
    #: ``return``), when the branch starts with that.
    on_false: str | None = None
    #: For member uses: the ``hasattr`` tests that decide whether it runs (``(object
    #: expression, attribute, holds)``, see :mod:`driftcheck.client.guards`).
    guards: tuple[tuple[str, str, bool], ...] = ()
    #: For a call of a name imported behind ``try``/``except ImportError`` whose handler leaves
    #: it ``None`` or unbound: the import's line (0: the name has a real fallback, or none).
    none_fallback: int = 0
    #: An assignment to the attribute (``mod.X = v``, ``setattr(mod, "X", v)``): it runs
    #: whether or not the host has the name, so a dropped name makes the patch ineffective.
    store: bool = False
    #: For a ``__post_init__`` override: the ``InitVar`` fields the client's own dataclass
    #: declares (the dataclass machinery passes them after the host's).
    init_vars: tuple[str, ...] = ()
    #: For an import: the line its statement starts on (the names of one ``from m import (a,
    #: b)`` share it).
    statement: int = 0
    #: Why the use's module is dead code (nothing imports it, nothing names it, and it is
    #: private: :func:`driftcheck.client.reach.dead_modules`); "" when it may run.
    dead: str = ""
    #: For a member of a receiver read from an attribute (``self.cfg.x``): where the client
    #: stores an instance of its own subclass of the receiver's class that sets the member into
    #: an attribute of that name (``vllm_config.cfg = MyConfig(...)``), as ``Class file:line``;
    #: "" when it does not.
    stored_own: str = ""
