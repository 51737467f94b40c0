"""A file that does not name the host is parsed when it imports a module-level name another
module binds to a host instance: by name (``from app.state import ENGINE``) or read off its
module (``state.ENGINE``, the module's last part as a whole word)."""

from __future__ import annotations

import pytest

from driftcheck.collect import _names_it

MODULES = frozenset({"state", "app_state"})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("from app.state import ENGINE\n", True),
        ("from app.state import (\n    OTHER,\n    ENGINE,\n)\n", True),
        ("x = state.ENGINE.step()\n", True),
        ("x = app_state.ENGINE\n", True),
        ("x = (state).ENGINE\n", False),  # not a module's name before the dot
        ("x = mystate.ENGINE\n", False),  # ``state`` not a whole word
        ("x = my_state.ENGINE\n", False),
        ("x = state.ENGINES\n", False),
        ("x = other.ENGINE\n", False),
        ("x = y.state.ENGINE\n", True),
        ("ENGINE = 1\n", False),
        ("x = é.state.ENGINE\n", True),
        ("x = éstate.ENGINE\n", False),  # a word character before it
    ],
)
def test_a_name_is_imported_or_read_off_one_of_the_modules(text: str, expected: bool):
    assert _names_it(text, "ENGINE", MODULES) is expected


def test_a_module_name_that_is_no_word_is_looked_for_as_written():
    assert _names_it("x = my-mod.ENGINE\n", "ENGINE", frozenset({"my-mod"}))
    assert not _names_it("x = amy-mod.ENGINE\n", "ENGINE", frozenset({"y-mod"}))
