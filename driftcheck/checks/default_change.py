"""Default changes: a call that leaves out a host parameter (or a dataclass / pydantic / msgspec /
attrs field of a constructor) whose default changed between the baseline and the target. The
call still binds; it now runs with the new default.

Only defaults that are values can be compared (literals, or names of a module's literal
constants); a default computed at call time is not reported, nor are two falsy defaults of a
flag or of a parameter the target only tests for truth, a ``None`` the code of its release fills
in with the other release's value (or with one it works out), a deprecation cycle's marker
(``'deprecated'``, ``'warn'``: the old behaviour, with a warning), or an old default naming host
code the target no longer has. A ``None`` on one side of a flag is read as its release reads it:
in the function and, where the value is handed on (``Info(check=check)``), in the readers of that
attribute in the files naming the receiver; ``x is False`` reads None as True, a truth test as
False. The same as the other side is no change; the opposite is a flip. Severity
from evidence: a flag (``bool``) whose default went from True to False or back is a warning, an
error where the target's own code asserts or raises under a test of it (in the function or the
class's ``__init__``/``__post_init__``/validators); any other changed value is information.
The fix passes the baseline's default explicitly; it is offered as unsafe, and as safe once
witnesses (``--verify``) show both defaults on the real releases and the rewritten call binds.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from functools import lru_cache, partial

from driftcheck.checks.context import CheckContext, finding, side
from driftcheck.checks.declaration import Check, CheckId
from driftcheck.client.use import Use
from driftcheck.findings import Evidence, Finding, Fix
from driftcheck.host.annotations import accepts_none
from driftcheck.host.api import Found, HostAPI
from driftcheck.host.callers import functions_around
from driftcheck.host.signature import Param, Signature
from driftcheck.kinds import FixSafety, Kind, Severity, Witness

DEFAULT_CHANGE = CheckId(
    "default-change",
    Kind.BEHAVIOUR_CHANGE,
    Severity.WARNING,
    Witness.DEFAULT,
    fixes=(FixSafety.UNSAFE, FixSafety.MANUAL),
    codemods=("add-keyword",),
)
#: What this check reports; :mod:`driftcheck.checks.catalog` lists it.
CHECK = Check(__name__, (DEFAULT_CHANGE,))

_VAR = ("var_positional", "var_keyword")


def check(use: Use, ctx: CheckContext) -> list[Finding]:
    """Report parameters a call leaves to a default that changed."""
    if use.kind != "call" or use.shape is None or ctx.baseline is None:
        return []
    target, base = ctx.lookup(ctx.target, use), ctx.lookup(ctx.baseline, use)
    if not isinstance(target, Found) or not isinstance(base, Found):
        return []
    sig_t, sig_b = ctx.target.signature(target), ctx.baseline.signature(base)
    if sig_t is None or sig_b is None:
        return []
    shape = use.shape.on(side(ctx.target))
    if shape.star or shape.double_star:
        return []  # unknown what is passed
    passed = set(shape.keywords) | set(_positional_names(sig_t, shape.positional))
    name = use.member or use.symbol.rsplit(".", 1)[-1]
    out: list[Finding] = []
    for p in sig_t.params:
        if p.name in passed or not p.has_default or p.kind in _VAR or p.init_var:
            continue
        q = sig_b.param(p.name)
        if q is None or not q.has_default or q.kind in _VAR:
            continue
        old, new = _value(ctx.baseline, base, q), _value(ctx.target, target, p)
        if old is None or new is None or old == new:
            continue
        if old == "None" and _filled_in(ctx.baseline, base, p.name, new):
            continue  # the baseline's None stood for a value its own code filled in
        if new == "None" and _filled_in(ctx.target, target, p.name, old):
            continue  # the target's None stands for the old value (or one it works out)
        # What a None of a flag means where its release reads it (``x is False``: as True;
        # ``if x:``: as False): the same as the other side's value is no change, the opposite
        # one is a flip.
        was, now = old, new
        if old == "None" and new in _BOOLS:
            was = _none_read_as(ctx.baseline, base, q.name) or old
        if new == "None" and old in _BOOLS:
            now = _none_read_as(ctx.target, target, p.name) or new
        if was == now:
            continue
        if _sentinel(new):
            continue  # a deprecation cycle's marker: the old behaviour, with a warning
        if _same_truth(q, p, old, new, partial(_truth_tested_only, ctx.target, target, p.name)):
            continue
        if _names_gone_host_code(ctx, old):
            continue
        if _documented_alike(ctx.target, target, p.name, new, old):
            continue  # the target's own docs give the old default the new one's meaning
        # A flag that now takes the other branch is a warning (an error where the target's
        # own code then asserts or raises on it); any other value change is information.
        # A None may stand for a value worked out elsewhere ("auto"): only True <-> False is a
        # flip for certain.
        flips = _truth(was) != _truth(now) and _is_flag(q, p) and "None" not in (was, now)
        refused = _refused_under(ctx.target, target, p.name) if flips else ""
        severity = Severity.ERROR if refused else Severity.WARNING if flips else Severity.INFO
        why = f"; {refused}" if refused else ""
        if (was, now) != (old, new) and flips:
            side_none = ctx.baseline if was != old else ctx.target
            why = f" (None reads as {was if was != old else now} on {side_none.version}){why}"
        out.append(
            finding(
                use,
                DEFAULT_CHANGE,
                severity=severity,
                symbol=f"{target.path}({p.name}=)",
                message=(
                    f"{name}(...) leaves {p.name}= to its default, which changed from "
                    f"{q.default} to {p.default} in {ctx.target.name} {ctx.target.version}"
                    f"{why}"
                ),
                evidence=(
                    Evidence(ctx.baseline.version, sig_b.file, sig_b.line, f"{p.name}={q.default}"),
                    Evidence(ctx.target.version, sig_t.file, sig_t.line, f"{p.name}={p.default}"),
                ),
                fix=_fix(p.name, q, p, was if old == "None" and was != old else None),
                witness={"check": "default", "field": p.name},
            )
        )
    return out


def _positional_names(sig: Signature, n: int) -> list[str]:
    slots = [p.name for p in sig.params if p.kind in ("positional_only", "positional_or_keyword")]
    return slots[:n]


def _fix(param: str, old: Param, new: Param, meant: str | None = None) -> Fix:
    """Pass the baseline's default; where it was None, the value its release read None as
    (``meant``), when that is known."""
    text = old.default or ""
    if text == "None" and meant is not None:
        return Fix(
            FixSafety.UNSAFE,
            f"pass {param}={meant} (what the baseline's None meant: its own code reads it as "
            f"{meant}) to keep the old behaviour",
            codemod="add-keyword",
            params=(("keyword", param), ("value", meant)),
        )
    literal = _literal(text) is not None
    if not literal:
        return Fix(
            FixSafety.MANUAL,
            f"pass {param}={text} (the baseline's default) if the old behaviour is meant",
        )
    if text == "None" and new.annotation and not accepts_none(new.annotation):
        return Fix(
            FixSafety.MANUAL,
            f"pass {param}= the value that means what None meant: the target takes "
            f"{new.annotation}, not None",
        )
    return Fix(
        FixSafety.UNSAFE,
        f"pass {param}={text} (the baseline's default) to keep the old behaviour",
        codemod="add-keyword",
        params=(("keyword", param), ("value", text), ("witnessed", "safe")),
    )


@lru_cache(maxsize=8192)
def _literal(text: str) -> str | None:
    """The ``repr`` of a literal's value (None: no literal); each text read once, not once
    per call that leaves the parameter to its default."""
    try:
        return repr(ast.literal_eval(text))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _value(api: HostAPI, found: Found, p: Param) -> str | None:
    """The default as a comparable value: a literal, or a module constant holding one."""
    text = p.default or ""
    got = _literal(text)
    if got is not None:
        return got
    if text.isidentifier():
        # The name is read in the module that defines the function or class.
        module = getattr(getattr(getattr(found, "obj", None), "module", None), "path", None)
        if not module:
            return None
        const = api.resolve(f"{module}.{text}")
        value = getattr(getattr(const, "obj", None), "value", None)
        if isinstance(value, str):
            return _literal(value)
    return None


_FALSY = ("None", "False", "0", "''", "0.0")
_BOOLS = ("True", "False")


def _truth(value: str) -> bool | None:
    try:
        return bool(ast.literal_eval(value))
    except (ValueError, SyntaxError, TypeError):
        return None


#: Names a flag's annotation may hold beside ``bool``.
_FLAG_WORDS = {"bool", "None", "NoneType", "Optional", "Union", "typing"}
#: Generic names that hold values rather than wrap a type: ``list[bool]`` is no flag.
_CONTAINERS = {
    "list", "dict", "set", "frozenset", "tuple", "type", "List", "Dict", "Set", "FrozenSet",
    "Tuple", "Type", "Sequence", "Mapping", "Iterable", "Iterator", "Collection", "Callable",
}  # fmt: skip


def _flag_words(annotation: str) -> set[str]:
    """The names of an annotation, less wrappers of one type (``SkipValidation[bool]``,
    ``Final[bool]``: a name subscripted with a single argument that is no container)."""
    words = set(re.findall(r"[A-Za-z_]\w*", annotation))
    for m in re.finditer(r"([A-Za-z_]\w*)\[([^\[\],]*)\]", annotation):
        if m.group(1) not in _CONTAINERS and m.group(1) not in _FLAG_WORDS:
            words.discard(m.group(1))
    return words


def _is_flag(old: Param, new: Param) -> bool:
    """Both sides annotated, with nothing but ``bool`` (and ``None``) inside."""
    words = [_flag_words(p.annotation or "") for p in (old, new)]
    return all(w and "bool" in w and w <= _FLAG_WORDS for w in words if w) and any(words)


def _same_truth(old: Param, new: Param, a: str, b: str, truth_only: Callable[[], bool]) -> bool:
    """Two falsy defaults (None and False, None and ''), where the parameter is a flag or the
    target's own code only tests its truth: they take the same path."""
    if not (a in _FALSY and b in _FALSY):
        return False
    return _is_flag(old, new) or truth_only()


