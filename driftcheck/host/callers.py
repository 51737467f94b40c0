"""The host's own call sites of a method, as data: how the host itself uses what the client uses.

When a release changes what a method returns or what must follow it, the host usually migrates
its own callers in the same release (vLLM stopped indexing ``collective_rpc(...,
unique_reply_rank=...)[0]`` and started calling ``sample_tokens()`` after ``execute_model()``).
Reading those call sites in both releases turns the host's migration into evidence and into the
fix. Mined once per release and method (files are searched as text first, then only the files
that call it are parsed) and kept in the host snapshot.
"""

from __future__ import annotations

import ast
import copy
import re
import textwrap
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from itertools import accumulate

from driftcheck.host.api import Found, HostAPI
from driftcheck.host.text_memo import TextMemo, digest
from driftcheck.host.values import absolute
from driftcheck.host.walk import gc_paused

FORMAT = 3
#: The format of the ``kwcalls`` facts (every call, its arguments' sources).
CALLS_FORMAT = 4


@dataclass(frozen=True)
class CallSite:
    """One host call of ``.member(...)``.

    Attributes:
        file: Host file, relative to its root.
        line: 1-based line of the call.
        receiver: Source of the receiver expression (``self.model_executor``).
        keywords: Keyword names passed.
        result: discarded, returned, assigned, unpacked, subscripted or used.
        unwrapped: The result's element [0] is taken: ``f()[0]``, ``(x,) = f()``, or the
            variable it was assigned to indexed ``[0]``.
        then: Later calls on the same receiver in the same function: (method, argument
            sources).
    """

    file: str
    line: int
    receiver: str
    keywords: tuple[str, ...]
    result: str
    unwrapped: bool
    then: tuple[tuple[str, tuple[str, ...]], ...]
    #: The source of each keyword's value, in the order of ``keywords``.
    values: tuple[str, ...] = ()
    #: The result (or the variable it was assigned to) is compared with None afterwards.
    none_checked: bool = False


def call_sites(api: HostAPI, member: str, also: Iterable[str] = ()) -> list[CallSite]:
    """Every call of ``.member(...)`` on some receiver in the host's own code.

    ``also``: other methods likely asked for next; when the host's files have to be searched,
    they are searched for all of them in the same pass (each kept as its own fact).
    """
    built = api.__dict__.setdefault("_call_sites", {})
    if member in built:  # asked once per use: the sites are built once per member
        return list(built[member])
    key = f"callers:{FORMAT}:{member}"
    kept = getattr(api.tree, "data", {}).get("facts", None) or {}
    cache = api.__dict__.get("_facts", {})

    def known(k: str) -> bool:
        return k in kept or k in cache

    if not known(key):  # one pass over the host's files for this member and the others asked
        wanted = sorted({member, *also} - {m for m in also if known(f"callers:{FORMAT}:{m}")})
        mined = _mine(api, wanted)
        for m in wanted:
            api.fact(f"callers:{FORMAT}:{m}", partial(_rows, mined.get(m, [])))
    rows = api.fact(key, lambda: _rows(_mine(api, [member]).get(member, [])))
    built[member] = [
        CallSite(
            file=r["file"],
            line=r["line"],
            receiver=r["receiver"],
            keywords=tuple(r["keywords"]),
            result=r["result"],
            unwrapped=r["unwrapped"],
            then=tuple((m, tuple(a)) for m, a in r["then"]),
            values=tuple(r.get("values", ())),
            none_checked=bool(r.get("none_checked", False)),
        )
        for r in rows
    ]
    return list(built[member])


def _rows(sites: list[CallSite]) -> list[dict]:
    return [_row(s) for s in sites]


def _row(site: CallSite | KeywordCall) -> dict:
    """``dataclasses.asdict`` of a site, whose fields hold only strings, numbers and tuples of
    them: the same dict, without ``asdict``'s copy of each tuple (half a second a large scan)."""
    return dict(site.__dict__)


@gc_paused()
def _mine(api: HostAPI, members: list[str]) -> dict[str, list[CallSite]]:
    """One pass over the host's files for every ``.member(``; only the functions around a match
    are parsed (a large module is not parsed for one call in it), each once for all the members
    it calls. The files are read from the release itself, not kept in its snapshot."""
    found = re.compile(r"\.(" + "|".join(re.escape(m) for m in members) + r")\(")
    _MINED.reading(f"{api.name} {api.version}")
    out: dict[str, list[CallSite]] = {m: [] for m in members}
    for rel, text in api.source_texts().items():
        if found.search(text) is None:
            continue
        lines = text.splitlines()
        # each match's line (no match spans two), from where each line of ``lines`` ends
        ends = list(accumulate(map(len, text.splitlines(True))))
        hits: dict[int, set[str]] = {}
        for m in found.finditer(text):
            hits.setdefault(bisect_right(ends, m.start()), set()).add(m.group(1))
        starts = _enclosing_defs(lines, hits)
        # each member's functions, in the order of their first line that calls it
        order: dict[str, dict[int, None]] = {}
        for n, on_line in hits.items():
            start = starts[n]
            if start is None:
                continue
            for member in on_line:
                order.setdefault(member, {})[start] = None
        need: dict[int, list[str]] = {}
        for member in sorted(order):
            for start in order[member]:
                need.setdefault(start, []).append(member)
        mined = {start: _function_sites(lines, start, wanted) for start, wanted in need.items()}
        for member in sorted(order):
            for start in order[member]:
                for site in mined[start].get(member, ()):
                    out[member].append(replace(site, file=rel, line=site.line + start))
    return out


