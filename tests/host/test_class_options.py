"""The option tables a host release reads an inner class's options from (host/class_options.py)."""

from __future__ import annotations

import ast
import textwrap

from driftcheck.host.class_options import _identifiers, _notes, _tables


def tables(source: str):
    return _tables(ast.parse(textwrap.dedent(source)), "opts.py", ["Meta"])


def test_a_table_iterated_then_a_raise_accepts_its_names_and_rejects_the_rest():
    got = tables("""
        NAMES = ("ordering", "db_table")

        def contribute(meta):
            attrs = dict(vars(meta))
            for name in NAMES:
                attrs.pop(name, None)
            if attrs:
                raise TypeError("'class Meta' got invalid attribute(s): %s" % ",".join(attrs))
    """)
    assert [(t.name, t.role, t.treatment, t.names, t.message, t.at) for t in got] == [
        (
            "NAMES", "accepts", "rejects", ("ordering", "db_table"),
            "'class Meta' got invalid attribute(s): %s", 9,
        )
    ]  # fmt: skip


def test_a_table_iterated_without_a_raise_accepts_and_ignores_the_rest():
    got = tables("""
        NAMES = ["ordering", "db_table"]

        def contribute(meta):
            for name in NAMES:
                getattr(meta, name, None)
    """)
    assert [(t.role, t.treatment) for t in got] == [("accepts", "reads")]


def test_a_dict_tested_in_a_function_that_warns_flags_its_names_with_their_replacements():
    got = tables("""
        import warnings

        RENAMED = {"orm_mode": "from_attributes", "validate_all": "validate_default"}

        def check(config):
            renamed = RENAMED.keys() & config.keys()
            if renamed:
                message = "\\n".join(["Valid config keys have changed:"] + [f"* {k}" for k in renamed])
                warnings.warn(message, UserWarning)
    """)
    assert [(t.role, t.treatment, t.message, dict(t.renames)) for t in got] == [
        (
            "flags", "warns", "Valid config keys have changed:",
            {"orm_mode": "from_attributes", "validate_all": "validate_default"},
        )
    ]  # fmt: skip


def test_near_miss_a_table_no_function_warns_about_or_iterates_is_no_option_table():
    assert not tables("""
        NAMES = {"a", "b"}

        def f(x):
            return x in NAMES
    """)


def test_near_miss_collections_of_other_strings_are_not_tables():
    assert _identifiers(ast.parse('("a.b", "c")', mode="eval").body) is None
    assert _identifiers(ast.parse('("only",)', mode="eval").body) is None
    assert _identifiers(ast.parse('frozenset({"a", "b"})', mode="eval").body) == (["a", "b"], [])


def test_an_accepted_option_tested_as_an_attribute_with_a_warning_is_noted():
    tree = ast.parse(
        textwrap.dedent("""
        import warnings

        class Options:
            def contribute(self):
                if self.index_together:
                    warnings.warn("'index_together' is deprecated.", DeprecationWarning)
                if self.ordering:
                    self.sort()
    """)
    )
    got = _notes(tree, "opts.py", ["Meta"], {"index_together", "ordering"})
    assert [(n.option, n.treatment, n.message) for n in got] == [
        ("index_together", "warns", "'index_together' is deprecated.")
    ]


def test_near_miss_a_raise_for_the_names_outside_a_tested_table_does_not_flag_its_names():
    assert not tables("""
        MEDIA_TYPES = ("css", "js")
        ALL = {"values", "field", "config"}

        def get(self, name):
            if name in MEDIA_TYPES:
                return name
            raise KeyError("Unknown media type")

        def check(args):
            if not set(args).issubset(ALL):
                raise TypeError("Invalid signature")
    """)


def test_near_miss_a_test_of_an_options_value_is_no_note_about_the_option():
    tree = ast.parse(
        textwrap.dedent("""
        class Options:
            def get_field(self):
                if not self.apps.models_ready:
                    raise LookupError("the app cache isn't ready yet")
    """)
    )
    assert _notes(tree, "opts.py", ["Meta"], {"apps"}) == []


def test_the_files_a_module_imports_are_read_from_its_text():
    from driftcheck.host.class_options import _imported_files

    texts = {
        "pkg/db/base.py": "",
        "pkg/db/options.py": "",
        "pkg/utils.py": "",
        "pkg/db/fields/__init__.py": "",
        "pkg/other.py": "",
    }
    text = textwrap.dedent("""
        import os
        from pkg.db.options import Options
        from .. import utils as u
        from . import (
            fields,  # the package
        )
        # from pkg import other  (a comment, not an import)
    """)
    got = _imported_files(text, "pkg/db/base.py", texts)
    assert got == ["pkg/db/options.py", "pkg/utils.py", "pkg/db/fields/__init__.py"]
