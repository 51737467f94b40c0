"""What a host's class machinery does with a client class attribute that has no annotation
(pydantic 1 infers a field from ``name = Field(...)``; pydantic 2 raises "A non-annotated
attribute was detected"), release by release, read from the host's source.

The host walks the class namespace (``for name, value in namespace.items():``) and tests a name
against the annotations it read (``name not in annotations``, the annotations bound from
``namespace.get("__annotations__")``); what the ``if`` of that test does is the treatment: it
reads the attribute (no raise), rejects it (every branch raises) or may reject it (one does).
Which client classes are walked is the host's too: :func:`walker_of` follows a host class's
``metaclass=`` to the metaclass's ``__new__`` and the functions it calls.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace

from driftcheck.host.api import HostAPI
from driftcheck.host.class_hooks import Treatment, _first_verdict, _text
from driftcheck.host.objects import Found


@dataclass(frozen=True)
class Unannotated:
    """One host function's treatment of a namespace name without an annotation.

    Attributes:
        function: The function's name (``inspect_namespace``, ``__new__``).
        file: Its host file.
        line: The line of the ``not in`` test.
        treatment: reads, rejects (every branch raises) or rejects with ``conditional``.
        message: The host's message (the last branch's, the general case).
        at: The line of that raise.
        conditional: Only some branches raise.
        skips: Names the walk passes over before the test (``if var_name == "model_config":
            continue``): never rejected.
    """

    function: str
    file: str
    line: int
    treatment: Treatment
    message: str = ""
    at: int = 0
    conditional: bool = False
    skips: tuple[str, ...] = ()


def unannotated(api: HostAPI) -> list[Unannotated]:
    """Every namespace walk of the release that tests names against the annotations."""

    def compute() -> list[list]:
        rows: list[list] = []
        for rel, text in sorted(api.source_texts().items()):
            if "__annotations__" not in text or ".items()" not in text:
                continue
            try:
                tree = ast.parse(text)
            except (SyntaxError, ValueError):
                continue
            for fn in ast.walk(tree):
                if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                    for u in _walks(fn, rel):
                        rows.append(
                            [u.function, u.file, u.line, u.treatment, u.message, u.at,
                             u.conditional, list(u.skips)]
                        )  # fmt: skip
        return rows

    return [
        Unannotated(r[0], r[1], r[2], r[3], r[4], r[5], bool(r[6]), tuple(r[7]))
        for r in api.fact("class_unannotated", compute)
    ]


def _walks(fn: ast.FunctionDef | ast.AsyncFunctionDef, rel: str) -> list[Unannotated]:
    annotations = {
        t.id
        for node in ast.walk(fn)
        if isinstance(node, ast.Assign)
        and any(
            isinstance(c, ast.Constant) and c.value == "__annotations__"
            for c in ast.walk(node.value)
        )
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    if not annotations:
        return []
    out: list[Unannotated] = []
    for loop in ast.walk(fn):
        if not (isinstance(loop, ast.For) and isinstance(loop.target, ast.Tuple)):
            continue
        if ".items()" not in ast.unparse(loop.iter) or not loop.target.elts:
            continue
        key = loop.target.elts[0]
        if not isinstance(key, ast.Name):
            continue
        tests = [
            node
            for node in ast.walk(loop)
            if isinstance(node, ast.If) and _tests_unannotated(node.test, key.id, annotations)
        ]
        # The test of the name alone is the general case; one joined to others (``not in
        # annotations or not is_classvar(...)``) is a narrower one.
        tests.sort(key=lambda n: (not isinstance(n.test, ast.Compare), n.lineno))
        if tests:
            found = _treatment(fn.name, rel, tests[0])
            out.append(replace(found, skips=tuple(sorted(_skipped(loop, key.id)))))
    return out


def _skipped(loop: ast.For, key: str) -> set[str]:
    """Names an ``if`` of the walk compares the key with and passes over (``continue``)."""
    names: set[str] = set()
    for node in ast.walk(loop):
        if not (isinstance(node, ast.If) and node.body and isinstance(node.body[0], ast.Continue)):
            continue
        test = node.test
        if not (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name)):
            continue
        if test.left.id != key or len(test.ops) != 1:
            continue
        right = test.comparators[0]
        if isinstance(test.ops[0], ast.Eq):
            values = [right]
        elif isinstance(test.ops[0], ast.In) and isinstance(right, ast.Tuple | ast.List | ast.Set):
            values = list(right.elts)
        else:
            continue
        names.update(
            v.value for v in values if isinstance(v, ast.Constant) and isinstance(v.value, str)
        )
    return names


def _tests_unannotated(test: ast.expr, key: str, annotations: set[str]) -> bool:
    return any(
        isinstance(c, ast.Compare)
        and isinstance(c.left, ast.Name)
        and c.left.id == key
        and isinstance(c.ops[0], ast.NotIn)
        and isinstance(c.comparators[0], ast.Name)
        and c.comparators[0].id in annotations
        for c in ast.walk(test)
    )


def _treatment(function: str, rel: str, node: ast.If) -> Unannotated:
    """Every branch of the ``if`` raises (rejects: the last branch's message), one does (may
    reject), or none (reads)."""
    raises = _all_raise(node.body)
    if raises is not None:
        return Unannotated(function, rel, node.lineno, "rejects", raises[0], raises[1])
    v = _first_verdict(node.body)
    if v is not None and v[0] == "rejects":
        return Unannotated(function, rel, node.lineno, "rejects", v[1], v[2], True)
    return Unannotated(function, rel, node.lineno, "reads")


def _all_raise(body: list[ast.stmt]) -> tuple[str, int] | None:
    """The last raise of a block every path of which raises (an if/elif/else chain of raises)."""
    if not body:
        return None
    last = body[-1]
    if isinstance(last, ast.Raise) and last.exc is not None:
        exc = last.exc
        message = _text(exc.args[0]) if isinstance(exc, ast.Call) and exc.args else ""
        return message or ast.unparse(exc), last.lineno
    if isinstance(last, ast.If) and last.orelse:
        a, b = _all_raise(last.body), _all_raise(last.orelse)
        if a is not None and b is not None:
            return b
    return None


def walker_of(api: HostAPI, cls: Found) -> set[str]:
    """The functions a host class's metaclass ``__new__`` runs on a subclass's namespace: its
    own name and the names it calls (one step), for each class of its MRO with a
    ``metaclass=``. Memoised per release and class."""
    memo = api.__dict__.setdefault("_class_walkers", {})
    if cls.path not in memo:
        memo[cls.path] = _walker_of(api, cls)
    return memo[cls.path]


def _walker_of(api: HostAPI, cls: Found) -> set[str]:
    names: set[str] = set()
    classes = [cls.obj]
    try:
        classes += list(cls.obj.mro())  # type: ignore[attr-defined]  # a class
    except Exception:  # noqa: BLE001 - an unresolved base ends the walk, not the scan
        pass
    for c in classes:
        meta = _metaclass(api, c)
        if meta is None:
            continue
        tree = _parse_file(api, meta.file)
        node = _class_at(tree, meta.obj.name) if tree is not None else None
        if node is None:
            continue
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and item.name == "__new__":
                names.add(f"{_key(api, meta.file)}::__new__")
                names.update(
                    n.func.id if isinstance(n.func, ast.Name) else n.func.attr
                    for n in ast.walk(item)
                    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name | ast.Attribute)
                )
    return names


def _metaclass(api: HostAPI, obj: object) -> Found | None:
    """The host metaclass a class statement names (``class BaseModel(metaclass=M)``)."""
    path = getattr(obj, "path", "")
    filepath = getattr(obj, "filepath", None)
    if not path or filepath is None or isinstance(filepath, list):
        return None
    rel = Found(obj, path).file  # type: ignore[arg-type]  # a griffe object
    tree = _parse_file(api, rel)
    node = _class_at(tree, path.rsplit(".", 1)[-1]) if tree is not None else None
    if node is None:
        return None
    for kw in node.keywords:
        if kw.arg == "metaclass":
            module = path.rsplit(".", 1)[0]
            found = api.resolve(f"{module}.{ast.unparse(kw.value)}")
            return found if isinstance(found, Found) else None
    return None


def _key(api: HostAPI, rel: str) -> str:
    """The source-text key of a host file griffe names (the same path, or one ending in it)."""
    texts = api.source_texts()
    if rel in texts:
        return rel
    return next((k for k in texts if rel.endswith("/" + k) or k.endswith("/" + rel)), rel)


def _parse_file(api: HostAPI, rel: str) -> ast.Module | None:
    texts = api.source_texts()
    key = _key(api, rel)
    if key not in texts:
        return None
    try:
        return ast.parse(texts[key])
    except (SyntaxError, ValueError):
        return None


def _class_at(tree: ast.Module, name: str) -> ast.ClassDef | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    return None
