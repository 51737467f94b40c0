"""Host names resolved the way the import system does, on our own fixture host ``nshost``:
star imports (with and without ``__all__``, chained, in a cycle), ``__all__`` built in steps,
``del``, ``try``/``except`` definitions, a stub beside a compiled module, a lazy map read by a
module ``__getattr__``, tables of renamed and removed names, conditional deprecations and
removals of parameters, and class-level aliases. ``fixtures/clients/nsclient`` marks what a
scan of 1.0 code against 2.0 must report (``# drift``, ``-> TEXT``) and must not (``# ok``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from driftcheck.host.load import load_host
from driftcheck.host.objects import UNKNOWN, Found
from driftcheck.host.served import DEPRECATED, PRESENT, REMOVED, Served
from driftcheck.pipeline import ScanResult, scan
from driftcheck.sources.specs import parse_spec

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
HOST = FIXTURES / "hosts" / "nshost"
CLIENT = FIXTURES / "clients" / "nsclient"


@pytest.fixture(scope="module")
def v1():
    return load_host(parse_spec(str(HOST / "1.0")))


@pytest.fixture(scope="module")
def v2():
    return load_host(parse_spec(str(HOST / "2.0")))


def _status(got: object) -> str:
    if isinstance(got, Found):
        return "found"
    if isinstance(got, Served):
        return got.status
    return "unknown" if got is UNKNOWN else "absent"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("nshost.helper", "found"),  # defined in core, star-imported through core.__all__
        ("nshost.from_left", "found"),  # core.__all__ += left.__all__ (left/right: a cycle)
        ("nshost.from_right", "found"),  # core.__all__.extend(right.__all__)
        ("nshost.legacy_helper", "found"),  # core.__all__.append(...)
        ("nshost.visible", "found"),  # plain has no __all__: its public names
        ("nshost.quick", "found"),  # try/except definition
        ("nshost._hidden", "absent"),  # private: a star import without __all__ skips it
        ("nshost.scratch", "absent"),  # bound, then ``del``
        ("nshost.fast.accelerate", "found"),  # declared by the stub beside the .py
        ("nshost.fast.anything", "unknown"),  # the extension module may have it
        ("nshost.plain.typed_only", "found"),  # declared in the nshost-stubs package
        ("nshost.lazy.Engine", "found"),  # the lazy map points at lazy/engine.py
        ("nshost.lazy.Reader", "found"),
        ("nshost.lazy.Nothing", "absent"),  # the map's catch-all raise
        ("nshost.nothing", "absent"),
    ],
)
def test_names_on_1_0(v1, name: str, expected: str):
    assert _status(v1.resolve(name)) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("nshost.helper", "found"),
        ("nshost.old_name", DEPRECATED),  # served from RENAMED after a warning
        ("nshost.legacy", REMOVED),  # GONE: raised under a test that picks the name
        ("nshost.legacy_helper", REMOVED),
        ("nshost.nothing", "absent"),  # the catch-all raise: absent, not removed
        ("nshost.lazy.Engine", "found"),
        ("nshost.lazy.Reader", "absent"),  # left the map
    ],
)
def test_names_on_2_0(v2, name: str, expected: str):
    assert _status(v2.resolve(name)) == expected


def test_served_names_carry_the_hosts_words(v2):
    old = v2.resolve("nshost.old_name")
    assert isinstance(old, Served) and "use `nshost.helper` instead" in old.message
    assert old.file == "nshost/__init__.py" and old.line > 0
    gone = v2.resolve("nshost.legacy")
    assert gone.message == "`nshost.legacy` was removed in nshost 2.0. Use `nshost.helper` instead."


def test_a_submodule_the_package_raises_for_is_imported_by_the_import_system(v2):
    """``from nshost.oldcompat.py3k import asstr`` imports the subpackage whatever the package's
    ``__getattr__`` says; ``nshost.oldcompat`` read off the package meets the raise."""
    path = "nshost.oldcompat.py3k.asstr"
    assert _status(v2.resolve(path, imported=4)) == "found"
    assert _status(v2.resolve(path, imported=2)) == "found"  # ``from nshost import oldcompat``
    assert _status(v2.resolve(path)) == REMOVED
    assert _status(v2.resolve(path, imported=1)) == REMOVED


def test_a_stub_gives_the_signature(v1):
    found = v1.resolve("nshost.fast.tune")
    assert isinstance(found, Found)
    sig = v1.signature(found)
    assert [(p.name, p.kind) for p in sig.params] == [
        ("level", "positional_or_keyword"),
        ("verbose", "keyword_only"),
    ]


def test_exports_are_read_from_every_statement_that_builds_them(v1):
    core = v1.exports("nshost.core")
    assert core is not None and core.complete
    assert core.names == {"helper", "from_left", "from_right", "legacy_helper"}
    assert v1.exports("nshost.plain") is None


def test_a_class_level_alias_has_the_methods_signature(v2):
    alias = v2.resolve("nshost.params.Box.opener")
    assert isinstance(alias, Found) and alias.kind == "function"
    assert [p.name for p in v2.signature(alias).params] == ["path", "mode"]
    # ``build = staticmethod(make)`` where make is a staticmethod already: the same callable
    assert isinstance(v2.resolve("nshost.params.Box.build"), Found)


def test_present_means_what_the_lazy_map_names(v1):
    got = v1.resolve("nshost.lazy.Engine")
    assert isinstance(got, Found) and got.path == "nshost.lazy.engine.Engine"
    assert PRESENT == "present"


# -- a client scanned against 2.0 ------------------------------------------------------------
_DRIFT = re.compile(r"#\s*drift(?:\s*->\s*(.+?))?\s*$")


def _markers() -> tuple[dict[tuple[str, int], str], set[tuple[str, int]]]:
    drift: dict[tuple[str, int], str] = {}
    ok: set[tuple[str, int]] = set()
    for path in sorted((CLIENT / "nsclient").rglob("*.py")):
        rel = path.relative_to(CLIENT).as_posix()
        for n, line in enumerate(path.read_text().splitlines(), start=1):
            m = _DRIFT.search(line)
            if m:
                drift[(rel, n)] = (m.group(1) or "").strip()
            elif re.search(r"#\s*ok\b", line):
                ok.add((rel, n))
    return drift, ok


@pytest.fixture(scope="module")
def forward() -> ScanResult:
    return scan(str(CLIENT), str(HOST / "2.0"), baseline=str(HOST / "1.0"), host="nshost")


def test_the_client_gets_exactly_its_drift_lines(forward: ScanResult):
    drift, ok = _markers()
    reported = {(f.file, f.line) for f in forward.findings}
    assert reported == set(drift), sorted(reported ^ set(drift))
    assert not reported & ok


def test_messages_name_the_replacement(forward: ScanResult):
    drift, _ = _markers()
    for where, text in drift.items():
        messages = [f.message for f in forward.findings if (f.file, f.line) == where]
        assert not text or any(text in m for m in messages), (where, text, messages)


def test_fixes_follow_the_hosts_evidence(forward: ScanResult):
    by_line = {(f.file.rsplit("/", 1)[-1], f.line): f for f in forward.findings}
    renamed = by_line[("names.py", 11)].fix  # the table names nshost.helper
    assert renamed.safety == "safe" and renamed.codemod == "rename-attribute"
    assert dict(renamed.params) == {"old": "old_name", "new": "helper"}
    limit = by_line[("params.py", 9)].fix  # "use `max_size` instead", both int | None
    assert limit.safety == "safe" and limit.codemod == "rename-keyword"
    flag = by_line[("params.py", 10)].fix  # "use `mode` instead", but bool -> str
    assert flag.safety == "unsafe" and "may differ" in flag.description
    # min_length sits where min_items sat, of one kind and default, but nothing of the host's
    # says it is min_items's new name: no rename
    placed = by_line[("params.py", 11)].fix
    assert placed.safety == "manual" and placed.codemod is None, placed
    # skip_cache sits where guide sat; the host's own from_request passes outputs instead
    migrated = by_line[("params.py", 30)]
    assert migrated.fix.safety == "unsafe" and ("new", "outputs") in migrated.fix.params
    assert "skip_cache" not in migrated.message and "from_request" in migrated.message
    assert "nshost/params.py:" in migrated.fix.description
    nearby = by_line[("params.py", 31)].fix  # best_of: no caller of the host's names it
    assert nearby.safety == "manual" and nearby.codemod is None, nearby
    assert by_line[("names.py", 19)].fix.safety == "manual"  # "It has no replacement."
    table = by_line[("names.py", 23)]  # removed; a same-named table left in nshost._tables
    assert table.rule == "missing-symbol" and table.fix.safety == "manual"
    assert "nshost._tables.legacy_table shares the name" in table.message


def test_scanning_against_the_baseline_itself_is_clean():
    for version in ("1.0", "2.0"):
        result = scan(str(CLIENT), str(HOST / version), baseline=str(HOST / version), host="nshost")
        assert result.findings == []


def test_undecided_names_are_counted(forward: ScanResult):
    assert forward.stats["undecided_names"] == 0
    assert forward.to_dict()["stats"]["undecided"] == []


def test_applied_fixes_rewrite_what_the_host_says(tmp_path: Path):
    import shutil

    from driftcheck.fixes.run import fix

    client = tmp_path / "nsclient"
    shutil.copytree(CLIENT, client)
    fix(
        str(client),
        str(HOST / "2.0"),
        baseline=str(HOST / "1.0"),
        host="nshost",
        apply=True,
        unsafe=True,
    )
    names = (client / "nsclient" / "names.py").read_text()
    assert "nshost.helper(3)" in names and "nshost.old_name" not in names.split("def guarded")[0]
    params = (client / "nsclient" / "params.py").read_text()
    assert 'configure("a", max_size=3)' in params
    assert 'write("x", terminator=";")  # drift' in params  # the 1.0 decorator mapped it
    assert "window([1], min_items=1)" in params  # no rename without the host's word
    assert 'sample("p", outputs=guide),  # drift' in params
    again = scan(str(client), str(HOST / "2.0"), baseline=str(HOST / "1.0"), host="nshost")
    assert {f.line for f in again.findings if f.file.endswith("params.py")} >= {18, 19}


def test_a_stub_distribution_decides_what_the_host_leaves_undecided():
    """``nshost-stubs`` as a separate distribution (PEP 561): asked only for names the
    host's own files leave undecided (the compiled ``_fast`` behind ``nshost.fast``)."""
    from driftcheck.host.load import pick_stub_version
    from driftcheck.sources.trees import DirectoryTree

    host = load_host(parse_spec(str(HOST / "2.0")))
    asked: list[int] = []

    def provider() -> DirectoryTree:
        asked.append(1)
        return DirectoryTree(FIXTURES / "stubs" / "nshost-stubs-2.0")

    host.stub_provider = provider
    assert isinstance(host.resolve("nshost.helper"), Found) and asked == []  # decided: not asked
    got = host.resolve("nshost.fast.calibrate")
    assert isinstance(got, Found) and [p.name for p in host.signature(got).params] == ["steps"]
    assert host.resolve("nshost.fast.nothing_declared") is UNKNOWN
    assert asked == [1]  # opened once
    assert pick_stub_version(["2.0.3.230814", "2.0.2.230605", "1.5.3.230321"], "2.0.3") == (
        "2.0.3.230814"
    )
    assert pick_stub_version(["2.1.0"], "2.0.3") is None