#: Each host function's calls of the members mined in it (:class:`CallSite` rows, their lines
#: counted from the function's first line, no file), by the digest of its dedented source;
#: None for one that does not parse. The next release's copy of the function is not parsed
#: again (a scan mines two releases: 15,700 function parses over torch 2.6 and 2.10, most of
#: the second release's functions the same text); kept for the last two releases mined.
_MINED: TextMemo[dict[str, list[CallSite]] | None] = TextMemo()


def _function_sites(lines: list[str], start: int, members: list[str]) -> dict[str, list[CallSite]]:
    """The calls of each of ``members`` in the function that starts at ``start``, their lines
    counted from it (parsed only where the memo lacks a member)."""
    src = _dedent(lines[start : _function_end(lines, start)])
    key = digest(src)
    known = _MINED.get(key, {})
    if known is None:
        return {}
    missing = [m for m in members if m not in known]
    if missing:
        func = _parse_source(src)
        if func is None:
            _MINED.put(key, None)
            return {}
        got = _Function(func)
        known = {**known, **{m: got.sites("", m) for m in missing}}
        _MINED.put(key, known)
    return known


_DEF = re.compile(r"^(\s*)(?:async\s+)?def\s")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _enclosing_def(lines: list[str], n: int) -> int | None:
    """The line of the ``def`` whose body holds line ``n`` (the innermost one)."""
    here = _indent(lines[n])
    for i in range(n, -1, -1):
        m = _DEF.match(lines[i])
        if m and len(m.group(1)) < here:
            return i
        if lines[i].strip() and _indent(lines[i]) < here and not _DEF.match(lines[i]):
            here = min(here, _indent(lines[i]) + 1)
    return None


def _enclosing_defs(lines: list[str], wanted: Iterable[int]) -> dict[int, int | None]:
    """:func:`_enclosing_def` of each of the ``wanted`` lines, in one pass over the file: a
    file with thousands of calls was scanned back from each of them."""
    todo = set(wanted)
    out: dict[int, int | None] = {}
    if not todo:
        return out
    last = max(todo)
    # The ``def`` lines a later line may still be inside, innermost last, their indents rising:
    # a line that is not a ``def`` closes every one indented deeper than it, and a ``def``
    # hides every one indented as deep or deeper (the scan back meets it first).
    open_: list[tuple[int, int]] = []  # (indent, line)
    for n in range(last + 1):
        line = lines[n]
        code = line.lstrip()
        indent = len(line) - len(code)
        if n in todo:
            out[n] = next((i for d, i in reversed(open_) if d < indent), None)
        if not code:
            continue
        if code[:1] in ("d", "a") and _DEF.match(line):
            while open_ and open_[-1][0] >= indent:
                open_.pop()
            open_.append((indent, n))
        else:
            while open_ and open_[-1][0] > indent:
                open_.pop()
    return out


def _parse_function(lines: list[str], start: int) -> ast.AST | None:
    """The function that starts at ``start``, parsed alone (its lines keep their numbers)."""
    end = _function_end(lines, start)
    return _parse_source("\n" * start + _dedent(lines[start:end]))


def _function_end(lines: list[str], start: int) -> int:
    """Where the function that starts at ``start`` ends: past its header and every line
    below it that is blank or indented deeper than its ``def``."""
    indent = _indent(lines[start])
    depth, end = 0, start
    while end < len(lines):  # past the header, which may span lines (``) -> X:`` at the indent)
        code = lines[end].split("#", 1)[0]
        depth += sum(code.count(c) for c in "([{") - sum(code.count(c) for c in ")]}")
        end += 1
        if depth <= 0 and code.rstrip().endswith(":"):
            break
    while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > indent):
        end += 1
    return end


