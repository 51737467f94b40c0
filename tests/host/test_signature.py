"""Unit tests of driftcheck.host.signature: binding call shapes, return shapes, dataclass fields."""

from __future__ import annotations

import ast
from pathlib import Path

import griffe
import pytest

from driftcheck.host.annotations import return_change
from driftcheck.host.signature import (
    BindProblem,
    CallShape,
    Signature,
    bind,
    dataclass_fields,
    signature_of_function,
)


def sig(params: str, returns: str = "None") -> Signature:
    """The signature of ``def f(<params>) -> <returns>``, read the way the host API reads it."""
    module = griffe.visit("m", filepath=Path("m.py"), code=f"def f({params}) -> {returns}: ...\n")
    return signature_of_function(module["f"], bound=False)


def problems(*pairs: tuple[str, str]) -> list[BindProblem]:
    return [BindProblem(code, param) for code, param in pairs]


MISSING, UNEXPECTED, TOO_MANY = "missing-required", "unexpected-keyword", "too-many-positional"

# -- bind ----------------------------------------------------------------------------------------

BIND_CASES = [
    # (id, parameters, call shape, expected problems)
    ("exact-positional", "a, b", CallShape(2, ()), []),
    ("by-keyword", "a, b", CallShape(0, ("b", "a")), []),
    ("default-not-passed", "a, b=1", CallShape(1, ()), []),
    ("missing-required", "a, b", CallShape(1, ()), problems((MISSING, "b"))),
    ("missing-keyword-only", "a, *, key", CallShape(1, ()), problems((MISSING, "key"))),
    ("too-many", "a, b=1", CallShape(3, ()), problems((TOO_MANY, "3"))),
    ("no-positional-for-keyword-only", "*, key", CallShape(1, ("key",)), problems((TOO_MANY, "1"))),
    ("var-positional-absorbs", "a, *args", CallShape(5, ()), []),
    ("unexpected-keyword", "a", CallShape(1, ("x",)), problems((UNEXPECTED, "x"))),
    ("var-keyword-absorbs", "a, **kw", CallShape(1, ("x", "y")), []),
    (
        "positional-only-by-keyword",
        "a, /",
        CallShape(0, ("a",)),
        problems((UNEXPECTED, "a"), (MISSING, "a")),
    ),
    ("positional-only-name-into-kwargs", "a, /, **kw", CallShape(1, ("a",)), []),
    # Star arguments at the call site: only what is certain is reported.
    ("star-may-fill-required", "a, b, c", CallShape(1, (), star=True), []),
    ("star-never-too-many", "a", CallShape(4, (), star=True), []),
    ("double-star-may-fill-required", "a, b", CallShape(0, (), double_star=True), []),
    (
        "double-star-unknown-keyword-still-certain",
        "a",
        CallShape(1, ("x",), double_star=True),
        problems((UNEXPECTED, "x")),
    ),
    ("empty-signature", "", CallShape(0, ()), []),
    ("empty-signature-given-one", "", CallShape(1, ()), problems((TOO_MANY, "1"))),
]


@pytest.mark.parametrize(
    ("params", "call", "expected"),
    [case[1:] for case in BIND_CASES],
    ids=[case[0] for case in BIND_CASES],
)
def test_bind(params: str, call: CallShape, expected: list[BindProblem]):
    assert bind(sig(params), call) == expected


def test_bind_problem_details_name_the_parameter():
    [missing] = bind(sig("a, mode"), CallShape(1, ()))
    assert "'mode'" in missing.detail
    [extra] = bind(sig("a"), CallShape(1, ("retries",)))
    assert "'retries'" in extra.detail
    [many] = bind(sig("a, b"), CallShape(3, ()))
    assert "2 positional" in many.detail and "3" in many.detail


def test_bind_reports_a_parameter_given_twice():
    assert bind(sig("a, b=1"), CallShape(1, ("a",))) != []


# -- signature_of_function ------------------------------------------------------------------------

METHODS = """
class C:
    def method(self, a, b=1) -> int: ...
    @classmethod
    def make(cls, a) -> "C": ...
    @staticmethod
    def helper(a, b): ...
"""


@pytest.mark.parametrize(
    ("name", "names"),
    [("method", ["a", "b"]), ("make", ["a"]), ("helper", ["a", "b"])],
)
def test_bound_methods_drop_their_first_parameter(name: str, names: list[str]):
    module = griffe.visit("m", filepath=Path("m.py"), code=METHODS)
    func = module["C"][name]
    bound = "staticmethod" not in func.labels
    got = signature_of_function(func, bound=bound)
    assert [p.name for p in got.params] == names


def test_signature_of_function_reads_kinds_defaults_and_return():
    got = sig("a, /, b, c=3, *args, d, e=None, **kw", returns="list[int] | None")
    assert [(p.name, p.kind, p.required) for p in got.params] == [
        ("a", "positional_only", True),
        ("b", "positional_or_keyword", True),
        ("c", "positional_or_keyword", False),
        ("args", "var_positional", False),
        ("d", "keyword_only", True),
        ("e", "keyword_only", False),
        ("kw", "var_keyword", False),
    ]
    assert got.param("c").default == "3"
    assert got.accepts_var_positional and got.accepts_var_keyword
    assert got.returns == "list[int] | None"
    assert got.line == 1


# -- return_change --------------------------------------------------------------------------------