def _truth_tested_only(api: HostAPI, found: Found, param: str) -> bool:
    """Is every read of ``param`` in the target's own code a truth test?"""
    seen = False
    for root in _bodies(api, found):
        parents = {c: n for n in ast.walk(root) for c in ast.iter_child_nodes(n)}
        for node in ast.walk(root):
            if not _is(node, param) or isinstance(getattr(node, "ctx", None), ast.Store):
                continue
            seen = True
            up = parents.get(node)
            tested = (
                (isinstance(up, (ast.If, ast.While, ast.IfExp)) and up.test is node)
                or isinstance(up, ast.BoolOp)
                or (isinstance(up, ast.UnaryOp) and isinstance(up.op, ast.Not))
            )
            if not tested:
                return False
    return seen


def _names_gone_host_code(ctx: CheckContext, value: str) -> bool:
    """An old default that names host code the target no longer has (``"vllm.core.scheduler.
    Scheduler"``): the host's own default moved with its code; passing it would break."""
    text = value.strip("'\"")
    if text == value or "." not in text or text.split(".", 1)[0] not in ctx.target.roots:
        return False
    return ctx.target.resolve(text) is None


def _bodies(api: HostAPI, found: Found) -> list[ast.AST]:
    """The code that runs with the arguments: the function, or a class's ``__init__``,
    ``__post_init__`` and decorated methods (validators)."""
    if found.kind == "class":
        cls = api.class_node(found)
        if cls is None:
            return []
        return [
            s
            for s in cls.body
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
            and (s.name in ("__post_init__", "__init__") or s.decorator_list)
        ]
    node = api.def_node(found)
    return [node] if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else []


