"""What the default-change check counts as a flag (its severity rests on it)."""

from __future__ import annotations

import pytest

from driftcheck.checks.default_change import _is_flag
from driftcheck.host.signature import Param


def _p(annotation: str | None) -> Param:
    return Param("x", "positional_or_keyword", True, "None", annotation)


@pytest.mark.parametrize(
    ("old", "new", "flag"),
    [
        ("bool", "bool", True),
        ("Optional[bool]", "bool | None", True),
        ("SkipValidation[bool] | None", "bool", True),  # a wrapper of one type
        (None, "bool", True),  # one side unannotated
        ("list[bool]", "list[bool]", False),  # a container of flags is no flag
        ("int | None", "int", False),
        ("bool", "str", False),
        (None, None, False),
    ],
)
def test_a_flag_is_bool_and_none_inside_wrappers(old: str | None, new: str | None, flag: bool):
    assert _is_flag(_p(old), _p(new)) is flag