RETURN_CASES = [
    # (baseline annotation, target annotation, expected change)
    ("Item", "Item | None", "gained-none"),
    ("Item", "Optional[Item]", "gained-none"),
    ("Item", "typing.Optional[Item]", "gained-none"),
    ("Item", "None | Item", "gained-none"),
    ("Item", "'Item | None'", "gained-none"),
    ("list[Item]", "list[Item] | None", "gained-none"),
    ("list[Item]", "Item | None", "gained-none"),
    ("int", "None", "became-none"),
    ("Item | None", "None", "became-none"),
    ("list[Item]", "Item", "container-to-item"),
    ("List[Item]", "Item", "container-to-item"),
    ("typing.Sequence[Item]", "Item", "container-to-item"),
    ("list[Item | str]", "str", "container-to-item"),
    ("Item", "list[Item]", "item-to-container"),
    ("Item", "tuple[Item]", "item-to-container"),
    # compatible or unknown: no claim
    ("Item", "Item", None),
    ("Item | None", "Item", None),
    ("Optional[Item]", "Item | None", None),
    ("Item | None", "None | Item", None),
    ("None", "Item", None),
    ("None", "None", None),
    ("Item", "Any", None),
    ("Item", "object", None),
    ("Item", "Other", None),
    ("list[Item]", "list[Other]", None),
    ("dict[str, int]", "dict[str, int | None]", None),
    ("list[Item]", "Other", None),
    (None, "Item | None", None),
    ("Item", None, None),
]


@pytest.mark.parametrize(("baseline", "target", "expected"), RETURN_CASES)
def test_return_change(baseline: str | None, target: str | None, expected: str | None):
    assert return_change(baseline, target) == expected


@pytest.mark.parametrize(
    ("baseline", "target", "expected"),
    [
        pytest.param(
            "Item",
            "Union[Item, None]",
            "gained-none",
            id="union-none",
        ),
        pytest.param(
            "Item",
            "typing.Union[Item, None]",
            "gained-none",
            id="typing-union-none",
        ),
        pytest.param(
            "Optional[list[Item]]",
            "Optional[Item]",
            "container-to-item",
            id="optional-container-to-item",
        ),
    ],
)
def test_return_change_union_and_optional_forms(baseline: str, target: str, expected: str):
    assert return_change(baseline, target) == expected


# -- dataclass_fields -----------------------------------------------------------------------------


def fields(body: str, *, kw_only: bool = False) -> list[tuple[str, str, bool, bool]]:
    """(name, kind, has_default, init_var) of each field of ``class C: <body>``."""
    code = "class C:\n" + "".join(f"    {line}\n" for line in body.strip().splitlines())
    node = ast.parse(code).body[0]
    assert isinstance(node, ast.ClassDef)
    kinds = {"positional_or_keyword": "pos", "keyword_only": "kw"}
    return [
        (p.name, kinds[p.kind], p.has_default, p.init_var)
        for p in dataclass_fields(node, kw_only=kw_only)
    ]


FIELD_CASES = [
    # (id, class body, kw_only=True on the decorator, expected (name, kind, has_default, init_var))
    ("plain", "a: int\nb: str = 'x'", False, [("a", "pos", False, False), ("b", "pos", True, False)]),
    ("not-a-field", "x = 1\ndef method(self): ...\n'doc'", False, []),
    ("classvar", "a: ClassVar[int] = 1\nb: typing.ClassVar[int] = 2\nc: int", False, [("c", "pos", False, False)]),
    ("init-var", "a: InitVar[int]", False, [("a", "pos", False, True)]),
    ("init-var-default", "a: dataclasses.InitVar[bool] = True", False, [("a", "pos", True, True)]),
    ("default-factory", "a: list = field(default_factory=list)", False, [("a", "pos", True, False)]),
    ("field-default", "a: int = dataclasses.field(default=3)", False, [("a", "pos", True, False)]),
    ("field-without-default", "a: int = field(repr=False)", False, [("a", "pos", False, False)]),
    ("init-false", "a: int = field(init=False, default=0)\nb: int", False, [("b", "pos", False, False)]),
    ("kw-only-marker", "a: int\n_: KW_ONLY\nb: int = 1", False, [("a", "pos", False, False), ("b", "kw", True, False)]),
    ("kw-only-field", "a: int = field(kw_only=True)\nb: int", False, [("a", "kw", False, False), ("b", "pos", False, False)]),
    ("kw-only-class", "a: int\nb: int = field(kw_only=False)", True, [("a", "kw", False, False), ("b", "pos", False, False)]),
    ("pydantic-default", "a: int = Field(default=3)", False, [("a", "pos", True, False)]),
    ("pydantic-factory", "a: list = Field(default_factory=list)", False, [("a", "pos", True, False)]),
    ("pydantic-positional-default", "a: int = Field(3)", False, [("a", "pos", True, False)]),
    ("pydantic-ellipsis", "a: int = Field(default=...)", False, [("a", "pos", False, False)]),
    ("pydantic-no-default", "a: int = Field(description='x')", False, [("a", "pos", False, False)]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("body", "kw_only", "expected"),
    [case[1:] for case in FIELD_CASES],
    ids=[case[0] for case in FIELD_CASES],
)
def test_dataclass_fields(body: str, kw_only: bool, expected: list):
    assert fields(body, kw_only=kw_only) == expected


def test_dataclass_fields_keep_defaults_and_annotations():
    [a, b] = dataclass_fields(ast.parse("class C:\n    a: int = 3\n    b: InitVar[int]\n").body[0])
    assert (a.default, a.annotation) == ("3", "int")
    assert (b.default, b.annotation, b.required) == (None, "InitVar[int]", True)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(
            "a: int = Field(...)",
            [("a", "pos", False, False)],
            id="pydantic-positional-ellipsis",
        ),
        pytest.param(
            "a: 'ClassVar[int]' = 1\nb: int",
            [("b", "pos", False, False)],
            id="quoted-classvar",
        ),
    ],
)
def test_dataclass_fields_pydantic_and_quoted_forms(body: str, expected: list):
    assert fields(body) == expected