def _sentinel(value: str) -> bool:
    """``'deprecated'`` / ``'warn'``: the default a deprecation cycle puts in place, which keeps
    the old behaviour and warns (the value the default will become is announced, not in use)."""
    return value.strip("'\"").lower() in ("deprecated", "warn") and value[:1] in "'\""


def _filled_in(api: HostAPI, found: Found, param: str, new: str) -> bool:
    """Does the code fill in ``param`` when it is None (``if self.x is None: self.x = 0``)
    with ``new``, or with something that cannot be read as a value?"""
    for root in _bodies(api, found):
        for node in ast.walk(root):
            # ``x = True if x is None else x`` / ``x = x if x is not None else True``
            if (
                isinstance(node, ast.Assign)
                and any(_is(t, param) for t in node.targets)
                and isinstance(node.value, ast.IfExp)
                and (when_none := _none_branch(node.value, param)) is not None
            ):
                got = _literal(ast.unparse(when_none))
                if got is None or got == new:
                    return True
            if not (isinstance(node, ast.If) and _none_test(node.test, param)):
                continue
            for stmt in ast.walk(node):
                if isinstance(stmt, ast.Assign) and any(_is(t, param) for t in stmt.targets):
                    got = _literal(ast.unparse(stmt.value))
                    if got is None or got == new:
                        return True
    return False


