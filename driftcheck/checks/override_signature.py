"""Override and monkeypatch signatures: a client function that stands in for a host method
(a subclass override, or a function bound over it with ``types.MethodType``) must still accept
what the host passes it on the target.

A host method's ``**kwargs`` that only goes on to the same method of the next class in its MRO
(``super().__init__(**kwargs)``), one that takes no ``**`` of its own, brings no keyword the
host may pass: not reported (Django 4.x's ``RelatedField.__init__`` over ``Field.__init__``).
A parameter the host probes a callable for before passing it (``supports_kw(cls, "x")``,
:mod:`driftcheck.host.sig_probes`) is not one the override must take.

An ``__init__`` override of a class only the client builds is information (the host never
calls it) unless a host base builds its instance's own class again (``type(self)(**params)``):
an instance handed to the host reaches the override that way.

An ``__init__`` override is checked against the host's own constructions of its class when
they can all be read (:func:`_host_builds`): the class returned from the client's override of a
host method whose results the host only calls (vLLM's ``impl_cls = backend.get_impl_cls();
impl_cls(num_heads=..., ...)``), the host bases' rebuilds (``type(self)(**params)``, ``cls(...)``)
and any ``type(obj)(...)`` in the host. A positional slot the parent added, or a keyword, is
reported only when one of those calls can meet it; a class handed over any other way keeps the
signature's reading.

A ``__post_init__`` override of a host dataclass's subclass is called by the dataclass's
``__init__`` with every ``InitVar`` by position (the host's, then the client dataclass's own): one
the host added leaves it too few slots (TypeError on the target).

An override of a private host method (``_name``, not a dunder) that the baseline's own code
called and the target's reaches nowhere (no ``x._name`` on anything but a module, no
``"_name"`` string, no ``self._name`` in a class the overridden one inherits from) is reported as
a warning that the hook no longer runs, not as a misfit of its parameters: pydantic 2 keeps
``BaseModel._calculate_keys`` as a deprecated ``(*args, **kwargs)`` stand-in that nothing calls
(:func:`driftcheck.host.callers.method_dispatch`)."""

from __future__ import annotations

import ast
import re
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import replace
from typing import cast

from driftcheck.checks.context import CheckContext, finding
from driftcheck.checks.declaration import Check, CheckId
from driftcheck.client.use import Use
from driftcheck.findings import Evidence, Finding, Fix
from driftcheck.host.api import Found, HostAPI
from driftcheck.host.callers import method_dispatch
from driftcheck.host.code_text import line_starts, spells_word
from driftcheck.host.signature import Param, Signature
from driftcheck.host.walk import walk_with_parents
from driftcheck.kinds import FixSafety, Kind, Severity, Witness

OVERRIDE_SIGNATURE = CheckId(
    Kind.OVERRIDE_SIGNATURE.value,
    Kind.OVERRIDE_SIGNATURE,
    Severity.ERROR,
    Witness.PARAMS,
    fixes=(FixSafety.SAFE, FixSafety.MANUAL),
    codemods=("accept-kwargs",),
)
#: What this check reports; :mod:`driftcheck.checks.catalog` lists it.
CHECK = Check(__name__, (OVERRIDE_SIGNATURE,))


def _problems(client: list[tuple[str, str, bool]], host: Signature) -> set[tuple[str, str]]:
    """Ways the host's calls (per its own signature) may not bind to the client function."""
    params = client[1:]  # the client's self
    names = {n for n, k, _ in params if k in ("positional_or_keyword", "keyword_only")}
    slots = [n for n, k, _ in params if k in ("positional_only", "positional_or_keyword")]
    has_args = any(k == "var_positional" for _, k, _ in params)
    has_kwargs = any(k == "var_keyword" for _, k, _ in params)
    out: set[tuple[str, str]] = set()
    host_positional = [
        p for p in host.params if p.kind in ("positional_only", "positional_or_keyword")
    ]
    if len(host_positional) > len(slots) and not has_args:
        extra = ", ".join(p.name for p in host_positional[len(slots) :])
        out.add(
            (
                "positional",
                f"the host may pass {len(host_positional)} positional arguments, it takes "
                f"{len(slots)} (no {extra})",
            )
        )
    for p in host.params:
        if p.kind == "keyword_only" and p.name not in names and not has_kwargs:
            out.add(("keyword", f"the host may pass keyword {p.name!r}"))
    if host.accepts_var_keyword and not has_kwargs:
        out.add(
            (
                "var-keyword",
                "the host accepts extra keyword arguments it may forward; this function has no **kwargs",
            )
        )
    host_names = {p.name for p in host.params}
    for i, (n, k, has_default) in enumerate(params):
        if has_default or k in ("var_positional", "var_keyword"):
            continue
        if i >= len(host_positional) and n not in host_names:
            out.add(("required", f"it requires {n!r}, which the host does not pass"))
    return out


def _lacked_before(client: list[tuple[str, str, bool]], host: Signature) -> set[tuple[str, str]]:
    """Host parameters the client function lacked on the baseline too, as the target's
    ``keyword`` problems name them: a parameter the host made keyword-only (SQLAlchemy 2.0's
    ``Session.get_bind(mapper, *, clause, bind)``) could be passed by keyword before as well, so
    an override without it is no newer misfit."""
    names = {n for n, k, _ in client[1:] if k in ("positional_or_keyword", "keyword_only")}
    if any(k == "var_keyword" for _, k, _ in client):
        return set()
    return {
        ("keyword", f"the host may pass keyword {p.name!r}")
        for p in host.params
        if p.kind in ("positional_or_keyword", "keyword_only") and p.name not in names
    }