def _parse_source(src: str) -> ast.AST | None:
    """The first function of ``src`` (a function's dedented lines), or None."""
    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError, RecursionError):
        return None
    return next(
        (n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None
    )


def _dedent(lines: list[str]) -> str:
    """:func:`textwrap.dedent` of the lines of a function whose first line is its ``def``: where
    every line but the blank ones (spaces and tabs only, left empty as ``dedent`` leaves them)
    starts with the ``def``'s own indent, that indent is the margin and is cut off each line,
    without ``dedent``'s regular expressions over the text."""
    first = lines[0]
    margin = first[: len(first) - len(first.lstrip(" \t"))]
    if not margin:
        return textwrap.dedent("\n".join(lines))
    cut = len(margin)
    out = []
    for line in lines:
        if not line.strip(" \t"):
            out.append("")
        elif line.startswith(margin):
            out.append(line[cut:])
        else:
            return textwrap.dedent("\n".join(lines))
    return "\n".join(out)


_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _own_nodes(func: ast.AST) -> list[ast.AST]:
    """The nodes of a function, not of functions or classes nested in it, in source order."""
    return _own_tree(func)[0]


def _kids(node: ast.AST) -> list[ast.AST]:
    """A node's children as :func:`ast.iter_child_nodes` gives them, as a list."""
    kids: list[ast.AST] = []
    for name in node._fields:
        field = getattr(node, name, None)
        if isinstance(field, ast.AST):
            kids.append(field)
        elif isinstance(field, list):
            kids += [item for item in field if isinstance(item, ast.AST)]
    return kids


def _own_tree(func: ast.AST) -> tuple[list[ast.AST], dict[ast.AST, ast.AST]]:
    """:func:`_own_nodes` and the parent of each child of the function and of its own nodes,
    read in one walk (each node's children as :func:`ast.iter_child_nodes` gives them, without
    its two generators per node: the host's call sites walk thousands of functions)."""
    out: list[ast.AST] = []
    parents: dict[ast.AST, ast.AST] = {}
    todo: list[ast.AST] = [func]  # a stack: the next node last
    while todo:
        node = todo.pop()
        if node is not func:
            if isinstance(node, _NESTED):
                continue
            out.append(node)
        kids = _kids(node)
        for child in kids:
            parents[child] = node
        kids.reverse()
        todo += kids
    return out, parents


_NESTED_TYPES = frozenset(_NESTED)


#: Fields that hold only leaves no read of :func:`_own_reads` looks at (``Load()``, ``Add()``,
#: ``[Eq()]``): the walk skips them, a third of a function's nodes; and fields that hold no
#: node at all (names, a constant's value).
_LEAF_FIELDS = frozenset({"ctx", "op", "ops", "id", "attr", "arg", "kind", "type_comment"})
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_fields(kind: type) -> tuple[str, ...]:
    """A node type's fields, less :data:`_LEAF_FIELDS` (computed once per type)."""
    got = _CHILD_FIELDS.get(kind)
    if got is None:
        got = _CHILD_FIELDS[kind] = tuple(
            f
            for f in kind._fields  # type: ignore[attr-defined]  # an ast node type
            if f not in _LEAF_FIELDS and not (kind is ast.Constant and f == "value")
        )
    return got


def _own_reads(
    func: ast.AST,
) -> tuple[list[ast.Call], list[ast.Subscript], list[ast.Compare], dict[ast.AST, ast.AST]]:
    """What :class:`_Function` reads of :func:`_own_tree`, in its order and in one walk: the
    method calls, subscripts and comparisons among the function's own nodes, and the parent of
    each call and ``await`` (the only parents :func:`_result` asks for); a parent kept for
    every node cost the host's call sites a dict entry for each of millions of nodes. The
    expression contexts and operators, leaves that are none of these, are not walked."""
    calls: list[ast.Call] = []
    subscripts: list[ast.Subscript] = []
    compares: list[ast.Compare] = []
    parents: dict[ast.AST, ast.AST] = {}
    call, await_, subscript, compare, node_type = (
        ast.Call,
        ast.Await,
        ast.Subscript,
        ast.Compare,
        ast.AST,
    )
    nested = _NESTED_TYPES
    fields_of, known = _child_fields, _CHILD_FIELDS
    todo: list[ast.AST] = [func]  # a stack: the next node last
    while todo:
        node = todo.pop()
        kind = type(node)
        if node is not func:
            if kind in nested:
                continue
            if kind is call:
                if type(node.func) is ast.Attribute:  # type: ignore[attr-defined]
                    calls.append(node)  # type: ignore[arg-type]
            elif kind is subscript:
                subscripts.append(node)  # type: ignore[arg-type]
            elif kind is compare:
                compares.append(node)  # type: ignore[arg-type]
        kids: list[ast.AST] = []
        for name in known.get(kind) or fields_of(kind):
            field = getattr(node, name, None)
            if isinstance(field, node_type):
                kids.append(field)
            elif type(field) is list:
                kids += [item for item in field if isinstance(item, node_type)]
        for child in kids:
            if type(child) is call or type(child) is await_:
                parents[child] = node
        kids.reverse()
        todo += kids
    return calls, subscripts, compares, parents


class _Function:
    """One parsed host function, read once for the calls of every member it makes: its own
    method calls (and their parents), subscripts and comparisons, and the sources of the calls'
    receivers and arguments."""

    def __init__(self, func: ast.AST) -> None:
        self.calls, self.subscripts, self.compares, self.parents = _own_reads(func)
        self._receivers: dict[int, str] = {}
        self._args: dict[int, tuple[str, ...]] = {}
        self._zero: set[str] | None = None
        self._none_tested: dict[str, int] | None = None

    def receiver(self, call: ast.Call) -> str:
        """The source of a method call's receiver (unparsed once)."""
        got = self._receivers.get(id(call))
        if got is None:
            assert isinstance(call.func, ast.Attribute)
            got = self._receivers[id(call)] = ast.unparse(call.func.value)
        return got

    def args(self, call: ast.Call) -> tuple[str, ...]:
        got = self._args.get(id(call))
        if got is None:
            got = self._args[id(call)] = tuple(ast.unparse(a) for a in call.args)
        return got

    def zero_indexed(self) -> set[str]:
        """The names the function indexes ``[0]``."""
        if self._zero is None:
            self._zero = {
                n.value.id
                for n in self.subscripts
                if isinstance(n.value, ast.Name)
                and isinstance(n.slice, ast.Constant)
                and n.slice.value == 0
            }
        return self._zero

    def none_tested(self) -> dict[str, int]:
        """Each name the function compares with None (``is``/``is not``): its last such line."""
        if self._none_tested is None:
            self._none_tested = {}
            for n in self.compares:
                if (
                    isinstance(n.left, ast.Name)
                    and any(isinstance(o, (ast.Is, ast.IsNot)) for o in n.ops)
                    and any(isinstance(c, ast.Constant) and c.value is None for c in n.comparators)
                ):
                    last = self._none_tested.get(n.left.id, n.lineno)
                    self._none_tested[n.left.id] = max(last, n.lineno)
        return self._none_tested

    def sites(self, rel: str, member: str) -> list[CallSite]:
        """The function's calls of ``.member(...)``."""
        out = []
        for call in self.calls:
            attr = call.func
            assert isinstance(attr, ast.Attribute)
            if attr.attr != member:
                continue
            receiver = self.receiver(call)
            result, unwrapped, name = _result(call, self.parents)
            if name is not None:
                unwrapped = unwrapped or name in self.zero_indexed()
            none_checked = name is not None and self.none_tested().get(name, -1) >= call.lineno
            later = [
                (f.attr, self.args(c))
                for c in self.calls
                if isinstance(f := c.func, ast.Attribute)  # every call here is a method call
                and (c.lineno, c.col_offset) > (call.lineno, call.col_offset)
                and f.attr != member
                and self.receiver(c) == receiver
            ]
            out.append(
                CallSite(
                    file=rel,
                    line=call.lineno,
                    receiver=receiver,
                    keywords=tuple(k.arg for k in call.keywords if k.arg),
                    values=tuple(ast.unparse(k.value) for k in call.keywords if k.arg),
                    result=result,
                    unwrapped=unwrapped,
                    then=tuple(later),
                    none_checked=none_checked,
                )
            )
        return out


def _result(call: ast.expr, parents: dict[ast.AST, ast.AST]) -> tuple[str, bool, str | None]:
    """How the call's result is used: (kind, element [0] taken, the name it is assigned to)."""
    up = parents.get(call)
    if isinstance(up, ast.Await):
        call, up = up, parents.get(up)
    if isinstance(up, ast.Expr):
        return "discarded", False, None
    if isinstance(up, ast.Return):
        return "returned", False, None
    if isinstance(up, ast.Subscript) and up.value is call:
        zero = isinstance(up.slice, ast.Constant) and up.slice.value == 0
        return "subscripted", zero, None
    if isinstance(up, (ast.Assign, ast.AnnAssign)):
        targets = up.targets if isinstance(up, ast.Assign) else [up.target]
        if len(targets) == 1:
            t = targets[0]
            if isinstance(t, (ast.Tuple, ast.List)) and len(t.elts) == 1:
                return "unpacked", True, None
            if isinstance(t, ast.Name):
                return "assigned", False, t.id
        return "assigned", False, None
    return "used", False, None


@dataclass(frozen=True)
class KeywordCall:
    """One host call of ``name(...)`` or ``.name(...)``: the keywords it passes, in order.

    Attributes:
        file: Host file, relative to its root.
        line: 1-based line of the call.
        function: The name of the function the call is in.
        keywords: Keyword names passed, in source order.
    """

    file: str
    line: int
    function: str
    keywords: tuple[str, ...]
    #: Each keyword's value, in the order of ``keywords``: its source, a local name assigned
    #: once in the function replaced by what it was assigned (``x = a.b * 2``; ``f(k=x)``).
    values: tuple[str, ...] = ()
    #: The positional arguments' sources, the same way (``*args`` leaves the call open).
    positional: tuple[str, ...] = ()
    #: ``*args`` or a ``**d`` whose keys are not all known: the call may pass more.
    open: bool = False
    #: The keywords set on the spread dict before the call (``kwargs["k"] = v``; ``f(**kwargs)``):
    #: a factory's fill-in for callers that leave them out.
    filled: tuple[str, ...] = ()


def keyword_calls(api: HostAPI, name: str) -> list[KeywordCall]:
    """Every call of ``name(...)`` (or ``.name(...)``) inside the host's own functions, with
    the keywords it passes: how the host itself calls a callable, release by release. Kept in
    the snapshot; files are searched as text first, then only the functions around a match are
    parsed (:func:`prefetch_keyword_calls` mines several callables in one pass)."""
    rows = api.fact(
        _calls_key(name), lambda: [_row(c) for c in _mine_calls(api, [name]).get(name, [])]
    )
    return [
        KeywordCall(
            r["file"],
            r["line"],
            r["function"],
            tuple(r["keywords"]),
            tuple(r["values"]),
            tuple(r["positional"]),
            r["open"],
            tuple(r["filled"]),
        )
        for r in rows
    ]


def prefetch_keyword_calls(api: HostAPI, names: Iterable[str]) -> None:
    """Mine the host's calls of every callable in ``names`` not yet known, in one pass over the
    host's files (each kept as its own fact, the same as :func:`keyword_calls` would keep)."""
    kept = getattr(api.tree, "data", {}).get("facts", None) or {}
    cache = api.__dict__.get("_facts", {})
    wanted = sorted(
        {n for n in names if n and _calls_key(n) not in kept and _calls_key(n) not in cache}
    )
    if not wanted:
        return
    mined = _mine_calls(api, wanted)
    for n in wanted:
        api.fact(_calls_key(n), partial(_call_rows, mined.get(n, [])))


def _calls_key(name: str) -> str:
    return f"kwcalls:{CALLS_FORMAT}:{name}"


def _call_rows(calls: list[KeywordCall]) -> list[dict]:
    return [_row(c) for c in calls]


def functions_around(lines: list[str], hit: Callable[[str], bool]) -> Iterator[ast.AST]:
    """Each function (parsed once) that holds a line the text test ``hit`` accepts."""
    done: set[int] = set()
    for n, line in enumerate(lines):
        if not hit(line):
            continue
        start = _enclosing_def(lines, n)
        if start is None or start in done:
            continue
        done.add(start)
        func = _parse_function(lines, start)
        if func is not None:
            yield func


def _mine_calls(api: HostAPI, names: list[str]) -> dict[str, list[KeywordCall]]:
    """One pass over the host's files for the calls of every callable in ``names``."""
    out: dict[str, list[KeywordCall]] = {n: [] for n in names}
    needles = {n: re.compile(r"(?<![\w])" + re.escape(n) + r"\(") for n in names}
    for rel, text in api.source_texts().items():
        lines: list[str] | None = None
        for name, needle in needles.items():
            if f"{name}(" not in text or not needle.search(text):
                continue
            lines = text.splitlines() if lines is None else lines
            out[name].extend(_calls_in(rel, lines, name, needle))
    return out


def _calls_in(rel: str, lines: list[str], name: str, needle: re.Pattern) -> list[KeywordCall]:
    """The calls of ``name`` in one host file (only the functions around a match are parsed)."""
    out: list[KeywordCall] = []
    for func in functions_around(
        lines, lambda line: f"{name}(" in line and needle.search(line) is not None
    ):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        nodes = _own_nodes(func)
        bound_once = _assigned_once(func, nodes)
        for node in nodes:
            if not isinstance(node, ast.Call):
                continue
            callee = node.func
            called = callee.id if isinstance(callee, ast.Name) else getattr(callee, "attr", "")
            if called != name:
                continue
            once = {k: v for k, v in bound_once.items() if v.lineno < node.lineno}
            words = [k.arg for k in node.keywords if k.arg]
            values = [_source(k.value, once) for k in node.keywords if k.arg]
            spread = [k.value for k in node.keywords if not k.arg]
            open_ = any(isinstance(a, ast.Starred) for a in node.args)
            filled = []
            for d in spread:  # ``d["k"] = v`` before ``name(**d)``: ``k=v`` (and more)
                open_ = True
                for key, value in _filled_keys(d, nodes, node.lineno) or []:
                    if key not in words:
                        words.append(key)
                        values.append(_source(value, once))
                        filled.append(key)
            positional = tuple(_source(a, once) for a in node.args)
            out.append(
                KeywordCall(
                    rel,
                    node.lineno,
                    func.name,
                    tuple(words),
                    tuple(values),
                    positional,
                    open_,
                    tuple(filled),
                )
            )
    return out


def _assigned_once(func: ast.AST, nodes: list[ast.AST]) -> dict[str, ast.expr]:
    """The function's local names bound exactly once, by a plain ``name = value``."""
    args = getattr(func, "args", None)
    params = {a.arg for a in ast.walk(args) if isinstance(a, ast.arg)} if args else set()
    counts: dict[str, int] = {}
    values: dict[str, ast.expr] = {}
    for node in nodes:
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            counts[node.id] = counts.get(node.id, 0) + 1
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            values[node.targets[0].id] = node.value
    return {k: v for k, v in values.items() if counts.get(k) == 1 and k not in params}


def _source(expr: ast.expr, once: dict[str, ast.expr]) -> str:
    """An argument's source, its locals bound once replaced by their values (two levels)."""

    class Inline(ast.NodeTransformer):
        def __init__(self, depth: int) -> None:
            self.depth = depth

        def visit_Name(self, node: ast.Name) -> ast.AST:
            value = once.get(node.id)
            if value is None or self.depth <= 0 or not isinstance(node.ctx, ast.Load):
                return node
            return Inline(self.depth - 1).visit(copy.deepcopy(value))

    return ast.unparse(Inline(2).visit(copy.deepcopy(expr)))


def _filled_keys(
    spread: ast.expr, nodes: list[ast.AST], line: int
) -> list[tuple[str, ast.expr]] | None:
    """The keys a factory sets on the dict it spreads (``kwargs["k"] = v`` before
    ``f(**kwargs)``); None when the dict is not a local name (its keys are unknown)."""
    if not isinstance(spread, ast.Name):
        return None
    out = []
    for node in nodes:
        if not isinstance(node, ast.Assign) or node.lineno >= line or len(node.targets) != 1:
            continue
        t = node.targets[0]
        if (
            isinstance(t, ast.Subscript)
            and isinstance(t.value, ast.Name)
            and t.value.id == spread.id
            and isinstance(t.slice, ast.Constant)
            and isinstance(t.slice.value, str)
        ):
            out.append((t.slice.value, node.value))
    return out


def migrated_keyword(
    before: HostAPI, after: HostAPI, name: str, keyword: str, gone: set[str], arrived: set[str]
) -> tuple[str, KeywordCall | None]:
    """The keyword the host's own callers of ``name`` pass where they passed ``keyword``: a
    call in the same function of the same file that passed ``keyword`` on ``before`` and
    passes one of ``arrived`` in its place on ``after`` (the only new one of the call, or the
    one between the same neighbours). ``gone``/``arrived``: the callable's parameters that
    left and came. Every such call must name the same one: ('', None) otherwise."""
    if not arrived:
        return "", None
    old_calls = [c for c in keyword_calls(before, name) if keyword in c.keywords]
    if not old_calls:
        return "", None
    new_calls: dict[tuple[str, str], list[KeywordCall]] = {}
    for call in keyword_calls(after, name):
        new_calls.setdefault((call.file, call.function), []).append(call)
    named: dict[str, KeywordCall] = {}
    for old in old_calls:
        for new in new_calls.get((old.file, old.function), []):
            if keyword in new.keywords:
                continue
            came = [k for k in new.keywords if k in arrived and k not in old.keywords]
            left = [k for k in old.keywords if k in gone and k not in new.keywords]
            if len(came) == 1 and left == [keyword]:
                named.setdefault(came[0], new)
                continue
            place = _neighbours(old.keywords, keyword, set(new.keywords))
            fits = [k for k in came if _neighbours(new.keywords, k, set(old.keywords)) == place]
            if len(fits) == 1 and place != (None, None):
                named.setdefault(fits[0], new)
    if len(named) != 1:
        return "", None
    return next(iter(named.items()))


def _neighbours(
    words: tuple[str, ...], word: str, shared: set[str]
) -> tuple[str | None, str | None]:
    """The nearest keywords before and after ``word`` that the other call passes too."""
    i = words.index(word)
    before = next((w for w in reversed(words[:i]) if w in shared), None)
    after = next((w for w in words[i + 1 :] if w in shared), None)
    return before, after


#: The format of the ``classcalls`` facts (the calls of a class a host method returns).
CLASS_CALLS_FORMAT = 1


def call_shape(call: ast.Call, file: str = "") -> dict:
    """How a call passes its arguments: how many by position, whether ``*args`` or ``**kw``
    leave it open, and the keywords it names."""
    return {
        "file": file,
        "line": call.lineno,
        "positional": sum(1 for a in call.args if not isinstance(a, ast.Starred)),
        "star": any(isinstance(a, ast.Starred) for a in call.args),
        "keywords": [k.arg for k in call.keywords if k.arg],
        "spread": any(k.arg is None for k in call.keywords),
    }


def returned_class_calls(api: HostAPI, member: str) -> list[dict] | None:
    """Every host call of the class that a ``.member()`` call returns
    (``impl_cls = backend.get_impl_cls(); impl_cls(...)``, also through ``cast(T, ...)`` or
    called at once), as :func:`call_shape` rows: how the host builds a class a client hands it
    by returning it from its override of ``member``. None when a result goes anywhere else
    (returned, passed, stored, read otherwise) or ``member`` is named other than as a call or a
    ``def``: the host's constructions of that class are then not all known. Kept in the
    snapshot."""
    got = api.fact(
        f"classcalls:{CLASS_CALLS_FORMAT}:{member}",
        lambda: {"calls": _mine_class_calls(api, member)},
    )
    return got["calls"]


def _mine_class_calls(api: HostAPI, member: str) -> list[dict] | None:
    word = re.compile(r"(?<![\w])" + re.escape(member) + r"(?![\w])")
    call = re.compile(r"\." + re.escape(member) + r"\(")
    define = re.compile(r"^\s*(?:async\s+)?def\s+" + re.escape(member) + r"\(")
    out: list[dict] = []
    for rel, text in api.source_texts().items():
        if member not in text or not word.search(text):
            continue
        lines = text.splitlines()
        starts: set[int] = set()
        expected = 0
        for n, line in enumerate(lines):
            if define.match(line):
                continue
            hits = len(call.findall(line))
            if len(word.findall(line.split("#", 1)[0])) != hits:
                return None  # named otherwise: passed, stored, looked up by name
            if not hits:
                continue
            start = _enclosing_def(lines, n)
            if start is None:
                return None  # at module level
            starts.add(start)
            expected += hits
        seen = 0
        for start in sorted(starts):
            func = _parse_function(lines, start)
            if func is None:
                return None
            rows = _class_calls_in(rel, func, member)
            if rows is None:
                return None
            seen += rows[0]
            out.extend(rows[1])
        if seen != expected:
            return None  # a call this reading did not see (a lambda, a nested def)
    return out


def _class_calls_in(rel: str, func: ast.AST, member: str) -> tuple[int, list[dict]] | None:
    """(how many ``.member(...)`` calls, the calls of their results) in one function; None when
    a result is used otherwise."""
    nodes, parents = _own_tree(func)
    count, out = 0, []
    for node in nodes:
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == member
        ):
            continue
        count += 1
        value: ast.AST = node
        up = parents.get(value)
        if (
            isinstance(up, ast.Call)
            and ast.unparse(up.func).rsplit(".", 1)[-1] == "cast"
            and len(up.args) == 2
            and up.args[1] is value
        ):
            value, up = up, parents.get(up)
        if isinstance(up, ast.Call) and up.func is value:
            out.append(call_shape(up, rel))
            continue
        if not (
            isinstance(up, ast.Assign)
            and len(up.targets) == 1
            and isinstance(up.targets[0], ast.Name)
        ):
            return None
        name = up.targets[0].id
        inner = sum(1 for n in ast.walk(func) if isinstance(n, ast.Name) and n.id == name)
        if inner != sum(1 for n in nodes if isinstance(n, ast.Name) and n.id == name):
            return None  # read in a nested function or lambda too
        for use in nodes:
            if not (isinstance(use, ast.Name) and use.id == name and isinstance(use.ctx, ast.Load)):
                continue
            called = parents.get(use)
            if not (isinstance(called, ast.Call) and called.func is use):
                return None
            out.append(call_shape(called, rel))
    return count, out


