"""Receiver types on a real host (issue 31, item 5): pandas' accessor namespaces are read from
its source. ``Series.str`` is ``CachedAccessor("str", StringMethods)`` whose ``__get__`` builds
``self._accessor(obj)`` (1.5.3 pandas/core/series.py:6220, pandas/core/accessor.py:176-182);
``Series.dt``'s class has a ``__new__`` that builds another class, so it stays unknown."""

from __future__ import annotations

from pathlib import Path

import pytest

from driftcheck.pipeline import scan

pytestmark = [pytest.mark.network, pytest.mark.slow]

CLIENT = """import pandas as pd


def parts(s: pd.Series):
    return s.str.split(",", 1)


def years(s: pd.Series):
    return s.dt.year
"""


def test_a_method_of_an_accessor_namespace_is_checked(tmp_path: Path):
    pkg = tmp_path / "pdclient"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "m.py").write_text(CLIENT)
    result = scan(str(pkg), "pandas==2.0.3", baseline="1.5.3")
    got = [(f.rule, f.line, f.symbol) for f in result.findings if f.severity == "error"]
    # 1.5.3 split(pat=None, n=-1, ...) under deprecate_nonkeyword_arguments; 2.0.3 split(pat=None,
    # *, n=-1, ...) (pandas/core/strings/accessor.py:850-855 and :880-884): TypeError.
    assert got == [("positional-shift", 5, "pandas.core.strings.accessor.StringMethods.split")]