def runtime_problems(client: list[tuple[str, str, bool]], host: list[list]) -> set[tuple[str, str]]:
    """:func:`_problems` for a host signature read at run time (a witness's
    ``[name, kind, has_default]`` list, ``self`` removed)."""
    params = [Param(str(n), str(k), bool(d)) for n, k, d in host]
    return _problems(client, Signature(params, None))


def check(use: Use, ctx: CheckContext) -> list[Finding]:
    """Report new ways the host's calls no longer fit a client override or replacement."""
    if use.kind != "override" or not use.params or not use.receiver:
        return []
    if use.member == "__post_init__":
        return _post_init(use, ctx)
    target = ctx.lookup(ctx.target, use)
    if not isinstance(target, Found) or target.kind != "function":
        return []
    sig_t = ctx.target.signature(target)
    if sig_t is None:
        return []
    problems = _problems(use.params, sig_t)
    if any(code == "var-keyword" for code, _ in problems) and _passed_up(ctx.target, target):
        problems = {(code, text) for code, text in problems if code != "var-keyword"}
    if problems and (asked := _probed(ctx.target, use.params, sig_t)):
        # The host asks the callable for these parameters before it passes them: an override
        # without them is called the old way.
        problems = _problems(
            use.params, replace(sig_t, params=[p for p in sig_t.params if p.name not in asked])
        )
    evidence = [Evidence(ctx.target.version, sig_t.file, sig_t.line)]
    if ctx.baseline is not None:
        base = ctx.lookup(ctx.baseline, use)
        sig_b = ctx.baseline.signature(base) if isinstance(base, Found) else None
        if sig_b is None:
            return []
        problems -= _problems(use.params, sig_b)
        problems -= _lacked_before(use.params, sig_b)
        evidence.insert(0, Evidence(ctx.baseline.version, sig_b.file, sig_b.line))
    if problems and use.member == "__init__" and not use.via:
        # Only what the host's own constructions of the class can meet: a slot its parent
        # added is no break when every host call passes by keyword.
        calls = _host_builds(use, ctx, ctx.target)
        if calls is not None:
            problems = _hit_by(problems, use.params, calls)
    if not problems:
        return []
    if ctx.baseline is not None and _private_hook(use.member or "") and not use.via:
        dead = _no_longer_called(use, ctx, ctx.baseline, evidence[-1])
        if dead is not None:
            return [dead]
    severity = (
        Severity.WARNING if {code for code, _ in problems} == {"var-keyword"} else Severity.ERROR
    )
    how = f" ({use.via})" if use.via else ""
    details = "; ".join(sorted(text for _, text in problems))
    own = _built_by_client_only(use, ctx) if not use.via else ""
    if own and use.member == "__init__" and not _rebuilds_itself(ctx.target, use.receiver or ""):
        # Nothing hands the class to the host: only the client's own calls construct it, with
        # its own arguments (its super().__init__ call is checked as a call).
        severity = Severity.INFO
        details += f"; but only the client's own code builds {own}, so the host never calls it"
    elif own and (holders := _held_by_client_only(ctx, own, use.member or "")):
        severity = Severity.INFO
        details += (
            f"; but only the client's own code builds {own} and holds it ({holders}), "
            f"whose own methods call it, so the host never calls it"
        )
    return [
        finding(
            use,
            OVERRIDE_SIGNATURE,
            severity=severity,
            symbol=use.symbol,
            message=f"{use.member}() stands in for {use.symbol}{how}: {details} in {ctx.target.name} {ctx.target.version}",
            evidence=tuple(evidence),
            fix=Fix(
                FixSafety.SAFE,
                "accept and ignore extra keyword arguments (**_kwargs)",
                codemod="accept-kwargs",
            )
            if severity == Severity.WARNING
            else None
            if severity == Severity.INFO
            else Fix(FixSafety.MANUAL, "accept the host's new arguments"),
        )
    ]


def _private_hook(name: str) -> bool:
    """A host's private method (``_calculate_keys``): only the host's own code calls it, so
    where that code no longer does, nothing does (a public one has the client's users too, a
    dunder the interpreter)."""
    return name.startswith("_") and not name.startswith("__")


def _no_longer_called(
    use: Use, ctx: CheckContext, baseline: HostAPI, defined: Evidence
) -> Finding | None:
    """The override of a private host method the baseline's code called and the target's
    never reaches (pydantic 2's ``BaseModel._calculate_keys``, kept only as a deprecated
    stand-in): the override is dead there, so how its parameters meet the host's signature
    no longer matters; that it stopped running does."""
    member = use.member or ""
    owner = use.receiver or ""
    before = method_dispatch(baseline, member, owner)
    if not before or not before[0] or method_dispatch(ctx.target, member, owner) is not None:
        return None
    file, line = before
    return finding(
        use,
        OVERRIDE_SIGNATURE,
        severity=Severity.WARNING,
        symbol=use.symbol,
        message=(
            f"{member}() stands in for {use.symbol}, which {ctx.target.name} "
            f"{ctx.target.version} never calls ({baseline.version} called it at {file}:{line}): "
            "the override no longer runs"
        ),
        evidence=(
            Evidence(baseline.version, file, line, "calls it"),
            replace(defined, note=f"defined; the host's code reaches .{member} nowhere"),
        ),
        fix=Fix(FixSafety.MANUAL, "move what the override did to what the host calls now"),
    )


def unreached_scope(use: Use, ctx: CheckContext) -> str:
    """Why the client method a use sits in no longer runs on the target ('' when it may): it
    overrides a private host method that the baseline's code called and the target's never
    reaches (:func:`_no_longer_called`), and the client itself never calls it. Its uses'
    findings are then at most info (pydantic 2.5.3 never calls sqlmodel's ``_calculate_keys``,
    so its deprecated reads never warn)."""
    if ctx.baseline is None or not use.scope:
        return ""
    owner, _, member = use.scope.rpartition(".")
    if not _private_hook(member) or owner not in ctx.client_names:
        return ""
    memo = ctx.__dict__.setdefault("_unreached", {})
    key = (use.file, use.scope)
    if key not in memo:
        memo[key] = _unreached(use, member, ctx, ctx.baseline)
    return cast(str, memo[key])