#: The format of the ``rebuilds`` fact.
REBUILDS_FORMAT = 1
_REBUILD = re.compile(r"\btype\([^()]*\)\(|\.__class__\(")
_TYPE_CALLED = re.compile(r"type\([^()]*\)\(")
_CLASS_CALLED = re.compile(r"\.__class__\(")


def _rebuilds_in(text: str) -> bool:
    """Whether ``text`` holds a match of :data:`_REBUILD`: each of its two patterns searched
    alone from its own first characters, and the word boundary before ``type`` tested at each
    match (the one pattern, tried at every character of torch's files, took 0.8 s a release)."""
    if "__class__(" in text and _CLASS_CALLED.search(text) is not None:
        return True
    if "type(" not in text:
        return False
    for m in _TYPE_CALLED.finditer(text):
        at = m.start()
        if at == 0 or not (text[at - 1].isalnum() or text[at - 1] == "_"):  # ``\b`` before it
            return True
    return False


def object_rebuilds(api: HostAPI) -> list[dict]:
    """Every host call that builds a new object of another object's class, ``type(obj)(...)``
    or ``obj.__class__(...)``, where the object is not the method's own ``self`` or ``cls``,
    as :func:`call_shape` rows: an instance a client hands the host may reach its class's
    ``__init__`` that way. Kept in the snapshot."""
    return api.fact(f"rebuilds:{REBUILDS_FORMAT}", lambda: _mine_rebuilds(api))


