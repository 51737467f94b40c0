"""Call signatures as plain data and the binding of call sites (annotation shapes:
:mod:`driftcheck.host.annotations`)."""

from __future__ import annotations

import ast
import re
from dataclasses import asdict, dataclass, field, replace

import griffe

from driftcheck.gates import Gate, Side

KIND_MAP = {
    "positional-only": "positional_only",
    "positional or keyword": "positional_or_keyword",
    "variadic positional": "var_positional",
    "keyword-only": "keyword_only",
    "variadic keyword": "var_keyword",
}


@dataclass(frozen=True)
class Param:
    """One parameter: name, kind (as in :class:`inspect.Parameter`), default presence."""

    name: str
    kind: str
    has_default: bool
    default: str | None = None
    annotation: str | None = None
    init_var: bool = False
    #: A keyword a decorator takes for another parameter (its old name).
    alias_of: str | None = None

    @property
    def required(self) -> bool:
        """Must a caller pass it?"""
        return not self.has_default and self.kind not in ("var_positional", "var_keyword")


@dataclass
class Signature:
    """Parameters a caller sees (``self`` removed for bound methods) and the return annotation."""

    params: list[Param]
    returns: str | None
    file: str = ""
    line: int = 0

    def param(self, name: str) -> Param | None:
        """The parameter called ``name``."""
        return next((p for p in self.params if p.name == name), None)

    def to_json(self) -> dict:
        """A JSON form (kept in host snapshots)."""
        return {
            "params": [asdict(p) for p in self.params],
            "returns": self.returns,
            "file": self.file,
            "line": self.line,
        }

    @classmethod
    def from_json(cls, data: dict) -> Signature:
        """The signature :meth:`to_json` wrote."""
        return cls(
            params=[Param(**p) for p in data["params"]],
            returns=data["returns"],
            file=data["file"],
            line=data["line"],
        )

    @property
    def accepts_var_keyword(self) -> bool:
        """Has ``**kwargs``."""
        return any(p.kind == "var_keyword" for p in self.params)

    @property
    def accepts_var_positional(self) -> bool:
        """Has ``*args``."""
        return any(p.kind == "var_positional" for p in self.params)


@dataclass(frozen=True)
class KeyOp:
    """A key a ``**d`` dict gains (``+``) or loses (``-``, ``clear``), under a gate."""

    op: str
    key: str
    gate: Gate | None = None
    span: tuple[int, int, int, int] | None = None


@dataclass(frozen=True)
class CallShape:
    """What a call site passes: positional count, keyword names, and star arguments."""

    positional: int
    keywords: tuple[str, ...]
    star: bool = False
    double_star: bool = False
    #: Where each positional argument and each keyword argument is, and the call's closing
    #: parenthesis: (line, column, end line, end column), 1-based, end exclusive.
    positional_spans: tuple[tuple[int, int, int, int], ...] = field(default=(), compare=False)
    keyword_spans: tuple[tuple[int, int, int, int], ...] = field(default=(), compare=False)
    close_span: tuple[int, int, int, int] | None = field(default=None, compare=False)
    #: The keys of the ``**d`` dicts built in the calling function, in the order written, and
    #: whether they are all the keys those dicts can hold.
    spread: tuple[KeyOp, ...] = field(default=(), compare=False)
    spread_complete: bool = False
    #: Each keyword's value as written where it is a literal (``False``, ``0``, ``'C'``),
    #: else None: what a rule's ``keyword_value`` condition reads.
    keyword_literals: tuple[str | None, ...] = field(default=(), compare=False)
    #: Each positional argument's value where it is a literal, or a local of the calling
    #: function bound once to one (``buf = None; f(a, buf)``), else None.
    positional_literals: tuple[str | None, ...] = field(default=(), compare=False)

    def literal(self, keyword: str) -> str | None:
        """The literal passed as ``keyword`` (its source text), None when it is not passed
        or not a literal."""
        if keyword not in self.keywords or len(self.keyword_literals) != len(self.keywords):
            return None
        return self.keyword_literals[self.keywords.index(keyword)]

    def on(self, side: Side) -> CallShape:
        """The shape on one host release: the ``**d`` keys that are there on that side become
        keywords; ``**`` stays open only where the dicts' keys are not all known."""
        if not self.spread and not (self.double_star and self.spread_complete):
            return self
        keys: dict[str, tuple[int, int, int, int] | None] = {}
        complete = self.spread_complete
        for op in self.spread:
            holds = op.gate.holds(side) if op.gate is not None else True
            if holds is False:
                continue
            if op.op == "+":
                if holds is None:
                    complete = False  # perhaps there: not certain enough to report
                    continue
                keys[op.key] = op.span
            elif op.op == "-":
                keys.pop(op.key, None)
            elif holds:
                keys.clear()
        extra = [k for k in keys if k not in self.keywords]
        spans = self.keyword_spans
        if len(spans) == len(self.keywords):
            spans = spans + tuple(keys[k] or self.close_span or (0, 0, 0, 0) for k in extra)
        literals = self.keyword_literals
        if len(literals) == len(self.keywords):
            literals = literals + (None,) * len(extra)  # a ``**d`` key's value is not read
        return replace(
            self,
            keywords=self.keywords + tuple(extra),
            keyword_spans=spans,
            keyword_literals=literals,
            double_star=not complete,
            spread=(),
        )

    def span_of(self, problem: BindProblem) -> tuple[int, int, int, int] | None:
        """The argument a binding problem is about: the keyword passed or the first positional
        too many. None for a missing parameter: it has no token, so the finding spans the call
        from its callee to its closing parenthesis (as pyright and mypy report it)."""
        if problem.code in ("unexpected-keyword", "multiple-values", "renamed-keyword"):
            if problem.param in self.keywords and len(self.keyword_spans) == len(self.keywords):
                return self.keyword_spans[self.keywords.index(problem.param)]
        if problem.code == "too-many-positional" and problem.index < len(self.positional_spans):
            return self.positional_spans[problem.index]
        return None