def _unreached(use: Use, member: str, ctx: CheckContext, baseline: HostAPI) -> str:
    lines = ctx.client_lines.get(use.file, [])
    defined = re.compile(rf"\s*(?:async\s+)?def\s+{re.escape(member)}\b")
    start = next(
        (n for n in range(min(use.line, len(lines)), 0, -1) if defined.match(lines[n - 1])), 0
    )
    override = next(
        (
            u
            for u in ctx.uses_in(use.file)
            if u.kind == "override" and u.member == member and u.line == start and not u.via
        ),
        None,
    )
    if override is None:
        return ""
    before = method_dispatch(baseline, member, override.receiver or "")
    if not before or not before[0]:
        return ""
    if method_dispatch(ctx.target, member, override.receiver or "") is not None:
        return ""
    mention = re.compile(rf"\.{re.escape(member)}\b|[\"']{re.escape(member)}[\"']")
    if any(mention.search(line) for text in ctx.client_lines.values() for line in text):
        return ""  # the client calls it (or names it) itself
    return (
        f"in {member}(), which overrides {override.symbol} and {ctx.target.name} "
        f"{ctx.target.version} never calls (line {override.line}): it does not run there"
    )


def _probed(api: HostAPI, client: list[tuple[str, str, bool]], host: Signature) -> set[str]:
    """The host's parameters the client function lacks that the host probes a callable for
    before passing them (:mod:`driftcheck.host.sig_probes`)."""
    own = {n for n, _, _ in client}
    lacking = {p.name for p in host.params if p.name not in own}
    if not lacking or lacking == {p.name for p in host.params}:
        return set()
    from driftcheck.host.sig_probes import probed_parameters

    return lacking & set(probed_parameters(api))


def _passed_up(api: HostAPI, found: Found) -> bool:
    """Whether the method's ``**kwargs`` is used only as ``super().<same>(**kwargs)`` and that
    method (the next class in the MRO that defines it) takes no ``**`` of its own (read once
    per method: every override of it asks)."""
    known = api.__dict__.setdefault("_passed_up", {})
    if found.path not in known:
        known[found.path] = _reads_passed_up(api, found)
    return known[found.path]


def _reads_passed_up(api: HostAPI, found: Found) -> bool:
    node = api.def_node(found)
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.args.kwarg is None:
        return False
    var = node.args.kwarg.arg
    uses = [n for n in ast.walk(node) if isinstance(n, ast.Name) and n.id == var]
    ups = [
        call
        for call in ast.walk(node)
        if isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == node.name
        and isinstance(call.func.value, ast.Call)
        and ast.unparse(call.func.value.func) == "super"
        and any(
            k.arg is None and isinstance(k.value, ast.Name) and k.value.id == var
            for k in call.keywords
        )
    ]
    if len(uses) != 1 or len(ups) != 1:
        return False
    owner = api.resolve(found.path.rsplit(".", 1)[0])
    if not isinstance(owner, Found) or owner.kind != "class":
        return False
    chain, _ = api.mro(owner)
    for klass in chain[1:]:
        if node.name in getattr(klass.obj, "members", {}):
            nxt = api.resolve(f"{klass.path}.{node.name}")
            sig = api.signature(nxt) if isinstance(nxt, Found) else None
            return sig is not None and not sig.accepts_var_keyword
    return False


def init_vars_passed(api: HostAPI, cls_path: str, own: tuple[str, ...]) -> Signature | None:
    """What a host dataclass's ``__init__`` passes to ``__post_init__``: its ``InitVar``
    fields by position, then the client dataclass's own (``own``); None where the class's
    constructor is not one a dataclass decorator makes."""
    cls = api.resolve(cls_path)
    if not isinstance(cls, Found) or cls.kind != "class":
        return None
    chain, _ = api.mro(cls)
    maker = next((k for k in chain if api.is_dataclass(k) or "__init__" in k.obj.members), None)
    if maker is None or "__init__" in maker.obj.members:
        return None
    sig = api.signature(cls)
    if sig is None:
        return None
    names = [p.name for p in sig.params if p.init_var] + [n for n in own]
    params = [Param(n, "positional_only", False) for n in names]
    return Signature(params, None, file=sig.file, line=sig.line)


def _post_init(use: Use, ctx: CheckContext) -> list[Finding]:
    """A ``__post_init__`` override of a host dataclass's subclass: the dataclass machinery
    calls it with every ``InitVar`` by position, so one the host added reaches an override that
    has no slot for it (TypeError on the target)."""
    assert use.receiver is not None and use.params is not None
    sig_t = init_vars_passed(ctx.target, use.receiver, use.init_vars)
    if sig_t is None:
        return []
    problems = {(c, t) for c, t in _problems(use.params, sig_t) if c == "positional"}
    evidence = [Evidence(ctx.target.version, sig_t.file, sig_t.line)]
    if ctx.baseline is not None:
        sig_b = init_vars_passed(ctx.baseline, use.receiver, use.init_vars)
        if sig_b is None:
            return []
        problems = {
            (c, t) for c, t in problems if c not in {c for c, _ in _problems(use.params, sig_b)}
        }
        evidence.insert(0, Evidence(ctx.baseline.version, sig_b.file, sig_b.line))
    if not problems:
        return []
    came = [p.name for p in sig_t.params]
    if ctx.baseline is not None and sig_b is not None:
        came = [n for n in came if sig_b.param(n) is None]
    return [
        finding(
            use,
            OVERRIDE_SIGNATURE,
            symbol=use.symbol,
            message=(
                f"__post_init__() is called with {use.receiver.rsplit('.', 1)[-1]}'s InitVar "
                f"fields by position; {ctx.target.name} {ctx.target.version} passes "
                f"{len(sig_t.params)} ({', '.join(p.name for p in sig_t.params)}), it takes "
                f"{_slots(use.params)} (TypeError)"
            ),
            evidence=tuple(evidence),
            fix=Fix(FixSafety.MANUAL, f"accept the new InitVar(s): {', '.join(came)}"),
        )
    ]


