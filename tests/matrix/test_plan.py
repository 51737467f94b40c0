"""``--releases``: versions, ``latest`` and ranges, resolved on the (planted) index listing."""

from __future__ import annotations

import pytest
from planted import Matrix, matrix_fixture  # noqa: F401  (the fixture)

from driftcheck.errors import UsageError
from driftcheck.matrix.plan import resolve_releases


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        (["3.0", "1.0"], ["1.0", "3.0"]),
        (["latest", "3.0"], ["3.0"]),  # one release, named twice
        (["1.0..latest"], ["1.0", "2.0", "3.0"]),
        (["2.0..3.0", "1.0"], ["1.0", "2.0", "3.0"]),
        (["1.0..2.0"], ["1.0", "2.0"]),
    ],
)
def test_versions_latest_and_ranges(matrix: Matrix, items, expected):
    assert resolve_releases("tinyhost", items) == expected


@pytest.mark.parametrize("item", ["newest", "latest..3.0", "1.0..", "..2.0", "1.0..soon"])
def test_an_item_that_is_no_release_is_refused_before_the_index_is_asked(item, monkeypatch):
    from driftcheck.sources import versions

    def listing(*_a, **_k):
        raise AssertionError("the index was asked")

    monkeypatch.setattr(versions, "available_versions", listing)
    with pytest.raises(UsageError, match="--releases: .* is not a version"):
        resolve_releases("tinyhost", ["latest", item])