def _none_branch(expr: ast.IfExp, param: str) -> ast.expr | None:
    """The branch of ``a if test else b`` taken when ``param`` is None, where the test is
    exactly ``param is None`` or ``param is not None``."""
    test = expr.test
    if not (
        isinstance(test, ast.Compare)
        and _is(test.left, param)
        and len(test.ops) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    ):
        return None
    if isinstance(test.ops[0], ast.Is | ast.Eq):
        return expr.body
    if isinstance(test.ops[0], ast.IsNot | ast.NotEq):
        return expr.orelse
    return None


def _is(node: ast.AST, param: str) -> bool:
    return (isinstance(node, ast.Name) and node.id == param) or (
        isinstance(node, ast.Attribute) and node.attr == param
    )


def _none_test(test: ast.AST, param: str) -> bool:
    return any(
        isinstance(n, ast.Compare)
        and _is(n.left, param)
        and any(isinstance(c, ast.Constant) and c.value is None for c in n.comparators)
        for n in ast.walk(test)
    )


def _refused_under(api: HostAPI, found: Found, param: str) -> str:
    """An ``assert``/``raise`` of the target's own code under a test naming ``param``."""
    for root in _bodies(api, found):
        for node in ast.walk(root):
            if isinstance(node, ast.Assert) and _names(node.test, param):
                return f"the host asserts on it ({found.file}:{node.lineno})"
            if isinstance(node, ast.If) and _names(node.test, param):
                if any(isinstance(s, ast.Raise) for s in ast.walk(node)):
                    return f"the host raises under a test of it ({found.file}:{node.lineno})"
    return ""


def _names(test: ast.AST, param: str) -> bool:
    return any(_is(n, param) for n in ast.walk(test))


def _documented_alike(api: HostAPI, found: Found, param: str, new: str, old: str) -> bool:
    """Does the target document the parameter with one value as the other's alias (``Set to 0
    (or -1) to consider all tokens``)? Then the old default still means what the new one does:
    the host says so itself. (Only the parenthesised form: ``'fast' or 'slow'`` lists choices.)"""
    if not _short_literal(new) or not _short_literal(old):
        return False
    a, b = (rf"(?<![\w.-])[`]*{re.escape(v)}[`]*(?![\w.])" for v in (new, old))
    either = r"\s*\(\s*or\s+"
    alike = re.compile(rf"{a}{either}{b}\s*\)|{b}{either}{a}\s*\)")
    return any(alike.search(text) for text in _param_docs(api, found, param))


def _short_literal(value: str) -> bool:
    return (
        len(value) <= 12 and re.fullmatch(r"-?\d+(?:\.\d+)?|'[\w-]*'|\"[\w-]*\"", value) is not None
    )


