"""Property-based tests: bad and odd Python never crashes a scan, and codemods never break code.

Inputs are the fixture clients' real files, mutated line by line and character by character,
and modules generated from host-flavoured names (calls, attributes, subscripts, lambdas, blocks).
A scan must not raise: a file libcst cannot parse becomes a ``skipped`` entry. A codemod, run on
any node of parsable code, either returns code that parses or raises ``Decline``; ``fix_code``
never raises.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

import libcst as cst
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from libcst.metadata import MetadataWrapper, PositionProvider
from test_fixes import FIXTURES, RULES_WITH_FIXES, finding

from driftcheck.fixes.base import Decline
from driftcheck.fixes.codemods import CODEMODS
from driftcheck.fixes.patches import fix_code
from driftcheck.pipeline import ScanResult, scan

HOSTS = FIXTURES / "hosts"


def _host_of(client: Path) -> str | None:
    """The fixture host a fixture client requires (the ``Requires-Dist`` of its metadata that
    names one of our fixture hosts; a client may require other packages too)."""
    [meta] = client.glob("*.dist-info/METADATA")
    reqs = [ln for ln in meta.read_text().splitlines() if ln.startswith("Requires-Dist:")]
    names = [re.split(r"[<>=!~ ;\[]", r.split(":", 1)[1].strip())[0] for r in reqs]
    hosts = [n for n in names if (HOSTS / n / "2.0").is_dir()]
    return hosts[0] if hosts else None


#: fixture client file → (code, the host it is written against)
CORPUS = {
    path.relative_to(FIXTURES).as_posix(): (path.read_text(), _host_of(client))
    for client in sorted((FIXTURES / "clients").iterdir())
    if any(client.glob("*.dist-info/METADATA")) and _host_of(client)  # of our fixture hosts
    for path in sorted(client.rglob("*.py"))
}

#: ``DRIFTCHECK_PROPERTY_EXAMPLES=2000`` for a long bug hunt.
PROPERTY_SETTINGS = settings(
    max_examples=int(os.environ.get("DRIFTCHECK_PROPERTY_EXAMPLES", "100")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture(scope="module", autouse=True)
def isolated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A throwaway cache: thousands of generated clients must not fill the user's cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DRIFTCHECK_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        yield


def scan_code(code: str, host: str) -> ScanResult:
    """Scan a one-module client holding ``code`` against ``host`` 1.0 → 2.0, with the fixture
    rules (binding rules widen receiver inference) and fix rules."""
    root = Path(tempfile.mkdtemp(prefix="driftcheck-prop-"))
    try:
        pkg = root / "case"
        pkg.mkdir()
        (pkg / "__init__.py").write_text("")
        (pkg / "mod.py").write_text(code, encoding="utf-8")
        return scan(
            str(pkg),
            against=str(HOSTS / host / "2.0"),
            baseline=str(HOSTS / host / "1.0"),
            host=host,
            rules=RULES_WITH_FIXES,
        )
    finally:
        shutil.rmtree(root)


def parses(code: str) -> bool:
    """libcst can parse it (what the codemods need)."""
    try:
        cst.parse_module(code)
    except Exception:  # noqa: BLE001  (whatever libcst raises, the file cannot be rewritten)
        return False
    return True


def compiles(code: str) -> bool:
    """Python can parse it (what the scan needs: the file could be imported)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


# -- mutated real files ------------------------------------------------------------------------

ODD_CHARS = list("()[]{}:;,.=+-*/@\\'\"#\n\t ") + ["\r", "\x0c", "\x00", "é", "\u2028", "𝔵"]


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, str]:
    """A fixture client file with a few random line and character edits, and its host."""
    rel = draw(st.sampled_from(sorted(CORPUS)))
    code, host = CORPUS[rel]
    lines = code.splitlines(keepends=True)
    for _ in range(draw(st.integers(1, 6))):
        op = draw(
            st.sampled_from(
                [
                    "delete",
                    "duplicate",
                    "swap",
                    "indent",
                    "dedent",
                    "char-del",
                    "char-ins",
                    "char-set",
                ]
            )
        )
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        if op == "delete":
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "indent":
            lines[i] = "    " + lines[i]
        elif op == "dedent":
            lines[i] = lines[i].removeprefix("    ")
        else:
            line = lines[i]
            k = draw(st.integers(0, max(len(line) - 1, 0)))
            ch = draw(st.sampled_from(ODD_CHARS))
            if op == "char-del":
                lines[i] = line[:k] + line[k + 1 :]
            elif op == "char-ins":
                lines[i] = line[:k] + ch + line[k:]
            else:
                lines[i] = line[:k] + ch + line[k + 1 :]
    return "".join(lines), host


