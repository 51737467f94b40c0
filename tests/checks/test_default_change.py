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


_HOST_1 = '''
from dataclasses import dataclass


@dataclass
class Params:
    """Sampling.

    Args:
        top_k: how many tokens to consider. Set to -1 to consider all.
        mode: 'fast' or 'slow'.
    """

    top_k: int = -1
    mode: str = "fast"
    width: int = 1
'''

_HOST_2 = '''
from dataclasses import dataclass


@dataclass
class Params:
    top_k: int = 0
    """How many tokens to consider. Set to 0 (or -1) to consider all."""
    mode: str = "slow"
    """'fast' or 'slow' (or 'auto')."""
    width: int = 2
    """Set to 2 (or more) for wide beams."""
'''


def test_a_default_the_target_documents_as_the_old_ones_alias_is_not_reported(tmp_path):
    """``Set to 0 (or -1)``: the target says its new default means what the old one meant. A
    list of choices (``'fast' or 'slow'``) or an alias of another value says nothing of the
    kind, and those changes are still reported."""
    from driftcheck.pipeline import scan

    for version, text in (("1.0", _HOST_1), ("2.0", _HOST_2)):
        pkg = tmp_path / version / "sampler"
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text(text)
    client = tmp_path / "client" / "uses_sampler"
    client.mkdir(parents=True)
    (client / "__init__.py").write_text("from sampler import Params\n\np = Params()\n")
    result = scan(
        str(client), str(tmp_path / "2.0"), baseline=str(tmp_path / "1.0"), host="sampler"
    )
    reported = sorted(f.symbol.rsplit("(", 1)[1] for f in result.findings)
    assert reported == ["mode=)", "width=)"]