def _slots(params: list[tuple[str, str, bool]]) -> int:
    return sum(1 for _, k, _ in params[1:] if k in ("positional_only", "positional_or_keyword"))


_CLASS = re.compile(r"^(\s*)class\s+(\w+)\b")


def _owner(lines: list[str], line: int) -> str:
    """The name of the client class whose body holds the ``def`` on ``line`` (1-based)."""
    if not 0 < line <= len(lines):
        return ""
    text = lines[line - 1]
    indent = len(text) - len(text.lstrip())
    for i in range(line - 2, -1, -1):
        m = _CLASS.match(lines[i])
        if m and len(m.group(1)) < indent:
            return m.group(2)
        if lines[i].strip() and len(lines[i]) - len(lines[i].lstrip()) < indent:
            return ""  # a def or block that is not a class holds it
    return ""


def _built_by_client_only(use: Use, ctx: CheckContext) -> str:
    """The overriding class's name when the client never hands it (or a subclass of it) to
    anything: every mention in the client's files is a call that builds it, a class statement
    that derives from it (whose own mentions are read the same way), an import, an
    ``isinstance``/``issubclass`` test or an attribute read off it, and at least one call builds
    it. A mention as a value (passed, stored, returned, registered, decorated) or inside a
    string other than a docstring (a dotted path a config names) hands it on: ``""``. Read once
    per class and host base in a scan."""
    cls = _owner(ctx.client_lines.get(use.file, []), use.line)
    if not cls:
        return ""
    memo: dict[tuple[str, str], str] = ctx.__dict__.setdefault("_built_by_client", {})
    key = (cls, use.receiver or "")
    if key not in memo:
        memo[key] = "" if _registers_subclasses(ctx.target, key[1]) else _only_built(ctx, cls)
    return memo[key]


def _only_built(ctx: CheckContext, cls: str) -> str:
    todo, seen, built = [cls], {cls}, 0
    while todo:
        name = todo.pop()
        for rel, tree, word in _trees_mentioning(ctx, name):
            for how, node in _mentions(ctx, rel, tree, name, word):
                if how == "call":
                    built += 1
                elif how == "base" and isinstance(node, ast.ClassDef):
                    if node.name not in seen:
                        seen.add(node.name)
                        todo.append(node.name)
                elif how != "neutral":
                    return ""
    return cls if built else ""


def _text(ctx: CheckContext, rel: str) -> str:
    whole = getattr(ctx.client_lines, "text", None)
    return whole(rel) if whole is not None else "\n".join(ctx.client_lines[rel])


def _trees_mentioning(
    ctx: CheckContext, name: str
) -> list[tuple[str, ast.Module, re.Pattern[str]]]:
    """The client files whose text holds ``name`` as a word, with their syntax trees (the text
    is searched as a whole first; which files hold it is kept per scan, the trees only for the
    last files asked: :func:`_tree`)."""
    found: dict[str, list[str]] = ctx.__dict__.setdefault("_mentioning", {})
    word = re.compile(rf"\b{re.escape(name)}\b")
    if name not in found:
        may_hold = getattr(ctx.client_lines, "may_hold", None)  # a filter of each file's words
        candidates = may_hold(name) if may_hold is not None else ctx.client_lines
        found[name] = [rel for rel in candidates if _holds(_text(ctx, rel), name, word)]
    out = []
    for rel in found[name]:
        tree = _part(ctx, rel, name)
        if tree is not None:
            out.append((rel, tree, word))
    return out


def _holds(text: str, name: str, word: re.Pattern[str]) -> bool:
    """Whether ``text`` holds ``name`` as ``word`` finds it (an identifier: found by the
    string's own search, its neighbours checked, not a pattern tried at each character)."""
    return spells_word(text, name) if name.isidentifier() else word.search(text) is not None


#: How many client files' syntax trees (with their parent maps) a scan keeps: a file asked for
#: again past that is parsed again (every file's tree held at once took transformers 5.24.0's
#: scan over a gigabyte; the classes asked for one after another live in the same few files).
KEPT_TREES = 64


#: How many (file, name) parts of client files a scan keeps (with their reads), and how many
#: runs of top-level statements parsed for them.
KEPT_PARTS = 256
KEPT_RUNS = 2048

#: What can spell a name in a string's value, or an identifier, where the source does not
#: spell it: an escape that makes a word character (``\\x41``, ``\\u0041``, ``\\N{...}``,
#: octal) or a backslash that continues a string on the next line; any other character than
#: ASCII (an identifier is read in its NFKC form).
_SPELLS_OTHERWISE = re.compile(r"\\(?:[xuUN0-7]|\r\n|\r|\n)|[^\x00-\x7f]")