def _param_docs(api: HostAPI, found: Found, param: str) -> list[str]:
    """What the host writes about one parameter: a dataclass field's docstring, and the
    paragraph of the class's or function's docstring that starts with the parameter's name."""
    node = api.class_node(found) if found.kind == "class" else api.def_node(found)
    if not isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        return []
    out: list[str] = []
    body = node.body
    for stmt, after in zip(body, body[1:], strict=False):
        if (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and stmt.target.id == param
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            out.append(after.value.value)
    lines = (ast.get_docstring(node) or "").splitlines()
    entry = re.compile(rf"\s*{re.escape(param)}\b[^:]*:")
    field_line = re.compile(r"\s*\w+\b[^:]{0,40}:")
    for i, line in enumerate(lines):
        if entry.match(line):
            end = next(
                (j for j in range(i + 1, len(lines)) if field_line.match(lines[j])), len(lines)
            )
            out.append(" ".join(x.strip() for x in lines[i:end]))
    return out


#: Bumped when what :func:`_none_read_as` reads changes (its answers are kept in snapshots).
_NONE_READ_FORMAT = 1


def _none_read_as(api: HostAPI, found: Found, param: str) -> str | None:
    """``"True"`` or ``"False"``: what a None of ``param`` means wherever its release reads it,
    or None when the reads disagree, test for None itself, or use the value otherwise.

    The reads are those of the function (or of a class's methods) and, where it hands the value on (``Info(check_fields=check_fields)``,
    ``self.x = x``), the reads of that attribute in the files that name the receiver (pydantic
    2's ``dec.info.check_fields is False``: None behaves as True). ``x is False`` / ``x ==
    False`` read None as True, ``x is True`` and a truth test (``if x``, ``not x``) as False."""
    key = f"none-read:{_NONE_READ_FORMAT}:{found.path}:{param}"
    return api.fact(key, lambda: _read_none(api, found, param))


def _read_none(api: HostAPI, found: Found, param: str) -> str | None:
    votes: set[str] = set()
    carriers: list[tuple[str, set[str]]] = []
    for root in _readers(api, found):
        parents = {c: n for n in ast.walk(root) for c in ast.iter_child_nodes(n)}
        for node in ast.walk(root):
            if not _is(node, param) or not isinstance(getattr(node, "ctx", None), ast.Load):
                continue
            up = parents.get(node)
            if isinstance(up, ast.keyword) and up.arg:
                call = parents.get(up)
                callee = _callee_name(call.func) if isinstance(call, ast.Call) else ""
                if not callee:
                    return None
                carriers.append((up.arg, {callee}))
                continue
            if isinstance(up, ast.Assign) and up.value is node:
                targets = [t for t in up.targets if isinstance(t, ast.Attribute)]
                if len(targets) != len(up.targets):
                    return None
                carriers.extend((t.attr, set()) for t in targets)
                continue
            vote = _vote(node, up)
            if vote is None:
                return None
            votes.add(vote)
    for attr, names in carriers:
        for vote in _attribute_votes(api, found.file, attr, names):
            if vote is None:
                return None
            votes.add(vote)
    return votes.pop() if len(votes) == 1 else None


def _readers(api: HostAPI, found: Found) -> list[ast.AST]:
    """The code that reads a parameter's value: the function, or every method of a class (a
    field is read as ``self.x`` wherever the class's own code needs it)."""
    if found.kind != "class":
        return _bodies(api, found)
    cls = api.class_node(found)
    if cls is None:
        return []
    return [s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _callee_name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else ""


def _vote(node: ast.AST, up: ast.AST | None) -> str | None:
    """What one read makes of a None: ``"True"``, ``"False"``, or None (it tells None apart,
    or uses the value some other way)."""
    if isinstance(up, ast.Compare) and len(up.ops) == 1:
        other = up.comparators[0] if up.left is node else up.left
        if not isinstance(up.ops[0], (ast.Is, ast.IsNot, ast.Eq, ast.NotEq)):
            return None
        if isinstance(other, ast.Constant) and other.value is False:
            return "True"  # None is not False: it goes the way True does
        if isinstance(other, ast.Constant) and other.value is True:
            return "False"
        return None
    tested = (
        (isinstance(up, (ast.If, ast.While, ast.IfExp, ast.Assert)) and up.test is node)
        or (isinstance(up, ast.UnaryOp) and isinstance(up.op, ast.Not))
        or isinstance(up, ast.BoolOp)
    )
    return "False" if tested else None


def _attribute_votes(api: HostAPI, home: str, attr: str, names: set[str]) -> list[str | None]:
    """The votes of every read of ``.attr`` in the release's files that name one of ``names``
    (the callable the value was handed to), or in ``home`` when the value was stored on
    ``self``. Only the functions around a line that reads it are parsed."""
    needle = f".{attr}"
    word = (
        re.compile(r"\b(" + "|".join(re.escape(n) for n in sorted(names)) + r")\b")
        if names
        else None
    )
    out: list[str | None] = []
    for rel, text in api.source_texts().items():
        if needle not in text:
            continue
        if word is None and rel != home:
            continue
        if word is not None and not word.search(text):
            continue
        lines = text.splitlines()
        for func in functions_around(lines, lambda line: needle in line):
            parents = {c: n for n in ast.walk(func) for c in ast.iter_child_nodes(n)}
            for node in ast.walk(func):
                if (
                    isinstance(node, ast.Attribute)
                    and node.attr == attr
                    and isinstance(node.ctx, ast.Load)
                ):
                    up = parents.get(node)
                    if isinstance(up, ast.keyword):
                        continue  # handed on again: read where it lands, not followed
                    out.append(_vote(node, up))
    return out
