"""A check declares itself: each check module holds one :class:`Check` (its ids and, per id,
kind, severity, witness and fixes; how it runs), :mod:`driftcheck.checks.catalog` lists every
one, and everything else (the registry, ``rules``, SARIF, the README table) is derived."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from driftcheck import registry
from driftcheck.checks import MERGING, PER_USE, WHOLE_CLIENT, catalog
from driftcheck.checks.declaration import Check, CheckId, Runs
from driftcheck.fixes.codemods import CODEMODS
from driftcheck.kinds import KIND_MEANING, FixSafety, Kind

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "driftcheck"
CHECKS_DIR = PACKAGE / "checks"

#: The modules of ``checks/`` that are no check, and what they are instead.
HELPERS = {
    "__init__": "the package's face: what the pipeline runs, derived from the catalog",
    "catalog": "the list of every check",
    "declaration": "what a check declares",
    "context": "what every check sees, and finding(), which builds a declared id's finding",
    "history": "what a host's deprecation shims and changelogs say, for several checks",
    "replacement": "whether a rename is a drop-in, for the checks that propose renames",
    "fallbacks": "which findings a client's own fallback makes moot",
    "http_common": "what the HTTP checks share",
    "http": "the lazy HTTP checks' declarations, readable without loading them",
}
#: Where a lazy check's declaration lives (its light entry), by the check's module.
LAZY_HOME = "driftcheck.checks.http"

DECLARED: dict[str, tuple[Check, CheckId]] = {r.id: (c, r) for c in catalog.CHECKS for r in c.ids}


def _module_path(module: str) -> Path:
    return ROOT / (module.replace(".", "/") + ".py")


def test_every_check_module_is_in_the_catalog_and_no_helper_is():
    on_disk = {p.stem for p in CHECKS_DIR.glob("*.py")}
    assert set(HELPERS) <= on_disk, set(HELPERS) - on_disk  # the list stays true
    listed = [c.name for c in catalog.CHECKS]
    assert len(listed) == len(set(listed)), "a module is listed twice"
    assert set(listed) == on_disk - set(HELPERS), (
        "a check module is missing from checks/catalog.py (or a helper is listed as a check)"
    )
    for c in catalog.CHECKS:
        assert c.module == f"driftcheck.checks.{c.name}"


def test_a_check_declares_itself_in_its_own_module_unless_it_is_lazy():
    for c in catalog.CHECKS:
        if c.lazy:
            # held by the light entry, so that the registry reads it without loading the check
            assert c.loads_on, c.module
            assert c in importlib.import_module(LAZY_HOME).HTTP_CHECKS
        else:
            assert not c.loads_on, c.module
            assert importlib.import_module(c.module).CHECK is c, c.module
        assert callable(c.load()), c.module
        assert c.doc.strip(), f"{c.module} has no docstring (the check's documentation)"


def test_ids_are_unique_and_the_registry_is_derived_from_the_declarations():
    ids = [r.id for c in catalog.CHECKS for r in c.ids]
    assert len(ids) == len(set(ids))
    assert list(registry.CHECK_IDS) == ids
    for check_id, (c, r) in DECLARED.items():
        got = registry.CHECK_IDS[check_id]
        assert (got.kind, got.severity, got.module, got.witness) == (
            r.kind,
            r.severity,
            c.module,
            r.witness,
        )
        assert type(r.id) is str
    assert registry.KINDS == {str(k): m for k, m in KIND_MEANING.items()}
    runs = [c.runs for c in catalog.CHECKS]
    assert len(PER_USE) == runs.count(Runs.PER_USE)
    assert len(WHOLE_CLIENT) == runs.count(Runs.WHOLE_CLIENT)
    assert len(MERGING) == runs.count(Runs.MERGING)
    # the ids of the checks that declare none are the rules'
    assert [c.name for c in catalog.CHECKS if not c.ids] == ["rule_match"]


def _calls(tree: ast.AST, name: str) -> list[ast.Call]:
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name
    ]


def _check_modules() -> list[str]:
    return sorted({c.module for c in catalog.CHECKS})


def test_every_finding_is_of_a_declared_id_and_every_declared_id_is_reported_by_its_check():
    reported: dict[str, set[str]] = {}
    for module in _check_modules():
        namespace = importlib.import_module(module)
        for call in _calls(ast.parse(_module_path(module).read_text()), "finding"):
            arg = call.args[1]
            names = [arg.body, arg.orelse] if isinstance(arg, ast.IfExp) else [arg]
            for name in names:
                assert isinstance(name, ast.Name), f"{module}:{call.lineno}: pass a CheckId"
                report = getattr(namespace, name.id)
                assert isinstance(report, CheckId), f"{module}:{call.lineno}"
                reported.setdefault(report.id, set()).add(module)
    assert set(reported) == set(DECLARED), "an id is declared that no check reports"
    for check_id, modules in reported.items():
        assert DECLARED[check_id][0].module in modules, check_id


def _named(call: ast.Call) -> tuple[set[str], set[str]]:
    """The codemods and fix safeties a ``Fix(...)``, ``rename_fix(...)`` or
    ``replacement_fix(...)`` call names."""
    codemods: set[str] = set()
    safeties: set[str] = set()
    renames = isinstance(call.func, ast.Name) and call.func.id in ("rename_fix", "replacement_fix")
    if renames:
        codemods |= {"rename-import", "rename-attribute"}
    elif len(call.args) >= 3 and isinstance(call.args[2], ast.Constant):
        codemods.add(call.args[2].value)
    codemods |= {k.value.value for k in call.keywords if k.arg == "codemod"}  # type: ignore[attr-defined]
    # the safety: Fix's first argument, rename_fix's fourth, replacement_fix's fifth (maybe
    # ``"safe" if x else "unsafe"``); replacement_fix makes a rename that is no drop-in unsafe,
    # and one the host's message names two of manual
    where = 0
    if renames:
        where = 3 if call.func.id == "rename_fix" else 4  # type: ignore[attr-defined]  # a Name
    if renames and call.func.id == "replacement_fix":  # type: ignore[attr-defined]  # a Name
        safeties |= {str(FixSafety.UNSAFE), str(FixSafety.MANUAL)}
    given = [k.value for k in call.keywords if k.arg == "safety"]
    given += call.args[where : where + 1]
    for node in (n for g in given for n in ast.walk(g)):
        if isinstance(node, ast.Constant) and node.value in {str(s) for s in FixSafety}:
            safeties.add(node.value)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "FixSafety":
                safeties.add(str(FixSafety[node.attr]))
    return codemods - {None}, safeties  # type: ignore[operator]


@pytest.mark.parametrize("module", _check_modules())
def test_a_check_declares_the_fixes_it_offers(module: str):
    """The codemods its module names are the ones its ids declare, and so are the safeties."""
    declared = [r for c in catalog.CHECKS if c.module == module for r in c.ids]
    tree = ast.parse(_module_path(module).read_text())
    codemods: set[str] = set()
    safeties: set[str] = set()
    for call in _calls(tree, "Fix") + _calls(tree, "rename_fix") + _calls(tree, "replacement_fix"):
        got = _named(call)
        codemods |= got[0]
        safeties |= got[1]
    assert codemods == {m for r in declared for m in r.codemods}
    assert safeties <= {str(s) for r in declared for s in r.fixes}
    assert {m for r in declared for m in r.codemods} <= set(CODEMODS)


def test_lazy_checks_are_not_loaded_with_the_pipeline_or_the_registry():
    lazy = [c.module for c in catalog.CHECKS if c.lazy]
    code = (
        "import sys, driftcheck.pipeline, driftcheck.registry\n"
        f"print([m for m in {lazy!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


#: String literals spelled like a check id or a kind that mean another word, by module.
OTHER_WORDS: dict[tuple[str, str], str] = {
    ("driftcheck/client/uses.py", "string-ref"): "a use kind: host code named in a string",
    ("driftcheck/checks/string_ref.py", "string-ref"): "the use kind the check reads",
    ("driftcheck/host/values.py", "deprecated"): "a host name's status (present, deprecated, ..)",
    ("driftcheck/host/param_notes.py", "deprecated"): "a parameter's status",
    ("driftcheck/http/flags_syntax.py", "deprecated"): "argparse's keyword, and its note",
    ("driftcheck/http/oracle.py", "deprecated"): "a JSON key of a flag's description",
    ("driftcheck/http/surface_model.py", "deprecated"): "a JSON key of a flag's description",
    ("driftcheck/checks/default_change.py", "deprecated"): "a value a host parameter takes",
    ("driftcheck/checks/http_flags.py", "deprecated"): "the evidence note of a deprecated flag",
}


def test_each_check_id_and_kind_is_a_string_literal_in_one_module():
    """Each built-in check id is written once, where it is declared; every other module refers
    to the declared constant (``MOVED_SYMBOL``, ``Kind.DEPRECATED``).

    A check named after its kind (``missing-symbol`` is a check and the kind it reports) has
    one spelling for both: the literal is the kind's, in ``driftcheck/kinds.py``, and the check
    declares its id as ``Kind.MISSING_SYMBOL.value``. ``--disable missing-symbol`` then drops
    the kind, which includes the check's findings, as it did before. A lazy check's id is
    written in its light entry (``checks/http.py``), where it is declared.

    A literal spelled like an id that means another word (a use kind, a status) is listed in
    :data:`OTHER_WORDS` with that word.
    """
    kinds = {str(k) for k in Kind}
    home: dict[str, str] = {}
    for check_id, (c, _r) in DECLARED.items():
        module = "driftcheck.kinds" if check_id in kinds else LAZY_HOME if c.lazy else c.module
        home[check_id] = str(_module_path(module).relative_to(ROOT))
    stray = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in home:
                if rel != home[node.value] and (rel, node.value) not in OTHER_WORDS:
                    stray.append(f"{rel}:{node.lineno}: {node.value!r}")
    assert not stray, "refer to the declared constant instead:\n" + "\n".join(stray)
    for (rel, word), _meaning in OTHER_WORDS.items():
        assert (ROOT / rel).is_file(), f"{rel} is gone: drop it from OTHER_WORDS"
        assert f'"{word}"' in (ROOT / rel).read_text(), f"{rel} no longer writes {word!r}"