@dataclass(frozen=True)
class BindProblem:
    """Why a call cannot bind: ``unexpected-keyword``, ``missing-required``, ``too-many-positional``."""

    code: str
    param: str
    detail: str = field(default="", compare=False)
    #: For ``too-many-positional``: the index of the first positional argument too many.
    index: int = field(default=0, compare=False)


def signature_of_function(func: griffe.Function, *, bound: bool, file: str = "") -> Signature:
    """Signature of a griffe function; drops the first parameter of bound methods."""
    params = [
        Param(
            name=p.name,
            kind=KIND_MAP.get(p.kind.value if p.kind else "", "positional_or_keyword"),
            has_default=p.default is not None,
            default=str(p.default) if p.default is not None else None,
            annotation=str(p.annotation) if p.annotation is not None else None,
        )
        for p in func.parameters
    ]
    if bound and params and params[0].kind in ("positional_only", "positional_or_keyword"):
        params = params[1:]
    returns = str(func.returns) if func.returns is not None else None
    return Signature(params=params, returns=returns, file=file, line=int(func.lineno or 0))


def bind(sig: Signature, call: CallShape) -> list[BindProblem]:
    """Problems binding ``call`` to ``sig`` (empty when it binds).

    With ``*args`` or ``**kwargs`` at the call site only what is certain is reported.
    """
    problems: list[BindProblem] = []
    positional_slots = [
        p for p in sig.params if p.kind in ("positional_only", "positional_or_keyword")
    ]
    by_name = {p.name: p for p in sig.params if p.kind in ("positional_or_keyword", "keyword_only")}
    if not call.star and call.positional > len(positional_slots) and not sig.accepts_var_positional:
        problems.append(
            BindProblem(
                "too-many-positional",
                str(call.positional),
                f"takes {len(positional_slots)} positional arguments but {call.positional} were given",
                index=len(positional_slots),
            )
        )
    filled = {p.name for p in positional_slots[: call.positional]}
    for kw in call.keywords:
        if kw in by_name:
            if kw in filled and not call.star:
                problems.append(
                    BindProblem(
                        "multiple-values", kw, f"{kw!r} passed twice (by position and keyword)"
                    )
                )
            filled.add(kw)
        elif not sig.accepts_var_keyword:
            problems.append(BindProblem("unexpected-keyword", kw, f"no parameter named {kw!r}"))
    if not (call.star or call.double_star):
        for p in sig.params:
            if p.required and p.name not in filled:
                problems.append(
                    BindProblem(
                        "missing-required", p.name, f"required parameter {p.name!r} not passed"
                    )
                )
    return problems


# -- dataclass fields ------------------------------------------------------------------------

_FIELD_FUNCS = {"field", "Field", "dataclasses.field", "pydantic.Field", "pydantic.fields.Field"}


def dataclass_fields(node: ast.ClassDef, *, kw_only: bool = False) -> list[Param]:
    """The ``__init__`` parameters a dataclass body declares, in order (``InitVar`` included)."""
    out: list[Param] = []
    after_kw_only = kw_only
    for stmt in node.body:
        if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
            continue
        ann = ast.unparse(stmt.annotation).strip("'\"")
        if re.match(r"^(typing\.)?ClassVar\b", ann):
            continue
        if ann in ("KW_ONLY", "dataclasses.KW_ONLY"):
            after_kw_only = True
            continue
        has_default = stmt.value is not None
        default = ast.unparse(stmt.value) if stmt.value is not None else None
        field_kw_only = after_kw_only
        if isinstance(stmt.value, ast.Call) and ast.unparse(stmt.value.func) in _FIELD_FUNCS:
            kws = {k.arg: k.value for k in stmt.value.keywords if k.arg}
            init, kw_only_arg = kws.get("init"), kws.get("kw_only")
            if isinstance(init, ast.Constant) and init.value is False:
                continue
            if isinstance(kw_only_arg, ast.Constant):
                field_kw_only = bool(kw_only_arg.value)
            first = stmt.value.args[0] if stmt.value.args else None
            positional_default = (
                first is not None
                and ast.unparse(stmt.value.func).endswith("Field")
                and not (isinstance(first, ast.Constant) and first.value is Ellipsis)
            )
            has_default = bool(
                {"default", "default_factory"} & set(kws) or positional_default
            ) and not (
                isinstance(given := kws.get("default"), ast.Constant) and given.value is Ellipsis
            )
            default = ast.unparse(kws["default"]) if "default" in kws else default
        out.append(
            Param(
                name=stmt.target.id,
                kind="keyword_only" if field_kw_only else "positional_or_keyword",
                has_default=has_default,
                default=default if has_default else None,
                annotation=ann,
                init_var=bool(re.match(r"^(dataclasses\.)?InitVar\b", ann)),
            )
        )
    return out
