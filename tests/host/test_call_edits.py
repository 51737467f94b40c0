"""The host's own calls read as a fix: arguments bound to a signature, a host value rewritten in
the callable's parameters (the whole edit, on two releases, is in call_signature's cases)."""

from __future__ import annotations

from driftcheck.host.call_edits import bound, in_terms_of_arguments
from driftcheck.host.callers import KeywordCall
from driftcheck.host.signature import Param, Signature


def _sig(*names: str, kwargs: bool = False) -> Signature:
    params = [Param(n, "positional_or_keyword", False) for n in names]
    if kwargs:
        params.append(Param("extra", "var_keyword", False))
    return Signature(params, None)


def _call(positional: tuple[str, ...] = (), **keywords: str) -> KeywordCall:
    return KeywordCall("m.py", 1, "f", tuple(keywords), tuple(keywords.values()), positional)


def test_positional_arguments_bind_to_their_release_s_parameters():
    assert bound(_call(("c", "g", "s")), _sig("config", "groups", "specs")) == {
        "config": "c",
        "groups": "g",
        "specs": "s",
    }


def test_a_call_that_does_not_bind_is_not_read():
    assert bound(_call(("a", "b")), _sig("config")) is None
    assert bound(_call(other="x"), _sig("config")) is None
    assert bound(_call(("a",), config="x"), _sig("config")) is None
    assert bound(_call(other="x"), _sig("config", kwargs=True)) == {"other": "x"}


def test_a_value_built_from_an_argument_is_written_in_that_parameter():
    args = {"vllm_config": "vllm_config", "block_size": "vllm_config.cache.size * 2"}
    got = in_terms_of_arguments(args["block_size"], args, "block_size")
    assert got == ("{arg:vllm_config}.cache.size * 2", True, ("vllm_config",))


def test_the_longest_argument_is_matched_whole():
    """``self.config`` passed as ``config``: ``self.config.x`` maps; a bare ``self.y`` does
    not (host state the client's arguments do not give)."""
    args = {"config": "self.config"}
    assert in_terms_of_arguments("self.config.x", args, "size") == (
        "{arg:config}.x",
        True,
        ("config",),
    )
    template, complete, uses = in_terms_of_arguments("self.config.x * self.y", args, "size")
    assert not complete and uses == ("config",)


def test_literals_and_builtins_need_no_argument():
    assert in_terms_of_arguments("False", {}, "flag") == ("False", True, ())
    assert in_terms_of_arguments("max(1, len(items))", {}, "n")[1] is False
    assert in_terms_of_arguments("max(1, len(c))", {"config": "c"}, "n") == (
        "max(1, len({arg:config}))",
        True,
        ("config",),
    )
