"""What a host's namespace walk does with an attribute without an annotation
(host/class_namespace.py)."""

from __future__ import annotations

import ast
import textwrap

from driftcheck.host.class_namespace import _walks


def walks(source: str):
    tree = ast.parse(textwrap.dedent(source))
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))
    return _walks(fn, "m.py")


def test_every_branch_raising_rejects_with_the_last_message():
    got = walks("""
        def inspect(namespace, base_fields):
            annotations = namespace.get("__annotations__", {})
            for name, value in list(namespace.items()):
                if name.startswith("_"):
                    continue
                elif name not in annotations:
                    if name in base_fields:
                        raise TypeError("overridden")
                    else:
                        raise TypeError("A non-annotated attribute was detected")
    """)
    assert [(w.treatment, w.message, w.at, w.conditional) for w in got] == [
        ("rejects", "A non-annotated attribute was detected", 11, False)
    ]


def test_a_walk_that_infers_a_field_reads_and_one_raise_in_it_is_conditional():
    got = walks("""
        def new(namespace, fields):
            annotations = resolve(namespace.get("__annotations__", {}))
            for name, value in namespace.items():
                if valid(name) and name not in annotations:
                    fields[name] = infer(value)
                    if bad(value):
                        raise TypeError("the type differs")
    """)
    assert [(w.treatment, w.conditional) for w in got] == [("rejects", True)]


def test_the_test_of_the_name_alone_wins_over_a_joined_one():
    got = walks("""
        def inspect(namespace):
            raw = namespace.get("__annotations__", {})
            for name, value in list(namespace.items()):
                if name.startswith("_"):
                    if name not in raw or not classvar(raw[name]):
                        private(name)
                elif name not in raw:
                    raise TypeError("needs an annotation")
    """)
    assert [(w.treatment, w.message) for w in got] == [("rejects", "needs an annotation")]


def test_near_miss_a_walk_without_the_annotations_is_none():
    assert not walks("""
        def new(attrs):
            for name, value in attrs.items():
                if name not in KNOWN:
                    raise TypeError("unknown")
    """)


def test_names_the_walk_passes_over_are_kept():
    got = walks("""
        def inspect(namespace):
            raw = namespace.get("__annotations__", {})
            for name, value in list(namespace.items()):
                if name == "model_config":
                    continue
                elif name in ("Config", "Meta"):
                    continue
                elif name not in raw:
                    raise TypeError("needs an annotation")
    """)
    assert [w.skips for w in got] == [("Config", "Meta", "model_config")]
