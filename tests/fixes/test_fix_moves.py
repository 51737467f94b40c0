"""keyword-to-call: a keyword the host no longer takes moves into a call after the statement;
the no-op (declined) shapes first, then the rewrite."""

from __future__ import annotations

import pytest
from test_fixes import assert_valid_python, rewrite

from driftcheck.fixes.base import Decline

MOVE = {
    "keyword": "eos",
    "requires": "params",
    "call": "{result}.params.update({}, {value})",
}


@pytest.mark.parametrize(
    ("code", "why"),
    [
        ("submit(Req(params=p, eos=tok.eos))\n", "shape"),
        ("a = b = Req(params=p, eos=tok.eos)\n", "several names"),
        ("self.r = Req(params=p, eos=tok.eos)\n", "plain name"),
        ("r = Req(params=p, eos=tok.get_eos())\n", "expression"),
        ("r = Req(params=p, eos=ids[0])\n", "expression"),
        ("r = Req(params=None, eos=2)\n", "params"),
        ("r = Req(p, eos=2)\n", "params"),
    ],
)
def test_declines_where_the_value_cannot_move_unchanged(code: str, why: str):
    with pytest.raises(Decline, match=why):
        rewrite("keyword-to-call", code, "Req(", **MOVE)


def test_moves_the_value_after_the_statement_in_its_block():
    code = "def make(tok, p):\n    r = Req(\n        params=p,\n        eos=tok.eos,\n    )\n    return r\n"
    new = rewrite("keyword-to-call", code, "Req(", **MOVE)
    assert new == (
        "def make(tok, p):\n    r = Req(\n        params=p,\n    )\n"
        "    r.params.update({}, tok.eos)\n    return r\n"
    )
    assert_valid_python(new)


def test_an_annotated_binding_and_a_literal_value():
    new = rewrite("keyword-to-call", "r: Req = Req(params=p, eos=2)\n", "Req(", **MOVE)
    assert new == "r: Req = Req(params=p)\nr.params.update({}, 2)\n"