def _part(ctx: CheckContext, rel: str, name: str) -> ast.Module | None:
    """The top-level statements of a client file that may mention ``name``, as one module
    (None: the file does not parse), from the last ``KEPT_PARTS``: the runs of statements the
    collection's parse noted (:meth:`~driftcheck.client.lines.FileLines.statements`) that
    spell ``name``, that hold what may spell it otherwise (:data:`_SPELLS_OTHERWISE`), or a
    start of it that a quote ends (``"Lla" "maAttention"``), each parsed alone at its lines
    (a fifth of the bytes of the 110 transformers files asked for its classes' mentions).
    Every node a mention of ``name`` reads (the node, its parents up to the module) is the
    whole file's; a file whose statements were not noted, or a run that does not parse to
    its statements alone, is parsed whole (:func:`_tree`)."""
    noted = getattr(ctx.client_lines, "statements", None)
    runs = noted(rel) if noted is not None else None
    if runs is None or not name:
        return _tree(ctx, rel)
    parts: OrderedDict[tuple[str, str], ast.Module] = ctx.__dict__.setdefault(
        "_client_parts", OrderedDict()
    )
    if (rel, name) in parts:
        parts.move_to_end((rel, name))
        return parts[(rel, name)]
    text = _text(ctx, rel)
    if "barry_as_FLUFL" in text:  # a __future__ import that changes the parse of the rest
        return _tree(ctx, rel)
    at, ends, otherwise = _layout(ctx, rel, text, runs)
    hits = list(_offsets(text, name))
    if len(name) > 1:  # each start of the name, as a string a quote ends
        prefix = "".join("(?:" + re.escape(c) for c in name[:-1]) + ")?" * (len(name) - 2) + ")"
        hits += [m.start() for m in re.finditer(prefix + "[\"']", text)]
    chosen = sorted(otherwise | {bisect_right(at, i) - 1 for i in hits} - {-1})
    body: list[ast.stmt] = []
    for i in chosen:
        stmts = _run(ctx, rel, text, runs[i], at[i], ends[i])
        if stmts is None:
            return _tree(ctx, rel)
        body.extend(stmts)
    tree = ast.Module(body=body, type_ignores=[])
    parts[(rel, name)] = tree
    reads: dict[int, list] = ctx.__dict__.setdefault("_part_reads", {})
    reads[id(tree)] = [tree, None]  # its :class:`_Read`, built when first asked
    if len(parts) > KEPT_PARTS:
        _, dropped = parts.popitem(last=False)
        reads.pop(id(dropped), None)
    return tree


def _layout(
    ctx: CheckContext, rel: str, text: str, runs: list[tuple[int, int, int]]
) -> tuple[list[int], list[int], set[int]]:
    """Where each run of statements starts and ends in the text, and the runs that hold
    what may spell a name otherwise (:data:`_SPELLS_OTHERWISE`); kept for the last
    ``KEPT_PARTS`` files."""
    kept: OrderedDict[str, tuple[list[int], list[int], set[int]]] = ctx.__dict__.setdefault(
        "_client_layouts", OrderedDict()
    )
    if rel in kept:
        kept.move_to_end(rel)
        return kept[rel]
    starts = line_starts(text)
    at = [starts[first - 1] for first, _, _ in runs]
    ends = [len(text) if last >= len(starts) else starts[last] for _, last, _ in runs]
    otherwise = {bisect_right(at, m.start()) - 1 for m in _SPELLS_OTHERWISE.finditer(text)}
    kept[rel] = (at, ends, otherwise - {-1})
    if len(kept) > KEPT_PARTS:
        kept.popitem(last=False)
    return kept[rel]


def _offsets(text: str, name: str) -> Iterator[int]:
    """Every place ``name`` is spelt in ``text`` (a word or not)."""
    at = text.find(name)
    while at != -1:
        yield at
        at = text.find(name, at + 1)


def _run(
    ctx: CheckContext, rel: str, text: str, run: tuple[int, int, int], start: int, end: int
) -> list[ast.stmt] | None:
    """A run of top-level statements parsed alone at its lines (the same nodes, lines and
    columns as the whole file's parse gives them: a top-level statement starts a line at its
    first column), from the last ``KEPT_RUNS``; None where it does not parse to its
    statements."""
    runs: OrderedDict[tuple[str, int], list[ast.stmt] | None] = ctx.__dict__.setdefault(
        "_client_runs", OrderedDict()
    )
    first, _, count = run
    key = (rel, first)
    if key in runs:
        runs.move_to_end(key)
        return runs[key]
    try:
        body: list[ast.stmt] | None = ast.parse("\n" * (first - 1) + text[start:end]).body
    except (SyntaxError, ValueError, RecursionError):
        body = None
    if body is not None and len(body) != count:
        body = None
    runs[key] = body
    if len(runs) > KEPT_RUNS:
        runs.popitem(last=False)
    return body


def _tree(ctx: CheckContext, rel: str) -> ast.Module | None:
    """A client file's syntax tree (None: it does not parse), from the last ``KEPT_TREES``."""
    kept: OrderedDict[str, list] = ctx.__dict__.setdefault("_client_trees", OrderedDict())
    unparsed: set[str] = ctx.__dict__.setdefault("_client_unparsed", set())
    if rel in unparsed:
        return None
    if rel in kept:
        kept.move_to_end(rel)
        return cast(ast.Module, kept[rel][0])
    try:
        tree = ast.parse(_text(ctx, rel))
    except (SyntaxError, ValueError, RecursionError):
        unparsed.add(rel)
        return None
    kept[rel] = [tree, None]
    if len(kept) > KEPT_TREES:
        kept.popitem(last=False)
    return tree


