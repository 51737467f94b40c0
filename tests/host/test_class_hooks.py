"""What a host release does with the hook names it looks up by string (host/class_hooks.py)."""

from __future__ import annotations

import ast
import textwrap

from conftest import host_api_of

from driftcheck.host.class_hooks import Treat, _treats, class_hooks, is_host_hook


def treats(source: str, constants: dict[str, str] | None = None) -> list[Treat]:
    return _treats(ast.parse(textwrap.dedent(source)), "m.py", constants or {})


def test_python_names_are_not_host_hooks():
    assert not is_host_hook("__call__")
    assert not is_host_hook("__slots__")
    assert not is_host_hook("__init_subclass__")
    assert is_host_hook("__get_validators__")
    assert not is_host_hook("__x")


def test_a_plain_lookup_reads():
    got = treats("""
        def f(tp):
            return getattr(tp, "__get_validators__", None)
    """)
    assert [(t.name, t.treatment) for t in got] == [("__get_validators__", "reads")]


def test_a_raise_in_the_if_that_tests_the_name_rejects():
    got = treats("""
        def f(ns):
            if "__root__" in ns:
                raise TypeError("use RootModel")
    """)
    assert [(t.name, t.treatment, t.message, t.line, t.conditional) for t in got] == [
        ("__root__", "rejects", "use RootModel", 4, False)
    ]


def test_a_raise_under_a_further_condition_is_conditional():
    got = treats("""
        def f(tp, other):
            if hasattr(tp, "__modify_schema__"):
                if other is None:
                    raise TypeError(f"not supported in {tp}")
    """)
    assert [(t.treatment, t.message, t.conditional) for t in got] == [
        ("rejects", "not supported in {tp}", True)
    ]


def test_a_warning_after_the_lookup_in_the_same_block_warns():
    got = treats("""
        from warnings import warn
        def f(tp):
            v = getattr(tp, "__get_validators__", None)
            if v is None:
                return None
            warn("deprecated", DeprecationWarning)
    """)
    assert ("__get_validators__", "warns", "deprecated") in [
        (t.name, t.treatment, t.message) for t in got
    ]


def test_a_raise_in_an_unrelated_branch_after_the_lookup_is_not_the_names():
    got = treats("""
        def f(tp, x):
            v = getattr(tp, "__get_validators__", None)
            if x:
                raise ValueError("x")
            return v
    """)
    assert [t.treatment for t in got] == ["reads"]


def test_a_module_constant_stands_for_its_name():
    got = treats(
        """
        def f(fields):
            return ROOT_KEY in fields
        """,
        {"ROOT_KEY": "__root__"},
    )
    assert [(t.name, t.treatment) for t in got] == [("__root__", "reads")]


def test_a_lookup_under_an_if_on_another_hook_is_taken_only_without_it():
    got = treats("""
        def f(tp):
            new = getattr(tp, "__get_core_schema__", None)
            if new is None:
                old = getattr(tp, "__get_validators__", None)
                return old
    """)
    under = {t.name: t.under for t in got}
    assert under == {"__get_core_schema__": (), "__get_validators__": ("__get_core_schema__",)}


HOST = {
    "pkg/__init__.py": "",
    "pkg/keys.py": 'ROOT_KEY = "__root__"\n',
    "pkg/model.py": (
        "from pkg.keys import ROOT_KEY\n\n\n"
        "def build(ns, tp):\n"
        "    if ROOT_KEY in ns:\n"
        "        raise TypeError('use a root model')\n"
        "    else:\n"
        "        if getattr(tp, '__get_validators__', None) is None:\n"
        "            return None\n"
    ),
    "pkg/schema.py": (
        "def schema(tp):\n"
        '    if hasattr(tp, "__modify_schema__"):\n'
        "        warn('__modify_schema__ is deprecated')\n"
    ),
    "pkg/plain.py": "def f(x):\n    return x.__dict__\n",
}


def _rows(got: dict[str, list[Treat]]) -> dict[str, list[tuple]]:
    return {n: [(t.treatment, t.file, t.line, t.under) for t in ts] for n, ts in got.items()}


def test_hooks_are_read_per_name_asked(tmp_path, monkeypatch):
    import driftcheck.host.class_hooks as hooks

    parsed: list[int] = []
    real = ast.parse
    monkeypatch.setattr(hooks.ast, "parse", lambda text, *a, **k: parsed.append(1) or real(text))
    api = host_api_of(tmp_path, HOST)
    got = _rows(class_hooks(api, ["__root__", "__get_validators__", "__never__", "__call__"]))
    assert got == {
        "__root__": [("rejects", "pkg/model.py", 6, ())],
        "__get_validators__": [("reads", "pkg/model.py", 8, ("__root__",))],
        "__never__": [],
        "__call__": [],  # Python's own: never a host's hook
    }
    assert len(parsed) == 2  # keys.py and model.py: schema.py and plain.py spell none of them
    # Asked one at a time on another release object, each name has the same rows.
    alone = host_api_of(tmp_path / "again", HOST)
    for name, rows in got.items():
        assert _rows(class_hooks(alone, [name]))[name] == rows
    assert _rows(class_hooks(alone, ["__modify_schema__"])) == {
        "__modify_schema__": [("warns", "pkg/schema.py", 3, ())]
    }
