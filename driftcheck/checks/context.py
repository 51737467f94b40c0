"""What every check sees: the baseline and target host APIs and the client's uses."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import cast

from driftcheck.checks.declaration import CheckId
from driftcheck.client.use import Use
from driftcheck.findings import Evidence, Finding, Fix, Shape, Site
from driftcheck.gates import Side
from driftcheck.host.api import UNKNOWN, Found, HostAPI, Lookup
from driftcheck.host.flags import flag_value
from driftcheck.host.served import REMOVED, Served
from driftcheck.host.served_model import ServedModel
from driftcheck.kinds import FixSafety, Severity
from driftcheck.rules.ruleset import Bindings, RuleSet

#: (line, column, end line, end column) of a token: 1-based lines and columns, end exclusive.
Span = tuple[int, int, int, int]


@dataclass
class CheckContext:
    """Baseline (optional) and target host, plus all uses for cross-use conditions."""

    target: HostAPI
    baseline: HostAPI | None = None
    uses: list[Use] = field(default_factory=list)
    reported: set[tuple[str, str]] = field(default_factory=set)
    #: Host class path -> method names client classes mixed into it define.
    mixed_methods: dict[str, set[str]] = field(default_factory=dict)
    #: Dotted names of the client's own modules and classes.
    client_names: set[str] = field(default_factory=set)
    #: The rules of this run (drift rules and binding rules).
    rules: RuleSet = field(default_factory=RuleSet)
    #: ``id()`` of the uses gated away from the baseline: code only newer releases run.
    fresh: set[int] = field(default_factory=set)
    #: The classes the host builds for the served model (``scan --model``), if it serves one.
    served: ServedModel | None = None
    #: The client's files as lines (relative path -> lines), for facts no use carries (an
    #: environment variable the client sets).
    client_lines: Mapping[str, list[str]] = field(default_factory=dict)

    @property
    def base(self) -> HostAPI:
        """The baseline, typed for the code that compares two releases (it runs only where
        there is a baseline)."""
        return cast(HostAPI, self.baseline)

    @property
    def bindings(self) -> Bindings:
        """The binding rules of the target host."""
        return self.rules.bindings(self.target.name)

    def uses_in(self, file: str) -> list[Use]:
        """The uses of one client file (indexed once per run: checks that look at a use's
        neighbours would otherwise walk every use of the client for each use)."""
        index = self.__dict__.get("_by_file")
        if index is None:
            index = {}
            for u in self.uses:
                index.setdefault(u.file, []).append(u)
            self.__dict__["_by_file"] = index
        return cast(list[Use], index.get(file, []))

    def replaced_by_client(self, use: Use) -> bool:
        """Whether what a call binds to is the client's own by the time it runs: its file stores
        over it at module level, ungated (``Cls.__init__ = mine`` for ``Cls(...)``, ``Cls.m =
        mine`` for ``obj.m(...)`` on a ``Cls``), and the call runs after that store (inside a
        function of the module, or on a later module-level line)."""
        if use.kind != "call":
            return False
        stores = self._module_stores(use.file)
        if not stores:
            return False
        over = use.symbol if use.receiver else f"{use.symbol}.__init__"
        return any(use.scope != scope or order < use.order for scope, order in stores.get(over, ()))

    def _module_stores(self, file: str) -> dict[str, list[tuple[str, int]]]:
        """The ungated module-level stores to host names of one file, by name: (scope, order)
        (indexed once per file, as :meth:`uses_in`)."""
        index = self.__dict__.setdefault("_stores_by_file", {})
        if file not in index:
            module = file.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
            found: dict[str, list[tuple[str, int]]] = {}
            for u in self.uses_in(file):
                # a store whose scope is the module itself runs at import
                if u.store and u.gate is None and u.scope and module.endswith(u.scope):
                    found.setdefault(u.symbol, []).append((u.scope, u.order))
            index[file] = found
        return cast(dict[str, list[tuple[str, int]]], index[file])

    def lookup(self, api: HostAPI, use: Use) -> Lookup:
        """What ``use`` reaches in ``api``: Found, None (certainly absent) or UNKNOWN."""
        if use.receiver and use.member:
            cls = api.resolve(use.receiver)
            if not isinstance(cls, Found):
                return UNKNOWN
            got = api.class_member(cls, use.member)
            if got is UNKNOWN and api is self.target and self.baseline is not None:
                # An external base (e.g. torch.nn.Module) makes absence undecidable in general;
                # a member the host itself defined at baseline and no longer defines is gone.
                bcls = self.baseline.resolve(use.receiver)
                if isinstance(bcls, Found) and self.baseline.defined_in_host_mro(bcls, use.member):
                    return api.defined_in_host_mro(cls, use.member)
            return got
        return api.resolve(use.symbol, imported=imported_parts(use))

    def evidence(self, api: HostAPI, found: Lookup, note: str = "") -> Evidence | None:
        """Evidence for a found host object (or a name its ``__getattr__`` serves) in one
        version."""
        if isinstance(found, Served) and found.file:
            return Evidence(
                version=api.version, file=found.file, line=found.line, note=note or found.status
            )
        if not isinstance(found, Found):
            return None
        return Evidence(version=api.version, file=found.file, line=found.line, note=note)

    def once(self, file: str, key: str) -> bool:
        """True the first time a (file, key) pair is reported; later reports are dropped."""
        if (file, key) in self.reported:
            return False
        self.reported.add((file, key))
        return True


#: Uses whose symbol the client binds by an import statement, then reads ``reads`` attributes.
_IMPORTED_KINDS = ("import", "call", "attribute", "subclass")


def imported_parts(use: Use) -> int:
    """How many leading parts of ``use.symbol`` the import system brings in (``from
    numpy.compat.py3k import asstr`` then ``asstr(x)``: all four; ``np.compat.py3k.asstr(x)``:
    ``numpy`` alone), 0 where not known (members, a client class's inherited ``__init__``)."""
    if use.kind not in _IMPORTED_KINDS or use.receiver or use.via:
        return 0
    return max(0, len(use.symbol.split(".")) - use.reads)


def missing_module(api: HostAPI, symbol: str) -> str | None:
    """For an import of ``a.b.c``: the first of ``a.b``'s packages and modules that is no module
    of ``api`` (the import system imports them as modules: a package's ``__getattr__`` does not
    serve them)."""
    module = symbol.rpartition(".")[0]
    if "." not in module or not api.owns(module):
        return None
    return next((p for p in prefixes(module, start=2) if api.module(p) is None), None)


def prefixes(dotted: str, *, start: int = 1) -> Iterator[str]:
    """``a.b.c`` -> ``a``, ``a.b``, ``a.b.c`` (from ``start`` parts on)."""
    parts = dotted.split(".")
    for i in range(start, len(parts) + 1):
        yield ".".join(parts[:i])


def side(api: HostAPI) -> Side:
    """What a gate asks of one host release: its version, whether a name exists, and the
    truth of a flag the release fixes."""

    def has(name: str) -> bool | None:
        got = api.resolve(name)
        if isinstance(got, Found):
            return True
        if isinstance(got, Served):
            return got.status != REMOVED
        if got is None:
            return False
        # Undecidable as an attribute (a package ``__getattr__``), but the modules an import
        # of ``name`` needs are decidable: the import system does not ask ``__getattr__``.
        return False if missing_module(api, name) is not None else None

    return api.version, has, partial(flag_value, api)


def finding(
    use: Use,
    declared: CheckId,
    *,
    symbol: str,
    message: str,
    evidence: Iterable[Evidence | None] = (),
    fix: Fix | None = None,
    severity: Severity | None = None,
    at: Span | None = None,
    witness: dict[str, str] | None = None,
) -> Finding:
    """A built-in check's finding at a use (or at the argument ``at`` names): id, kind and
    default severity from the check's declaration, evidence without gaps. ``witness`` says how
    ``--verify`` shows it when the check's default witness would not (``check``, ``body``,
    ``reason``)."""
    line, column, end_line, end_column = at or (use.line, use.column, use.end_line, use.end_column)
    return Finding(
        rule=declared.id,
        kind=declared.kind,
        severity=severity or declared.severity,
        file=use.file,
        line=line,
        column=column,
        end_line=end_line,
        end_column=end_column,
        symbol=symbol,
        message=message,
        evidence=tuple(e for e in evidence if e is not None),
        fix=fix,
        anchor=(use.line, use.column) if at else None,
        site=Site(use.kind, use.symbol, declared=tuple(sorted(witness.items())))
        if witness
        else None,
    )


def site_of(
    use: Use, target: Side, baseline: Side | None, declared: tuple[tuple[str, str], ...] = ()
) -> Site:
    """The use as data a witness can perform: its host name, receiver and arguments per side
    (``**d`` keys that only one side's gates put there differ per side)."""

    def shape(on: Side | None) -> Shape | None:
        if use.shape is None:
            return None
        s = use.shape.on(on) if on is not None else use.shape
        return Shape(s.positional, tuple(s.keywords), s.star, s.double_star)

    on_target = shape(target)
    on_base = shape(baseline) if baseline is not None else None
    return Site(
        use=use.kind,
        symbol=use.symbol,
        receiver=use.receiver,
        member=use.member,
        target=on_target,
        baseline=on_base if on_base != on_target else None,
        params=tuple((str(n), str(k), bool(d)) for n, k, d in use.params or ()),
        declared=declared,
        reads=use.reads,
    )


def is_literal(text: str) -> bool:
    """Is this source text a literal value (what a fix may write into the client as is)?"""
    import ast

    try:
        ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return True


def runs(api: HostAPI, found: Found | None) -> Found | None:
    """The host function a call of ``found`` runs: itself, or a class's host ``__init__``."""
    if found is None:
        return None
    if found.kind == "function":
        return found
    if found.kind == "class":
        init = api.defined_in_host_mro(found, "__init__")
        return init if init is not None and init.kind == "function" else None
    return None


def rename_fix(use: Use, gone: str, new: str, safety: FixSafety, description: str) -> Fix:
    """The fix that points a use of ``gone`` at ``new``: the import rewritten where the name is
    imported; ``mod.old`` renamed to ``mod.new`` where it is read off the same module."""
    old_parent, _, old_name = gone.rpartition(".")
    new_parent, _, new_name = new.rpartition(".")
    if use.kind in ("attribute", "call") and use.symbol == gone and old_parent == new_parent:
        return Fix(
            safety,
            description,
            codemod="rename-attribute",
            params=(("old", old_name), ("new", new_name)),
        )
    rest = use.symbol[len(gone) :]
    # A module that went, whose new home names the object the use reads from it
    # (``np.lib.arrayterator.Arrayterator`` -> ``numpy.lib.Arrayterator``): that object.
    new_symbol = new if rest and rest == f".{new_name}" else new + rest
    return Fix(
        safety,
        description,
        codemod="rename-import",
        params=(("old", gone), ("new", new), ("new_symbol", new_symbol)),
    )