class _Read:
    """A client file's tree read once while it is kept: each node's parent, the nodes that may
    mention a name (class statements, names, attributes and imports, by the name they carry;
    string constants), in :func:`ast.walk`'s order, and the mentions of each name asked for (a
    class's mentions are asked for by several readings of one scan, each walked the whole tree
    before)."""

    def __init__(self, tree: ast.Module) -> None:
        self.nodes, self.parents = walk_with_parents(tree)
        self.named: dict[str, list[int]] = {}
        self.strings: list[tuple[int, str]] = []
        self.mentions: dict[str, list[tuple[str, ast.AST]]] = {}
        for i, node in enumerate(self.nodes):
            if isinstance(node, ast.Name):
                self.named.setdefault(node.id, []).append(i)
            elif isinstance(node, ast.Attribute):
                self.named.setdefault(node.attr, []).append(i)
            elif isinstance(node, ast.Constant):
                if isinstance(node.value, str):
                    self.strings.append((i, node.value))
            elif isinstance(node, ast.ClassDef):
                self.named.setdefault(node.name, []).append(i)
            elif isinstance(node, ast.alias):
                last = node.name.rsplit(".", 1)[-1]
                self.named.setdefault(last, []).append(i)
                if node.asname and node.asname != last:
                    self.named.setdefault(node.asname, []).append(i)

    def candidates(self, name: str, word: re.Pattern[str]) -> list[ast.AST]:
        """The nodes :func:`_mentions` reads for ``name``, in the tree's walk order."""
        strings = [i for i, text in self.strings if word.search(text)]
        return [self.nodes[i] for i in sorted([*self.named.get(name, ()), *strings])]


def _read(ctx: CheckContext, rel: str, tree: ast.Module) -> _Read:
    """A client file's (or a part's, :func:`_part`) :class:`_Read`, built once while the tree
    is kept."""
    entry = ctx.__dict__.setdefault("_client_trees", OrderedDict()).get(rel)
    if entry is not None and entry[0] is tree and entry[1] is not None:
        return cast(_Read, entry[1])
    if entry is not None and entry[0] is tree:
        entry[1] = _Read(tree)
        return cast(_Read, entry[1])
    part = ctx.__dict__.get("_part_reads", {}).get(id(tree))
    if part is not None and part[0] is tree:  # a part still kept
        if part[1] is None:
            part[1] = _Read(tree)
        return cast(_Read, part[1])
    return _Read(tree)


def _parents(ctx: CheckContext, rel: str, tree: ast.Module) -> dict[ast.AST, ast.AST]:
    """Each node's parent in a client file's tree (built once while the tree is kept)."""
    return _read(ctx, rel, tree).parents


def _mentions(
    ctx: CheckContext, rel: str, tree: ast.Module, name: str, word: re.Pattern[str]
) -> list[tuple[str, ast.AST]]:
    """Each mention of ``name`` in a module, as (how, node): ``call`` (it builds one), ``base``
    (node: the class statement deriving from it), ``neutral`` or ``value`` (handed on). Read
    once per name while the tree is kept."""
    read = _read(ctx, rel, tree)
    if name not in read.mentions:
        read.mentions[name] = _mentions_in(read.candidates(name, word), name, word, read.parents)
    return read.mentions[name]


def _mentions_in(
    nodes: list[ast.AST], name: str, word: re.Pattern[str], parents: dict[ast.AST, ast.AST]
) -> list[tuple[str, ast.AST]]:
    out: list[tuple[str, ast.AST]] = []
    for node in nodes:
        if isinstance(node, ast.ClassDef) and node.name == name:
            if node.decorator_list or node.keywords:
                out.append(("value", node))  # handed to a decorator or a metaclass
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            up = parents.get(node)
            if word.search(node.value) and not isinstance(up, ast.Expr):  # not a docstring
                out.append(("value", node))
            continue
        if isinstance(node, ast.alias) and name in (node.name.rsplit(".", 1)[-1], node.asname):
            if node.asname and node.asname != name:
                out.append(("value", node))  # renamed on import: not followed
            continue
        hit = (isinstance(node, ast.Name) and node.id == name) or (
            isinstance(node, ast.Attribute) and node.attr == name
        )
        if not hit:
            continue
        up = parents.get(node)
        if isinstance(up, ast.Call) and up.func is node:
            out.append(("call", node))
        elif isinstance(up, ast.ClassDef) and node in up.bases:
            out.append(("base", up))
        elif isinstance(up, ast.Attribute) and up.value is node:
            out.append(("neutral", node))  # Cls.attr, Cls.__init__(self, ...)
        elif _type_test(node, up, parents):
            out.append(("neutral", node))
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            out.append(("neutral", node))  # obj.Name = ...: another object's attribute
        else:
            out.append(("value", node))
    return out


def _type_test(node: ast.AST, up: ast.AST | None, parents: dict[ast.AST, ast.AST]) -> bool:
    """``isinstance(x, Cls)`` / ``issubclass(c, (A, Cls))``."""
    if isinstance(up, ast.Tuple):
        up = parents.get(up)
    return (
        isinstance(up, ast.Call)
        and isinstance(up.func, ast.Name)
        and up.func.id in ("isinstance", "issubclass")
        and node is not up.func
    )


def _rebuilds_itself(api: HostAPI, cls_path: str) -> bool:
    """Whether a method of the host class (or a host class it derives from) builds a new
    object of the instance's own class, ``type(self)(...)`` or ``self.__class__(...)``
    (urllib3's ``Retry.new``): an instance the client hands on reaches the override's
    ``__init__`` through the host. Read once per release and class (every override of one
    host class asks it)."""
    memo: dict[str, bool] = api.__dict__.setdefault("_rebuilds_itself", {})
    if cls_path not in memo:
        memo[cls_path] = _reads_rebuilds_itself(api, cls_path)
    return memo[cls_path]


def _reads_rebuilds_itself(api: HostAPI, cls_path: str) -> bool:
    cls = api.resolve(cls_path)
    if not isinstance(cls, Found) or cls.kind != "class":
        return True  # unknown: assume it may
    return any(
        any(_builds_own_class(n, first) for n in ast.walk(method))
        for method, first in _methods_along_mro(api, cls)
    )