# -- generated modules -------------------------------------------------------------------------

NAMES = [
    "minihost", "protohost", "core", "engine", "Engine", "Executor", "RunConfig", "connect",
    "load_items", "find_item", "flush", "old_method", "describe", "step", "run", "finish", "rpc",
    "self", "executor", "model", "types", "MethodType", "Settings", "x", "_kwargs",
]  # fmt: skip
MODULES = ["minihost.core", "minihost.engine", "minihost.config", "protohost.executor",
           "protohost.config", "protohost.model", "types"]  # fmt: skip

names = st.sampled_from(NAMES)
atoms = names | st.sampled_from(
    [
        '"old_method"',
        '"minihost.core.connect"',
        "None",
        "0",
        "1",
        'connect("h", retries=5)',
        "load_items()",
        "Engine('e')",
        "protohost.config.RunConfig(batch_size=3)",
        "protohost.executor.Executor()",
    ]
)


def _attr(base: str, name: str) -> str:
    return (
        f"({base}).{name}"
        if not base.replace(".", "").replace("_", "").isalnum()
        else f"{base}.{name}"
    )


def _extend(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    argument = children | st.builds(lambda n, v: f"{n}={v}", names, children)
    argument |= children.map(lambda v: f"*{v}") | children.map(lambda v: f"**{v}")
    return st.one_of(
        st.builds(_attr, children, names),
        st.builds(
            lambda f, args, trailing: f"{f}({', '.join(args)}{',' if trailing and args else ''})",
            children,
            st.lists(argument, max_size=3),
            st.booleans(),
        ),
        st.builds(lambda v, i: f"{v}[{i}]", children, st.sampled_from(["0", "1", "i", "0:1"])),
        st.builds(lambda a, b: f"({a} + {b})", children, children),
        st.builds(lambda a, b, c: f"({a} if {b} else {c})", children, children, children),
        children.map(lambda v: f"(lambda: {v})"),
        children.map(lambda v: f"not {v}"),
    )


expressions = st.recursive(atoms, _extend, max_leaves=8)


def _block(header: str, body: list[str]) -> list[str]:
    return [header, *("    " + line for line in (body or ["pass"]))]


def _extend_statements(children: st.SearchStrategy[list[str]]) -> st.SearchStrategy[list[str]]:
    params = st.lists(names, max_size=3, unique=True).map(", ".join)
    return st.one_of(
        st.builds(lambda n, p, b: _block(f"def {n}({p}):", b), names, params, children),
        st.builds(lambda n, p, b: _block(f"class {n}({p}):", b), names, params, children),
        st.builds(lambda e, b: _block(f"if {e}:", b), expressions, children),
        st.builds(lambda e, b: _block(f"for x in {e}:", b), expressions, children),
        st.builds(
            lambda b, h: [*_block("try:", b), *_block("except ImportError:", h)], children, children
        ),
        st.builds(lambda a, b: a + b, children, children),
    )


simple_statements = st.one_of(
    st.builds(lambda m, n: [f"from {m} import {n}"], st.sampled_from(MODULES), names),
    st.builds(lambda m: [f"import {m}"], st.sampled_from(MODULES)),
    st.builds(lambda n, e: [f"{n} = {e}"], names, expressions),
    st.builds(lambda n, e: [f"self.{n} = {e}"], names, expressions),
    st.builds(lambda e: [e], expressions),
    st.builds(lambda e: [f"return {e}"], expressions),
)
statements = st.recursive(simple_statements, _extend_statements, max_leaves=10)
HEADER = "import protohost\nfrom minihost.core import connect, load_items\n"
generated = st.builds(
    lambda body, host: (HEADER + "\n".join(body) + "\n", host),
    statements,
    st.sampled_from(["minihost", "protohost"]),
)


# -- scans never crash -------------------------------------------------------------------------


def _check_scan(code: str, host: str) -> None:
    result = scan_code(code, host)
    event("parses" if compiles(code) else "does not parse")
    event("with findings" if result.findings else "no findings")
    skipped = {file for file, _ in result.skipped}
    if compiles(code) or not re.search(rf"\b{host}\b", code):
        # parsed, or never read: a file that does not name the host cannot reach it
        assert "case/mod.py" not in skipped, result.skipped
    else:
        assert "case/mod.py" in skipped
        assert all(f.file != "case/mod.py" for f in result.findings)
    for f in result.findings:
        assert f.line >= 1 and f.column >= 1, f
    # libcst mis-numbers the lines of a statement that begins after a backslash continuation,
    # and counts the columns of a line that holds a form feed differently from CPython
    if result.uses and parses(code) and "\\\n" not in code and "\x0c" not in code:
        starts = _libcst_starts(code)
        for use in result.uses:
            # A store through setattr(obj, "name", value) is an attribute use at the call.
            where = starts[use.kind] | (starts["call"] if use.store else set())
            assert (use.line, use.column) in where, (use, code)


#: Use kind → the libcst node types a use of that kind may start at (what the codemods look for)
USE_NODES: dict[str, tuple[type, ...]] = {
    "call": (cst.Call,),
    "attribute": (cst.Attribute,),
    "import": (cst.Name, cst.Attribute),
    "override": (cst.Name,),
    "subclass": (cst.Name, cst.Attribute, cst.Call, cst.Subscript),
    "string-ref": (cst.SimpleString, cst.ConcatenatedString),
    "declaration": (cst.Name,),
}


def _libcst_starts(code: str) -> dict[str, set[tuple[int, int]]]:
    """Use kind → (line, 1-based column) where libcst sees a node a use of that kind may be."""
    positions = MetadataWrapper(cst.parse_module(code)).resolve(PositionProvider)
    out: dict[str, set[tuple[int, int]]] = {kind: set() for kind in USE_NODES}
    for node, pos in positions.items():
        for kind, types in USE_NODES.items():
            if isinstance(node, types):
                out[kind].add((pos.start.line, pos.start.column + 1))
    return out


def test_use_positions_count_characters_not_bytes():
    line = "    café = 'é𝔵'; minihost.core.connect('h')"
    code = f"import minihost.core\n\n\ndef f():\n{line}\n"
    result = scan_code(code, "minihost")
    calls = [u for u in result.uses if u.kind == "call"]
    column = line.index("minihost") + 1
    assert [(u.line, u.column) for u in calls] == [(5, column)]
    assert (5, column) in _libcst_starts(code)["call"]


@PROPERTY_SETTINGS
@given(mutated())
def test_scan_of_mutated_fixture_files_never_raises(case: tuple[str, str]):
    _check_scan(*case)


@PROPERTY_SETTINGS
@given(generated)
def test_scan_of_generated_modules_never_raises(case: tuple[str, str]):
    _check_scan(*case)


def test_scan_reports_a_syntax_error_as_skipped():
    result = scan_code("import minihost\n\ndef f(:\n    pass\n", "minihost")
    assert [file for file, _ in result.skipped] == ["case/mod.py"]
    assert "syntax error" in result.skipped[0][1]


def test_scan_survives_deep_nesting():
    code = "import minihost\nx = " + "(" * 400 + "minihost.core" + ")" * 400 + "\n"
    result = scan_code(code, "minihost")
    assert result.findings == [] or all(f.line >= 1 for f in result.findings)


# -- codemods return parsable code or decline --------------------------------------------------


#: codemod → the node kinds its findings point at
TARGET_KINDS = {
    "follow-up-call": "call",
    "add-keyword": "call",
    "remove-keyword": "call",
    "rename-keyword": "call",
    "positional-to-keyword": "call",
    "unwrap-result": "call",
    "rename-attribute": "attribute",
    "rename-import": "import",
    "accept-kwargs": "function",
    "keyword-to-call": "call",
    "add-launch-flag": "list",
    "rename-launch-flag": "string",
    "rename-payload-key": "string",
}


def _targets(code: str) -> dict[str, list[tuple[int, int, str, list[str]]]]:
    """Node kind → (line, 1-based column, name, keywords passed) of the nodes fixes point at."""
    wrapper = MetadataWrapper(cst.parse_module(code))
    positions = wrapper.resolve(PositionProvider)
    out: dict[str, list[tuple[int, int, str, list[str]]]] = {}

    def add(kind: str, node: cst.CSTNode, name: str, keywords: tuple[str, ...] = ()) -> None:
        row = (positions[node].start.line, positions[node].start.column + 1, name, list(keywords))
        out.setdefault(kind, []).append(row)
        out.setdefault("any", []).append(row)

    for node in positions:
        if isinstance(node, cst.Call):
            method = node.func.attr.value if isinstance(node.func, cst.Attribute) else ""
            add("call", node, method, tuple(a.keyword.value for a in node.args if a.keyword))
        elif isinstance(node, cst.Attribute):
            add("attribute", node, node.attr.value)
        elif isinstance(node, cst.ImportFrom) and not isinstance(node.names, cst.ImportStar):
            for alias in node.names:
                if isinstance(alias.name, cst.Name):
                    add("import", alias.name, alias.name.value)
        elif isinstance(node, cst.FunctionDef):
            add("function", node.name, node.name.value)
        elif isinstance(node, cst.List):
            add("list", node, "")
        elif isinstance(node, cst.SimpleString):
            try:
                text = str(node.evaluated_value)
            except (SyntaxError, ValueError):  # a mutated literal Python itself would refuse
                text = ""
            add("string", node, text)
    return out


def _params(codemod: str, name: str, keywords: list[str], pick: st.DrawFn) -> dict[str, str]:
    keyword = pick(st.sampled_from([*keywords, "fast_mode", "retries"]))
    word = name or "helper"
    return {
        "follow-up-call": {"method": "sample_tokens", "args": pick(st.sampled_from(["None", ""]))},
        "rename-import": {"old": f"minihost.core.{word}", "new": f"minihost.utils.{word}_new"},
        "rename-attribute": {"old": word, "new": f"{word}_new"},
        "add-keyword": {
            "keyword": pick(st.sampled_from(["fast_mode", "block_size"])),
            "value": pick(st.sampled_from(["False", f"{{arg:{keyword}}}"])),
        },
        "remove-keyword": {"keyword": keyword},
        "rename-keyword": {"keyword": keyword, "new": "renamed"},
        "positional-to-keyword": {
            "from": pick(st.sampled_from(["0", "1"])),
            "names": pick(st.sampled_from(["a", "a,b", "size,rate"])),
        },
        "unwrap-result": {},
        "accept-kwargs": {},
        "keyword-to-call": {
            "keyword": keyword,
            "requires": pick(st.sampled_from(["", *keywords])),
            "call": "{result}.params.update({}, {value})",
        },
        "add-launch-flag": {"flag": pick(st.sampled_from(["--enable-x", "--no-y"]))},
        "rename-launch-flag": {"old": name or "--old", "new": "--new-flag"},
        "rename-payload-key": {"old": name or "key", "new": "renamed_key"},
    }[codemod]


def _codemod_findings(code: str, data: st.DataObject, count: int) -> list:
    """``count`` findings, each on a node its codemod handles (or, now and then, on any node)."""
    targets = _targets(code)
    out = []
    usable = sorted(c for c in CODEMODS if targets.get(TARGET_KINDS[c]))
    assume(usable)
    for _ in range(count):
        codemod = data.draw(st.sampled_from(usable))
        kind = data.draw(st.sampled_from([TARGET_KINDS[codemod]] * 9 + ["any"]))
        line, column, name, keywords = data.draw(st.sampled_from(targets[kind]))
        fix_params = _params(codemod, name, keywords, data.draw)
        out.append(finding(codemod, line, column, file="case/mod.py", **fix_params))
    return out


sources = mutated() | generated


@PROPERTY_SETTINGS
@given(sources, st.data())
def test_each_codemod_returns_parsable_code_or_declines(case: tuple[str, str], data):
    code, _ = case
    assume(parses(code))
    [f] = _codemod_findings(code, data, 1)
    try:
        new = CODEMODS[f.fix.codemod](code, [f])
    except Decline:
        event(f"{f.fix.codemod}: declined")
        return
    event(f"{f.fix.codemod}: {'rewrote' if new != code else 'unchanged'}")
    cst.parse_module(new)


@PROPERTY_SETTINGS
@given(sources, st.data())
def test_fix_code_never_raises_and_keeps_code_parsable(case: tuple[str, str], data):
    code, _ = case
    assume(parses(code))
    findings = _codemod_findings(code, data, data.draw(st.integers(1, 4)))
    new, applied, declined = fix_code(code, findings)
    cst.parse_module(new)
    assert len(applied) + len(declined) == len(findings)
    if not applied:
        assert new == code