def _mine_rebuilds(api: HostAPI) -> list[dict]:
    out: list[dict] = []
    for rel, text in api.source_texts().items():
        if not _rebuilds_in(text):
            continue
        lines = text.splitlines()
        for func in functions_around(lines, _rebuilds_in):
            args = getattr(func, "args", None)
            first = args.args[0].arg if args is not None and args.args else None
            for node in ast.walk(func):
                if not isinstance(node, ast.Call):
                    continue
                f = node.func
                if isinstance(f, ast.Call) and isinstance(f.func, ast.Name) and f.func.id == "type":
                    of = f.args[0] if len(f.args) == 1 else None
                elif isinstance(f, ast.Attribute) and f.attr == "__class__":
                    of = f.value
                else:
                    continue
                if of is None or (
                    isinstance(of, ast.Name) and of.id == first and first in ("self", "cls")
                ):
                    continue  # type(a, b, c) makes a class; type(self)(...) is the class's own
                out.append(call_shape(node, rel))
    return out


def method_dispatch(api: HostAPI, member: str, owner: str) -> tuple[str, int] | None:
    """Where the host's own code may reach the method ``member`` of an object of host class
    ``owner`` (a client subclass overriding it): its first line that reads ``x.member``
    (called or not) or spells the name as a string (``getattr(x, "member")``). Not counted: a
    module's function of the same name (``copy_internals._calculate_keys(self)``), and
    ``self.member`` in a class ``owner`` does not inherit from (pydantic 2's copy of its 1.x
    ``BaseModel`` in ``pydantic.v1`` calls its own). None: the host's code never reaches an
    override of it (read per release and class, as text, and kept in its snapshot)."""

    def compute() -> list:
        cls = api.resolve(owner)
        if not isinstance(cls, Found) or cls.kind != "class":
            return ["", 0]  # not read: taken as reached
        chain, _ = api.mro(cls)
        inherited = {k.path for k in chain}
        name = re.escape(member)
        mention = re.compile(rf"\.{name}\b|[\"']{name}[\"']")
        for rel, text in api.source_texts().items():
            if member not in text:
                continue
            classes: list[tuple[int, int, str]] | None = None
            for n, line in enumerate(text.splitlines(), 1):
                if mention.search(line) is None:
                    continue
                receivers = re.findall(rf"([\w.]+)\.{name}\b", line)
                if receivers and all(_module_name(api, rel, r) for r in receivers):
                    continue
                if receivers and all(r in ("self", "cls") for r in receivers):
                    if classes is None:
                        classes = _class_spans(api, text, api.tree.module_name(rel))
                    around = [path for start, end, path in classes if start <= n <= end]
                    if around and around[-1] not in inherited:
                        continue
                return [rel, n]
        return []

    got = api.fact(f"dispatch:1:{owner}:{member}", compute)
    return (str(got[0]), int(got[1])) if got else None