def _methods_along_mro(
    api: HostAPI, cls: Found
) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str]]:
    """Each method of the class and of the classes its MRO reaches, with the name of its
    first parameter (methods without one are left out)."""
    chain, _ = api.mro(cls)
    for klass in chain:
        node = api.class_node(klass)
        for method in node.body if node is not None else []:
            if isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef) and method.args.args:
                yield method, method.args.args[0].arg


def _builds_own_class(node: ast.AST, first: str) -> bool:
    """``type(first)(...)`` or ``first.__class__(...)``."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Call) and isinstance(func.func, ast.Name) and func.func.id == "type":
        return [ast.unparse(a) for a in func.args] == [first]
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "__class__"
        and isinstance(func.value, ast.Name)
        and func.value.id == first
    )


def _registers_subclasses(api: HostAPI, cls_path: str) -> bool:
    """Whether the host class (or a class it derives from) sees each subclass as it is made:
    ``__init_subclass__`` or a metaclass of the host's own, which may register it."""
    cls = api.resolve(cls_path)
    if not isinstance(cls, Found) or cls.kind != "class":
        return True  # unknown: assume it may
    if isinstance(api.class_member(cls, "__init_subclass__"), Found):
        return True
    chain, _ = api.mro(cls)
    for klass in chain:
        node = api.class_node(klass)
        if node is not None and any(
            k.arg == "metaclass" and not ast.unparse(k.value).endswith("ABCMeta")
            for k in node.keywords
        ):
            return True
    return False


def _held_by_client_only(ctx: CheckContext, cls: str, member: str) -> str:
    """Where the client keeps the instances of a class only it builds, when the host cannot
    reach their ``member`` through them: every construction is stored on ``self.<attr>``
    (alone or in a list, ``nn.ModuleList([...])``) in a method of a client class, and every
    method of that class's host bases that reads ``self.<attr>`` is one the client class
    defines itself (so the client's code, not the host's, calls the instances). The holders as
    ``Class.attr``; ``""`` when a construction goes elsewhere or a host method reads it."""
    holders: set[tuple[str, str, str]] = set()  # (file, class, attr)
    for rel, tree, word in _trees_mentioning(ctx, cls):
        parents = _parents(ctx, rel, tree)
        for how, node in _mentions(ctx, rel, tree, cls, word):
            if how != "call":
                continue
            held = _stored_on_self(node, parents)
            if held is None:
                return ""
            holders.add((rel, *held))
    if not holders:
        return ""
    for rel, owner, attr in holders:
        holder = _class_def(ctx, rel, owner)
        if holder is None:
            return ""
        own = {s.name for s in holder.body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)}
        for base in _host_bases_of(ctx, rel, holder):
            if _host_reads_self(ctx.target, base, attr) - own:
                return ""
    return ", ".join(sorted(f"{owner}.{attr}" for _, owner, attr in holders))


def _stored_on_self(call: ast.AST, parents: dict[ast.AST, ast.AST]) -> tuple[str, str] | None:
    """(class, attr) where a construction's value goes to ``self.attr`` in a method of a client
    class, directly or inside a list, tuple, comprehension or a call wrapping them. ``call`` is
    the called name (a mention); its parent is the call."""
    node = parents.get(call, call)
    while True:
        up = parents.get(node)
        if isinstance(up, ast.Assign | ast.AnnAssign):
            targets = up.targets if isinstance(up, ast.Assign) else [up.target]
            if len(targets) != 1 or up.value is not node:
                return None
            target = targets[0]
            if not (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
            ):
                return None
            func = parents.get(up)
            while func is not None and not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                func = parents.get(func)
            owner = parents.get(func) if func is not None else None
            return (owner.name, target.attr) if isinstance(owner, ast.ClassDef) else None
        if isinstance(
            up, ast.List | ast.Tuple | ast.ListComp | ast.GeneratorExp | ast.comprehension
        ):
            node = up
            continue
        if isinstance(up, ast.Call) and node in up.args:
            node = up  # nn.ModuleList([...]): a container of them
            continue
        return None


def _class_def(ctx: CheckContext, rel: str, name: str) -> ast.ClassDef | None:
    tree = _part(ctx, rel, name)  # a class statement spells its name
    if tree is None:
        return None
    found = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name]
    return found[0] if len(found) == 1 else None


def _host_bases_of(ctx: CheckContext, rel: str, node: ast.ClassDef) -> list[str]:
    """The host classes a client class statement derives from (its ``subclass`` uses)."""
    return [
        u.symbol
        for u in ctx.uses_in(rel)
        if u.kind == "subclass"
        and node.lineno <= u.line <= (node.end_lineno or node.lineno)
        and any(u.line == b.lineno for b in node.bases)
    ]


def _host_reads_self(api: HostAPI, cls_path: str, attr: str) -> set[str]:
    """The methods of a host class and its host bases that read ``self.<attr>``."""
    cls = api.resolve(cls_path)
    if not isinstance(cls, Found) or cls.kind != "class":
        return {"?"}  # unknown: assume a host method reads it
    chain, _ = api.mro(cls)
    out: set[str] = set()
    for klass in chain:
        node = api.class_node(klass)
        if node is None:
            continue
        for stmt in node.body:
            if not isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if any(
                isinstance(n, ast.Attribute)
                and n.attr == attr
                and isinstance(n.value, ast.Name)
                and n.value.id == "self"
                for n in ast.walk(stmt)
            ):
                out.add(stmt.name)
    return out


def _host_builds(use: Use, ctx: CheckContext, api: HostAPI) -> list[dict] | None:
    """Every call by which the host's own code builds the overriding class (or a client class
    derived from it), as :func:`driftcheck.host.callers.call_shape` rows, when they can all be
    known: the client hands the class to the host only by returning it from its override of a
    host method (``def get_impl_cls(): return MyImpl``), whose results the host only calls
    (:func:`driftcheck.host.callers.returned_class_calls`), and a host base rebuilds an
    instance's own class (``type(self)(**params)``, ``cls(...)`` in a classmethod). None when
    the class goes anywhere else (passed, stored, registered, named in a string, its
    ``__init__`` taken as a value) or no host call is found: then the host's calls are not
    known."""
    cls = _owner(ctx.client_lines.get(use.file, []), use.line)
    if not cls or not use.receiver or _registers_subclasses(api, use.receiver):
        return None
    handed: set[str] = set()
    todo, seen = [cls], {cls}
    while todo:
        name = todo.pop()
        for rel, tree, word in _trees_mentioning(ctx, name):
            parents = _parents(ctx, rel, tree)
            for how, node in _mentions(ctx, rel, tree, name, word):
                if how == "base" and isinstance(node, ast.ClassDef):
                    if node.name not in seen:
                        seen.add(node.name)
                        todo.append(node.name)
                elif how == "neutral":
                    up = parents.get(node)
                    over = parents.get(up) if up is not None else None
                    if (
                        isinstance(up, ast.Attribute)
                        and up.attr == use.member
                        and not (isinstance(over, ast.Call) and over.func is up)
                    ):
                        return None  # Cls.__init__ taken as a value: it may go anywhere
                elif how == "value":
                    if _in_annotation(node, parents):
                        continue
                    method = _returned_by_method(node, parents)
                    if method is None:
                        return None
                    handed.add(method)
    from driftcheck.host.callers import object_rebuilds, returned_class_calls

    calls = _rebuild_calls(api, use.receiver)
    if calls is None:
        return None
    calls.extend(object_rebuilds(api))  # type(obj)(...) anywhere may rebuild a handed instance
    for method in sorted(handed):
        if any(
            _mentions(ctx, rel, tree, method, word)
            for rel, tree, word in _trees_mentioning(ctx, method)
        ):
            return None  # the client calls it too: what it does with the class is its own
        got = returned_class_calls(api, method)
        if not got:
            return None  # the host never calls it: the class reaches the host some other way
        calls.extend(got)
    return calls or None


def _in_annotation(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Whether a mention sits in a parameter's, a return's or a variable's annotation."""
    child, up = node, parents.get(node)
    while up is not None:
        if isinstance(up, ast.arg) and up.annotation is child:
            return True
        if isinstance(up, ast.FunctionDef | ast.AsyncFunctionDef) and up.returns is child:
            return True
        if isinstance(up, ast.AnnAssign) and up.annotation is child:
            return True
        if isinstance(up, ast.stmt):
            return False
        child, up = up, parents.get(up)
    return False


def _returned_by_method(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> str | None:
    """The name of the client class's method that returns the class as it is
    (``return MyImpl``)."""
    up = parents.get(node)
    if not isinstance(up, ast.Return) or not isinstance(node, ast.Name):
        return None
    func = parents.get(up)
    while func is not None and not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
        if isinstance(func, ast.ClassDef | ast.Lambda):
            return None
        func = parents.get(func)
    if func is None or not isinstance(parents.get(func), ast.ClassDef):
        return None
    return func.name


def _rebuild_calls(api: HostAPI, cls_path: str) -> list[dict] | None:
    """The host base's calls that build an instance's own class again: ``type(self)(...)``,
    ``self.__class__(...)``, and ``cls(...)`` in a classmethod. None when the class is not
    known. Read once per release and class (every override of one host class asks it); a
    new list each time."""
    memo: dict[str, list[dict] | None] = api.__dict__.setdefault("_rebuild_calls", {})
    if cls_path not in memo:
        memo[cls_path] = _reads_rebuild_calls(api, cls_path)
    got = memo[cls_path]
    return None if got is None else list(got)


def _reads_rebuild_calls(api: HostAPI, cls_path: str) -> list[dict] | None:
    from driftcheck.host.callers import call_shape

    cls = api.resolve(cls_path)
    if not isinstance(cls, Found) or cls.kind != "class":
        return None
    out: list[dict] = []
    for method, first in _methods_along_mro(api, cls):
        classmethod = any(ast.unparse(d) == "classmethod" for d in method.decorator_list)
        for n in ast.walk(method):
            if _builds_own_class(n, first) or (
                classmethod
                and isinstance(n, ast.Call)
                and isinstance(n.func, ast.Name)
                and n.func.id == first
            ):
                assert isinstance(n, ast.Call)
                out.append(call_shape(n))
    return out


def _hit_by(
    problems: set[tuple[str, str]], client: list[tuple[str, str, bool]], calls: list[dict]
) -> set[tuple[str, str]]:
    """The problems some of the host's own calls (``calls``) can meet: more positional
    arguments than the client function's slots, a keyword it lacks, extra keywords where it
    has no ``**``; ``*args`` or ``**kw`` of unknown content may pass anything. A parameter
    it requires stays a problem unless every call passes it."""
    params = client[1:]
    slots = [n for n, k, _ in params if k in ("positional_only", "positional_or_keyword")]
    names = {n for n, k, _ in params if k in ("positional_or_keyword", "keyword_only")}
    out: set[tuple[str, str]] = set()
    for code, text in problems:
        if code == "positional":
            hit = any(c["star"] or c["positional"] > len(slots) for c in calls)
        elif code == "keyword":
            word = text.rsplit(" ", 1)[-1].strip("'\"")
            hit = any(c["spread"] or word in c["keywords"] for c in calls)
        elif code == "var-keyword":
            hit = any(c["spread"] or set(c["keywords"]) - names for c in calls)
        else:
            hit = True
        if hit:
            out.add((code, text))
    return out