def _class_spans(api: HostAPI, text: str, module: str) -> list[tuple[int, int, str]]:
    """Every class of a module: (first line, last line, dotted path), outer ones first."""
    tree = api._ast(module, text)
    if tree is None:
        return []
    out: list[tuple[int, int, str]] = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                path = f"{prefix}.{node.name}"
                out.append((node.lineno, node.end_lineno or node.lineno, path))
                visit(node.body, path)
            elif isinstance(node, ast.If | ast.Try):
                visit(node.body + node.orelse, prefix)

    visit(tree.body, module)
    return out


def _module_name(api: HostAPI, rel: str, receiver: str) -> bool:
    """Whether ``receiver``, written in host file ``rel``, names a module: one the file imports
    anywhere (``from .deprecated import copy_internals`` inside a function too), or a dotted
    path to a host module."""
    if not re.fullmatch(r"[A-Za-z_][\w.]*", receiver or ""):
        return False
    if api.owns(receiver) and api.module(receiver) is not None:
        return True
    head = receiver.split(".")[0]
    module = api.tree.module_name(rel)
    known = api.__dict__.setdefault("_imported_modules", {})
    if rel not in known:
        known[rel] = _imported_modules(api, rel, module)
    return head in known[rel]


def _imported_modules(api: HostAPI, rel: str, module: str) -> set[str]:
    """The names file ``rel`` binds to host modules by its imports, wherever they stand."""
    tree = api._ast(module, api.module_text(module) or "")
    out: set[str] = set()
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Import):
            for alias in node.names:
                named = alias.name if alias.asname else alias.name.split(".")[0]
                if api.module(named) is not None:
                    out.add(alias.asname or named)
        elif isinstance(node, ast.ImportFrom):
            base = absolute(module, node.module, node.level, api)
            for alias in node.names:
                path = f"{base}.{alias.name}"
                if base and api.owns(path) and api.module(path) is not None:
                    out.add(alias.asname or alias.name)
    return out
