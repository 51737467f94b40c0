"""The codemods, ``fix_code``, the patch format and the patch snapshots of our own fixtures.

Each codemod has two tables, django-upgrade style: first the code it must leave alone (it raises
``Decline`` with a reason), then the rewrites, as exact text before and after. ``at`` names the
text the finding points at (its first character is the finding's line and column, as the scan
reports them). Every rewrite must parse and compile.

Known bugs are written as the behaviour we want and marked ``xfail(strict=True)``: when one is
fixed, its test passes and the strict marker makes the run fail until the marker is removed.

Patch snapshots live in ``tests/snapshots/<client>__<file>.patch``. ``DRIFTCHECK_UPDATE_SNAPSHOTS=1``
(re)writes them from the current output; review the diff of that folder like code. The snapshots of
``KNOWN_WRONG`` files hold the reviewed, correct patch, not the current output, and are not
overwritten.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import libcst as cst
import pytest
from conftest import need_tool

from driftcheck.findings import Finding, Fix
from driftcheck.fixes.base import Decline
from driftcheck.fixes.codemods import CODEMODS
from driftcheck.fixes.patches import FileFix, FixPlan, fix_code, plan, unified_diff, write_patches
from driftcheck.pipeline import ScanResult, scan
from driftcheck.rules import Rule, RuleSet, load_rules, rule_problems

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"

# -- helpers ----------------------------------------------------------------------------------


def position(code: str, at: str) -> tuple[int, int]:
    """Line and 1-based column of the first occurrence of ``at`` (``at`` must be unique)."""
    assert code.count(at) == 1, f"{at!r} must occur once in the code"
    before = code[: code.index(at)]
    line = before.count("\n") + 1
    return line, len(before) - (before.rfind("\n") + 1) + 1


def finding(
    codemod: str,
    line: int,
    column: int,
    *,
    safety: str = "safe",
    file: str = "pkg/mod.py",
    **fix_params: str,
) -> Finding:
    """A finding whose fix runs ``codemod`` with ``fix_params`` at ``line``:``column``."""
    return Finding(
        rule=f"test-{codemod}",
        kind="call-signature",
        severity="error",
        file=file,
        line=line,
        column=column,
        symbol="host.symbol",
        message="drift",
        fix=Fix(safety, f"apply {codemod}", codemod, tuple(sorted(fix_params.items()))),
    )


def finding_at(codemod: str, code: str, at: str, **fix_params: str) -> Finding:
    return finding(codemod, *position(code, at), **fix_params)


def rewrite(codemod: str, code: str, at: str, **fix_params: str) -> str:
    return CODEMODS[codemod](code, [finding_at(codemod, code, at, **fix_params)])


def assert_valid_python(code: str) -> None:
    """libcst parses it and CPython compiles it (duplicate keywords and the like fail here)."""
    cst.parse_module(code)
    compile(code, "<fixed>", "exec")


def params(*args):
    """pytest.param rows with an id from the first element."""
    return [pytest.param(*row[1:], id=row[0]) for row in args]


# -- follow-up-call ----------------------------------------------------------------------------

FOLLOW = {"method": "sample_tokens", "args": "None"}

FOLLOW_UP_DECLINED = params(
    (
        "elif-test",
        "def g(ex, s):\n    if s:\n        pass\n    elif ex.execute_model(s):\n        pass\n",
        "ex.execute_model",
    ),
    (
        "nested-in-expression",
        "def g(ex, s):\n    x = 1 + ex.execute_model(s)\n",
        "ex.execute_model",
    ),
    ("passed-on", "def g(ex, s):\n    use(ex.execute_model(s))\n", "ex.execute_model"),
    ("no-receiver", "def g(execute_model, s):\n    execute_model(s)\n", "execute_model(s)"),
    ("while-test", "def g(ex, s):\n    while ex.execute_model(s):\n        pass\n", "ex."),
    ("one-line-suite", "def g(ex, s):\n    if s: ex.execute_model(s)\n", "ex."),
    ("two-statements-one-line", "def g(ex, s):\n    x = ex.execute_model(s); y = 2\n", "ex."),
    ("awaited", "async def g(ex, s):\n    x = await ex.execute_model(s)\n", "ex."),
    ("augmented-assignment", "def g(ex, s):\n    x += ex.execute_model(s)\n", "ex."),
    ("finding-not-at-the-call", "def g(ex, s):\n    ex.execute_model(s)\n", "(s)"),
)

FOLLOW_UP_REWRITES = params(
    (
        "bare-call",
        "def g(ex, s):\n    ex.execute_model(s)\n    return 1\n",
        "ex.",
        "def g(ex, s):\n    ex.execute_model(s)\n    ex.sample_tokens(None)\n    return 1\n",
    ),
    (
        "assignment",
        "def g(ex, s):\n    # run\n    out = ex.execute_model(s)\n    return out\n",
        "ex.",
        "def g(ex, s):\n    # run\n    ex.execute_model(s)\n    out = ex.sample_tokens(None)\n"
        "    return out\n",
    ),
    (
        "annotated-assignment",
        "def g(ex, s):\n    out: int = ex.execute_model(s)\n",
        "ex.",
        "def g(ex, s):\n    ex.execute_model(s)\n    out: int = ex.sample_tokens(None)\n",
    ),
    (
        "return",
        "def g(ex, s):\n    return ex.execute_model(s)\n",
        "ex.",
        "def g(ex, s):\n    ex.execute_model(s)\n    return ex.sample_tokens(None)\n",
    ),
    (
        "if-test",
        "def g(ex, s):\n    if ex.execute_model(s):\n        pass\n",
        "ex.",
        "def g(ex, s):\n    ex.execute_model(s)\n    if ex.sample_tokens(None):\n        pass\n",
    ),
    (
        "self-attribute-receiver-in-a-loop",
        "class G:\n    def go(self, outs):\n        for o in outs:\n"
        "            self.executor.execute_model(o)\n",
        "self.executor",
        "class G:\n    def go(self, outs):\n        for o in outs:\n"
        "            self.executor.execute_model(o)\n            self.executor.sample_tokens(None)\n",
    ),
)


@pytest.mark.parametrize(("before", "at"), FOLLOW_UP_DECLINED)
def test_follow_up_call_declines(before: str, at: str):
    with pytest.raises(Decline):
        rewrite("follow-up-call", before, at, **FOLLOW)


@pytest.mark.parametrize(("before", "at", "after"), FOLLOW_UP_REWRITES)
def test_follow_up_call(before: str, at: str, after: str):
    got = rewrite("follow-up-call", before, at, **FOLLOW)
    assert got == after
    assert_valid_python(got)


def test_follow_up_call_without_arguments():
    code = "def g(ex, s):\n    ex.run(s)\n"
    got = rewrite("follow-up-call", code, "ex.", method="finish", args="")
    assert got == "def g(ex, s):\n    ex.run(s)\n    ex.finish()\n"


def test_follow_up_call_declines_a_receiver_with_side_effects():
    with pytest.raises(Decline):
        rewrite("follow-up-call", "def g(s):\n    get_ex().execute_model(s)\n", "get_ex", **FOLLOW)


def test_follow_up_call_keeps_a_bare_calls_comment_on_its_line():
    code = "def g(ex, s):\n    ex.execute_model(s)  # step\n"
    got = rewrite("follow-up-call", code, "ex.", **FOLLOW)
    assert got == "def g(ex, s):\n    ex.execute_model(s)  # step\n    ex.sample_tokens(None)\n"


# -- rename-import -----------------------------------------------------------------------------

MOVE = {"old": "pkg.core.helper", "new": "pkg.utils.helper"}

RENAME_IMPORT_DECLINED = params(
    ("star-import", "from pkg.core import *\n", "*"),
    ("plain-import", "import pkg.core\n", "pkg.core"),
    ("another-name", "from pkg.core import other\n", "other"),
    ("finding-not-at-an-import", "from pkg.core import helper\n\nhelper(1)\n", "helper(1)"),
)

RENAME_IMPORT_REWRITES = params(
    (
        "single-name",
        "from pkg.core import helper\n\nhelper(1)\n",
        "helper\n\n",
        "from pkg.utils import helper\n\nhelper(1)\n",
    ),
    (
        "alias-kept",
        "from pkg.core import helper as h\n\nh(1)\n",
        "helper as",
        "from pkg.utils import helper as h\n\nh(1)\n",
    ),
    (
        "one-of-two-on-a-line",
        "from pkg.core import other, helper\n\nhelper(other)\n",
        "helper\n",
        "from pkg.core import other\nfrom pkg.utils import helper\n\nhelper(other)\n",
    ),
)


@pytest.mark.parametrize(("before", "at"), RENAME_IMPORT_DECLINED)
def test_rename_import_declines(before: str, at: str):
    with pytest.raises(Decline):
        rewrite("rename-import", before, at, **MOVE)


@pytest.mark.parametrize(("before", "at", "after"), RENAME_IMPORT_REWRITES)
def test_rename_import(before: str, at: str, after: str):
    got = rewrite("rename-import", before, at, **MOVE)
    assert got == after
    assert_valid_python(got)


def test_rename_import_to_a_new_name_keeps_the_local_name():
    got = rewrite(
        "rename-import",
        "from pkg.core import helper\n\nhelper(1)\n",
        "helper\n",
        old="pkg.core.helper",
        new="pkg.utils.new_helper",
    )
    assert got == "from pkg.utils import new_helper as helper\n\nhelper(1)\n"


MULTI_LINE_IMPORT = """\
from pkg.core import (
    other,
    helper,
    third,
)

helper(other, third)
"""


def _imported(code: str) -> set[tuple[str, str, str | None]]:
    """(module, name, alias) of every from-import, wherever it is."""
    out = set()
    for node in cst.parse_module(code).body:
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                if isinstance(small, cst.ImportFrom) and not isinstance(
                    small.names, cst.ImportStar
                ):
                    module = cst.Module(body=[]).code_for_node(small.module)
                    for alias in small.names:
                        asname = alias.asname.name.value if alias.asname else None
                        out.add((module, alias.name.value, asname))
    return out


def test_rename_import_one_of_several_in_a_parenthesized_import():
    got = rewrite("rename-import", MULTI_LINE_IMPORT, "helper,", **MOVE)
    assert_valid_python(got)
    assert _imported(got) == {
        ("pkg.core", "other", None),
        ("pkg.core", "third", None),
        ("pkg.utils", "helper", None),
    }
    assert got.endswith("\nhelper(other, third)\n")


def test_rename_import_keeps_the_layout_of_a_parenthesized_import():
    got = rewrite("rename-import", MULTI_LINE_IMPORT, "helper,", **MOVE)
    assert got.startswith("from pkg.core import (\n    other,\n    third,\n)\n")


def test_rename_import_keeps_the_trailing_comment():
    got = rewrite(
        "rename-import", "import os\nfrom pkg.core import helper  # why\n", "helper  #", **MOVE
    )
    assert got == "import os\nfrom pkg.utils import helper  # why\n"


def test_rename_import_rewrites_a_function_local_import_in_place():
    code = "def f():\n    from pkg.core import helper  # lazy\n\n    return helper(1)\n"
    got = rewrite("rename-import", code, "helper  #", **MOVE)
    assert got == "def f():\n    from pkg.utils import helper  # lazy\n\n    return helper(1)\n"


def test_rename_import_stays_inside_its_guard():
    code = "try:\n    from pkg.core import helper\nexcept ImportError:\n    helper = None\n"
    got = rewrite("rename-import", code, "helper\n", **MOVE)
    assert got == "try:\n    from pkg.utils import helper\nexcept ImportError:\n    helper = None\n"


def test_rename_import_keeps_import_groups_apart():
    code = "import os\n\nfrom pkg.core import helper\nfrom pkg.utils import other\n"
    got = rewrite("rename-import", code, "helper", **MOVE)
    assert got == "import os\n\nfrom pkg.utils import helper, other\n"


# Real-code shapes of import moves: one import split into several new modules (once a
# CSTValidationError on real Django code: an import left with no names), function-local and
# guarded imports, names the client re-exports in __all__, ``import x as y`` and names read off
# an alias. Several findings at once go through fix_code, as a scan's findings do.

OTHER = {"old": "pkg.core.other", "new": "pkg.extra.other"}
RENAMED = {"old": "pkg.core.helper", "new": "pkg.utils.new_helper"}
MODULE = {"old": "pkg.core", "new": "pkg.base"}


def fix_all(code: str, *sites: tuple[str, dict[str, str]], codemod: str = "rename-import") -> str:
    """``fix_code`` with one finding per (text it points at, fix parameters); all must apply."""
    findings = [finding_at(codemod, code, at, **p) for at, p in sites]
    new, applied, declined = fix_code(code, findings)
    assert declined == [] and len(applied) == len(findings), declined
    assert_valid_python(new)
    return new


IMPORT_MOVES = params(
    (
        "every-name-to-a-different-module",
        "from pkg.core import helper, other\n\nhelper(other)\n",
        [("helper,", MOVE), ("other\n", OTHER)],
        "from pkg.utils import helper\nfrom pkg.extra import other\n\nhelper(other)\n",
    ),
    (
        "parenthesized-each-comment-with-its-name",
        "from pkg.core import (\n    helper,  # the helper\n    other,  # the other\n)\n",
        [("helper,", MOVE), ("other,", OTHER)],
        "from pkg.utils import (\n    helper,  # the helper\n)\n"
        "from pkg.extra import other  # the other\n",
    ),
    (
        "two-move-one-stays",
        "from pkg.core import helper, keep, other\n",
        [("helper,", MOVE), ("other\n", OTHER)],
        "from pkg.core import keep\nfrom pkg.utils import helper\nfrom pkg.extra import other\n",
    ),
    (
        "function-local",
        "def f():\n    from pkg.core import helper, other  # lazy\n\n    return helper(other)\n",
        [("helper,", MOVE), ("other  #", OTHER)],
        "def f():\n    from pkg.utils import helper  # lazy\n    from pkg.extra import other\n\n"
        "    return helper(other)\n",
    ),
    (
        "inside-try-except",
        "try:\n    from pkg.core import helper, other\nexcept ImportError:\n    helper = other = None\n",
        [("helper,", MOVE), ("other\n", OTHER)],
        "try:\n    from pkg.utils import helper\n    from pkg.extra import other\n"
        "except ImportError:\n    helper = other = None\n",
    ),
    (
        "re-exported-and-renamed",
        "from pkg.core import helper, other\n\n__all__ = ['helper', 'other']\n",
        [("helper,", RENAMED), ("other\n", OTHER)],
        "from pkg.utils import new_helper as helper\nfrom pkg.extra import other\n\n"
        "__all__ = ['helper', 'other']\n",
    ),
    (
        "aliased-and-renamed",
        "from pkg.core import helper as h, other\n",
        [("helper as", RENAMED), ("other\n", OTHER)],
        "from pkg.utils import new_helper as h\nfrom pkg.extra import other\n",
    ),
    (
        "last-of-parenthesized-without-trailing-comma",
        "from pkg.core import (\n    keep,  # stays\n    helper  # moves\n)\n",
        [("helper  #", MOVE)],
        "from pkg.core import (\n    keep  # stays\n)\nfrom pkg.utils import helper  # moves\n",
    ),
    (
        "already-imported-from-the-new-home",
        "from pkg.utils import helper, x\nfrom pkg.core import helper as helper\n",
        [("helper as", MOVE)],
        "from pkg.utils import helper, x\n",
    ),
    (
        "import-as",
        "import pkg.core as core\n\ncore.helper(1)\n",
        [("pkg.core", MODULE)],
        "from pkg import base as core\n\ncore.helper(1)\n",
    ),
    (
        "import-as-beside-another",
        "import os, pkg.core as core  # why\n",
        [("pkg.core", MODULE)],
        "import os  # why\nfrom pkg import base as core\n",
    ),
    (
        "import-as-function-local",
        "def f():\n    import pkg.core as core\n    return core\n",
        [("pkg.core", MODULE)],
        "def f():\n    from pkg import base as core\n    return core\n",
    ),
    (
        "read-off-an-alias-imported-from-the-new-home",
        "import pkg.core as core\nfrom pkg.utils import helper\n\n\ndef f():\n"
        "    return core.helper(1)\n",
        [("core.helper", MOVE)],
        "import pkg.core as core\nfrom pkg.utils import helper\n\n\ndef f():\n"
        "    return helper(1)\n",
    ),
    (
        "read-off-a-from-imported-module-under-another-local-name",
        "from pkg import core\nfrom pkg.utils import helper as h\n\nrun(core.helper, (core.helper))\n",
        [("core.helper,", MOVE), ("core.helper)", MOVE)],
        "from pkg import core\nfrom pkg.utils import helper as h\n\nrun(h, (h))\n",
    ),
    (
        "a-moved-module-inside-a-chain",
        "import pkg as p\nfrom pkg import base\n\np.core.helper(1)\n",
        [("p.core", MODULE)],
        "import pkg as p\nfrom pkg import base\n\nbase.helper(1)\n",
    ),
)


@pytest.mark.parametrize(("before", "sites", "after"), IMPORT_MOVES)
def test_import_moves_on_real_code_shapes(before: str, sites: list, after: str):
    assert fix_all(before, *sites) == after


IMPORT_MOVES_DECLINED = params(
    (
        "split-on-a-one-line-suite",
        "try: from pkg.core import keep, helper\nexcept E: pass\n",
        "helper\n",
        "shares its line",
    ),
    (
        "split-beside-another-statement",
        "import os; from pkg.core import keep, helper\n",
        "helper\n",
        "shares its line",
    ),
    (
        "read-off-an-alias-nothing-imported",
        "import pkg.core as core\n\ncore.helper(1)\n",
        "core.helper",
        "import helper from pkg.utils",
    ),
    (
        "new-home-imported-below-the-use",
        "import pkg.core as core\nx = core.helper\nfrom pkg.utils import helper\n",
        "core.helper",
        "import helper from pkg.utils",
    ),
    (
        "assigned-through-the-alias",
        "import pkg.core as core\nfrom pkg.utils import helper\ncore.helper = None\n",
        "core.helper",
        "assigned or deleted",
    ),
    (
        "alias-bound-twice",
        "try:\n    import pkg.core as core\nexcept ImportError:\n    core = None\n"
        "from pkg.utils import helper\ncore.helper(1)\n",
        "core.helper",
        "neither an import nor",
    ),
    (
        "the-alias-is-another-module",
        "import pkg.other as core\nfrom pkg.utils import helper\ncore.helper(1)\n",
        "core.helper",
        "neither an import nor",
    ),
    (
        "new-home-name-bound-otherwise",
        "import pkg.core as core\nfrom pkg.utils import helper\nhelper = 2\ncore.helper(1)\n",
        "core.helper",
        "import helper from pkg.utils",
    ),
)


@pytest.mark.parametrize(("before", "at", "why"), IMPORT_MOVES_DECLINED)
def test_import_moves_decline(before: str, at: str, why: str):
    with pytest.raises(Decline, match=why):
        rewrite("rename-import", before, at, **MOVE)


def test_import_of_a_module_that_binds_the_top_package_declines():
    with pytest.raises(Decline, match="binds the top package"):
        rewrite("rename-import", "import pkg.core\n\npkg.core.helper()\n", "pkg.core\n", **MODULE)


NEW_HOMES_DECLINED = params(
    # The module made private: the finding names what became of the module, not of the name.
    ("module-made-private", "from pkg.helpers import tool\n", "pkg.helpers.tool", "pkg._helpers"),
    # A module replaced by the class it held.
    ("module-to-its-class", "from pkg import things\n", "pkg.things", "pkg.Things"),
    ("public-to-private", "from pkg import tool\n", "pkg.tool", "pkg._impl.tool"),
    ("not-a-dotted-name", "from pkg import tool\n", "pkg.tool", "tool"),
)


@pytest.mark.parametrize(("before", "old", "new"), NEW_HOMES_DECLINED)
def test_rename_import_declines_a_home_it_cannot_trust(before: str, old: str, new: str):
    name = old.rpartition(".")[2]
    with pytest.raises(Decline, match=r"became of the module|private to the host|not a name"):
        rewrite("rename-import", before, f"{name}\n", old=old, new=new)


def test_rename_import_keeps_a_case_only_rename():
    got = rewrite(
        "rename-import", "from pkg import NaN as X\n", "NaN", old="pkg.NaN", new="pkg.nan"
    )
    assert got == "from pkg import nan as X\n"


# -- rename-attribute --------------------------------------------------------------------------

RENAME = {"old": "old_method", "new": "describe"}

RENAME_ATTRIBUTE_DECLINED = params(
    ("another-attribute", "def f(self):\n    return self.engine.step()\n", "self.engine"),
    (
        "getattr-string",
        "def f(self):\n    return getattr(self.engine, 'old_method')()\n",
        "getattr",
    ),
    ("finding-elsewhere", "def f(self):\n    return self.engine.old_method()\n", "return"),
)

RENAME_ATTRIBUTE_REWRITES = params(
    (
        "method-call",
        "def f(engine):\n    return engine.old_method(1)\n",
        "engine.",
        "def f(engine):\n    return engine.describe(1)\n",
    ),
    (
        "through-self-attribute",
        "def f(self):\n    return self.engine.old_method()  # why\n",
        "self.engine",
        "def f(self):\n    return self.engine.describe()  # why\n",
    ),
    (
        "attribute-read",
        "def f(self):\n    method = self.engine.old_method\n",
        "self.engine",
        "def f(self):\n    method = self.engine.describe\n",
    ),
)


@pytest.mark.parametrize(("before", "at"), RENAME_ATTRIBUTE_DECLINED)
def test_rename_attribute_declines(before: str, at: str):
    with pytest.raises(Decline):
        rewrite("rename-attribute", before, at, **RENAME)


@pytest.mark.parametrize(("before", "at", "after"), RENAME_ATTRIBUTE_REWRITES)
def test_rename_attribute(before: str, at: str, after: str):
    got = rewrite("rename-attribute", before, at, **RENAME)
    assert got == after
    assert_valid_python(got)


THROUGH = {"old": "model", "new": "language_model.model"}


def test_rename_attribute_to_a_path_reaches_through_the_holder():
    """A served wrapper keeps the model in ``.language_model``: ``m.model`` -> the path."""
    code = "def f(m):\n    base = m.model  # inner\n    return base.layers\n"
    got = rewrite("rename-attribute", code, "m.model", **THROUGH)
    assert got == "def f(m):\n    base = m.language_model.model  # inner\n    return base.layers\n"
    assert_valid_python(got)
    called = rewrite("rename-attribute", "x = self.r.model.forward(1)\n", "self.r", **THROUGH)
    assert called == "x = self.r.language_model.model.forward(1)\n"


def test_rename_attribute_to_a_path_declines_what_is_no_path():
    with pytest.raises(Decline):
        rewrite("rename-attribute", "b = m.model\n", "m.model", old="model", new="a..model")
    with pytest.raises(Decline):  # the finding is on another member
        rewrite("rename-attribute", "b = m.head\n", "m.head", **THROUGH)


def test_rename_attribute_renames_only_the_member_of_the_finding():
    code = "def f(self):\n    return self.old_method.old_method()\n"
    got = rewrite("rename-attribute", code, "self.old", **RENAME)
    assert got == "def f(self):\n    return self.old_method.describe()\n"


# -- add-keyword -------------------------------------------------------------------------------

FAST = {"keyword": "fast_mode", "value": "False"}

ADD_KEYWORD_DECLINED = params(
    ("already-passed", "c = RunConfig(batch_size=3, fast_mode=True)\n", "RunConfig"),
    ("double-star-kwargs", "c = RunConfig(batch_size=3, **options)\n", "RunConfig"),
    ("finding-not-at-a-call", "c = RunConfig(batch_size=3)\n", "batch_size"),
)

ADD_KEYWORD_REWRITES = params(
    ("no-arguments", "c = RunConfig()\n", "RunConfig", "c = RunConfig(fast_mode=False)\n"),
    (
        "one-line",
        "c = RunConfig(batch_size=3)  # three\n",
        "RunConfig",
        "c = RunConfig(batch_size=3, fast_mode=False)  # three\n",
    ),
    ("star-args", "c = RunConfig(*args)\n", "RunConfig", "c = RunConfig(*args, fast_mode=False)\n"),
    (
        "multi-line-trailing-comma",
        "c = RunConfig(\n    batch_size=3,\n    seed=1,\n)\n",
        "RunConfig",
        "c = RunConfig(\n    batch_size=3,\n    seed=1,\n    fast_mode=False,\n)\n",
    ),
    (
        "nested-call",
        "run(RunConfig(batch_size=3), 1)\n",
        "RunConfig",
        "run(RunConfig(batch_size=3, fast_mode=False), 1)\n",
    ),
)


@pytest.mark.parametrize(("before", "at"), ADD_KEYWORD_DECLINED)
def test_add_keyword_declines(before: str, at: str):
    with pytest.raises(Decline):
        rewrite("add-keyword", before, at, **FAST)


@pytest.mark.parametrize(("before", "at", "after"), ADD_KEYWORD_REWRITES)
def test_add_keyword(before: str, at: str, after: str):
    got = rewrite("add-keyword", before, at, **FAST)
    assert got == after
    assert_valid_python(got)


BLOCK = {"keyword": "block_size", "value": "{arg:vllm_config}.cache_config.block_size"}


def test_add_keyword_template_takes_the_code_of_another_keyword():
    code = "s = Scheduler(\n    vllm_config=self.vllm_config,\n    kv_cache_config=kv,\n)\n"
    got = rewrite("add-keyword", code, "Scheduler", **BLOCK)
    assert got == (
        "s = Scheduler(\n    vllm_config=self.vllm_config,\n    kv_cache_config=kv,\n"
        "    block_size=self.vllm_config.cache_config.block_size,\n)\n"
    )
    assert_valid_python(got)


def test_add_keyword_template_declines_without_that_keyword():
    with pytest.raises(Decline, match="vllm_config"):
        rewrite("add-keyword", "s = Scheduler(config, kv=1)\n", "Scheduler", **BLOCK)


@pytest.mark.parametrize("argument", ["a if b else c", "x or y", "-n", "lambda: c", "lambda: 1"])
def test_add_keyword_template_keeps_operator_precedence(argument: str):
    code = f"s = Scheduler(vllm_config={argument})\n"
    try:
        got = rewrite("add-keyword", code, "Scheduler", **BLOCK)
    except Decline:
        return
    assert f"block_size=({argument}).cache_config.block_size" in got


def test_add_keyword_template_declines_an_argument_with_side_effects():
    with pytest.raises(Decline):
        rewrite("add-keyword", "s = Scheduler(vllm_config=make())\n", "Scheduler", **BLOCK)


def test_add_keyword_multi_line_single_argument_keeps_indentation():
    got = rewrite("add-keyword", "c = RunConfig(\n    batch_size=3,\n)\n", "RunConfig", **FAST)
    assert got == "c = RunConfig(\n    batch_size=3,\n    fast_mode=False,\n)\n"


def test_add_keyword_keeps_argument_comments_in_place():
    code = "c = RunConfig(\n    batch_size=3,  # three\n    seed=1,  # one\n)\n"
    got = rewrite("add-keyword", code, "RunConfig", **FAST)
    assert got == (
        "c = RunConfig(\n    batch_size=3,  # three\n    seed=1,  # one\n    fast_mode=False,\n)\n"
    )


def test_add_keyword_multi_line_without_trailing_comma():
    got = rewrite("add-keyword", "c = RunConfig(\n    batch_size=3\n)\n", "RunConfig", **FAST)
    assert got == "c = RunConfig(\n    batch_size=3,\n    fast_mode=False\n)\n"


# -- remove-keyword ----------------------------------------------------------------------------

DROP = {"keyword": "retries"}

REMOVE_KEYWORD_DECLINED = params(
    ("not-passed", "connect('h')\n", "connect"),
    ("inside-double-star", "connect('h', **{'retries': 5})\n", "connect"),
    ("finding-not-at-a-call", "x = connect('h', retries=5)\n", "x ="),
)

REMOVE_KEYWORD_REWRITES = params(
    ("first", "connect(retries=5, host='h')\n", "connect", "connect(host='h')\n"),
    ("middle", "connect(host='h', retries=5, port=1)\n", "connect", "connect(host='h', port=1)\n"),
    ("last", "connect('h', retries=5)  # c\n", "connect", "connect('h')  # c\n"),
    ("only", "connect(retries=5)\n", "connect", "connect()\n"),
    (
        "first-trailing-comma",
        "connect(\n    retries=5,\n    port=1,\n)\n",
        "connect",
        "connect(\n    port=1,\n)\n",
    ),
    (
        "middle-trailing-comma",
        "connect(\n    'h',  # host\n    retries=5,  # retries\n    port=1,  # port\n)\n",
        "connect",
        "connect(\n    'h',  # host\n    port=1,  # port\n)\n",
    ),
    (
        "last-trailing-comma",
        "connect(\n    'h',\n    retries=5,\n)\n",
        "connect",
        "connect(\n    'h',\n)\n",
    ),
)


@pytest.mark.parametrize(("before", "at"), REMOVE_KEYWORD_DECLINED)
def test_remove_keyword_declines(before: str, at: str):
    with pytest.raises(Decline):
        rewrite("remove-keyword", before, at, **DROP)


@pytest.mark.parametrize(("before", "at", "after"), REMOVE_KEYWORD_REWRITES)
def test_remove_keyword(before: str, at: str, after: str):
    got = rewrite("remove-keyword", before, at, **DROP)
    assert got == after
    assert_valid_python(got)


def test_remove_keyword_drops_several():
    got = rewrite(
        "remove-keyword",
        "connect('h', retries=5, verbose=1)\n",
        "connect",
        keyword="retries",
        keyword2="verbose",
    )
    assert got == "connect('h')\n"


def test_remove_keyword_last_trailing_comma_keeps_the_comment_of_the_kept_argument():
    code = "connect(\n    'h',  # host\n    retries=5,  # retries\n)\n"
    got = rewrite("remove-keyword", code, "connect", **DROP)
    assert got == "connect(\n    'h',  # host\n)\n"


def test_remove_keyword_only_argument_multi_line():
    got = rewrite("remove-keyword", "connect(\n    retries=5,\n)\n", "connect", **DROP)
    assert got == "connect()\n"


# -- rename-keyword ----------------------------------------------------------------------------


def test_rename_keyword():
    got = rewrite(
        "rename-keyword", "connect('h', retries=5)\n", "connect", keyword="retries", new="attempts"
    )
    assert got == "connect('h', attempts=5)\n"


def test_rename_keyword_declines_when_not_passed():
    with pytest.raises(Decline):
        rewrite("rename-keyword", "connect('h', tries=5)\n", "connect", keyword="retries", new="a")


def test_rename_keyword_declines_a_keyword_already_passed():
    code = "connect('h', retries=5, attempts=3)\n"
    new, applied, declined = fix_code(
        code, [finding_at("rename-keyword", code, "connect", keyword="retries", new="attempts")]
    )
    assert (new, applied, len(declined)) == (code, [], 1)


# Multi-line calls as real code writes them: the argument's value, its layout and every comment
# stay; only the keyword changes (or the argument goes, with its own comment).

RETRIES = {"keyword": "retries", "new": "attempts"}

KEYWORDS_MULTI_LINE = params(
    (
        "rename-keeps-value-and-comments",
        "rename-keyword",
        RETRIES,
        "x = connect(\n    'h',  # host\n    retries = compute(  # how many\n        5,\n    ),  # after\n"
        "    port=1\n)\n",
        "x = connect(\n    'h',  # host\n    attempts = compute(  # how many\n        5,\n    ),  # after\n"
        "    port=1\n)\n",
    ),
    (
        "rename-last-without-trailing-comma",
        "rename-keyword",
        RETRIES,
        "connect(\n    'h',\n    retries=5  # five\n)\n",
        "connect(\n    'h',\n    attempts=5  # five\n)\n",
    ),
    (
        "rename-two",
        "rename-keyword",
        {**RETRIES, "keyword2": "verbose", "new2": "debug"},
        "connect(\n    'h',\n    retries=5,\n    verbose=True,\n)\n",
        "connect(\n    'h',\n    attempts=5,\n    debug=True,\n)\n",
    ),
    (
        "rename-in-a-method-chain",
        "rename-keyword",
        RETRIES,
        "x = (\n    client\n    .connect(retries=1)  # once\n)\n",
        "x = (\n    client\n    .connect(attempts=1)  # once\n)\n",
    ),
    (
        "rename-a-decorator-argument",
        "rename-keyword",
        RETRIES,
        "@connect(retries=1)\ndef f():\n    pass\n",
        "@connect(attempts=1)\ndef f():\n    pass\n",
    ),
    (
        "remove-last-without-trailing-comma",
        "remove-keyword",
        {"keyword": "retries"},
        "connect(\n    'h',  # host\n    retries=5  # five\n)\n",
        "connect(\n    'h'  # host\n)\n",
    ),
    (
        "remove-the-only-one-keeps-the-calls-comment",
        "remove-keyword",
        {"keyword": "retries"},
        "def f():\n    connect(  # why\n        retries=5,\n    )\n",
        "def f():\n    connect(  # why\n    )\n",
    ),
    (
        "positional-to-keyword-keeps-comments",
        "positional-to-keyword",
        {"from": "1", "names": "y,rate"},
        "fit(\n    X,  # data\n    y,  # target\n    0.5  # rate\n)\n",
        "fit(\n    X,  # data\n    y=y,  # target\n    rate=0.5  # rate\n)\n",
    ),
)


@pytest.mark.parametrize(("codemod", "fix_params", "before", "after"), KEYWORDS_MULTI_LINE)
def test_keyword_codemods_on_multi_line_calls(
    codemod: str, fix_params: dict[str, str], before: str, after: str
):
    at = "connect" if "connect" in before else "fit"
    if before.startswith("x = (\n    client"):
        at = "client"
    assert fix_all(before, (at, fix_params), codemod=codemod) == after


def test_rename_keyword_declines_two_keywords_that_swap_names():
    with pytest.raises(Decline, match="already passed"):
        rewrite(
            "rename-keyword", "connect(a=1, b=2)\n", "connect",
            keyword="a", new="b", keyword2="b", new2="a",
        )  # fmt: skip


# -- unwrap-result -----------------------------------------------------------------------------

UNWRAP_DECLINED = params(
    ("index-1", "def f(e):\n    return e.rpc('x', rank=0)[1]\n", "e.rpc"),
    ("variable-index-1", "def f(e):\n    r = e.rpc('x', rank=0)\n    return r[1]\n", "e.rpc"),
    ("variable-index-name", "def f(e, i):\n    r = e.rpc('x')\n    return r[i]\n", "e.rpc"),
    ("slice", "def f(e):\n    return e.rpc('x', rank=0)[0:1]\n", "e.rpc"),
    ("unpacked", "def f(e):\n    a, = e.rpc('x', rank=0)\n    return a\n", "e.rpc"),
    ("attribute-target", "def f(self, e):\n    self.r = e.rpc('x')\n    return 1\n", "e.rpc"),
)

UNWRAP_REWRITES = params(
    (
        "direct",
        "def f(e):\n    return e.rpc('x', rank=0)[0]\n",
        "e.rpc",
        "def f(e):\n    return e.rpc('x', rank=0)\n",
    ),
    (
        "direct-attribute-read",
        "def f():\n    return load_items()[0].name\n",
        "load_items",
        "def f():\n    return load_items().name\n",
    ),
    (
        "through-a-variable",
        "def f(e):\n    replies = e.rpc(\n        'x',\n        rank=0,\n    )\n"
        "    reply = replies[0]\n    return reply\n",
        "e.rpc",
        "def f(e):\n    replies = e.rpc(\n        'x',\n        rank=0,\n    )\n"
        "    reply = replies\n    return reply\n",
    ),
    (
        "through-a-variable-twice",
        "def f(e):\n    r = e.rpc('x', rank=0)\n    return r[0].x, r[0].y\n",
        "e.rpc",
        "def f(e):\n    r = e.rpc('x', rank=0)\n    return r.x, r.y\n",
    ),
)


@pytest.mark.parametrize(("before", "at"), UNWRAP_DECLINED)
def test_unwrap_result_declines(before: str, at: str):
    with pytest.raises(Decline):
        rewrite("unwrap-result", before, at)


@pytest.mark.parametrize(("before", "at", "after"), UNWRAP_REWRITES)
def test_unwrap_result(before: str, at: str, after: str):
    got = rewrite("unwrap-result", before, at)
    assert got == after
    assert_valid_python(got)


def test_unwrap_result_declines_when_nothing_is_indexed():
    with pytest.raises(Decline):
        rewrite("unwrap-result", "def f(e):\n    r = e.rpc('x')\n    return r\n", "e.rpc")


def test_unwrap_result_stays_in_the_function():
    code = "def f(e):\n    r = e.rpc('x')\n    return r[0]\n\n\ndef g(r):\n    return r[0]\n"
    got = rewrite("unwrap-result", code, "e.rpc")
    assert got == "def f(e):\n    r = e.rpc('x')\n    return r\n\n\ndef g(r):\n    return r[0]\n"


def test_unwrap_result_respects_a_rebinding():
    code = "def f(e, items):\n    r = e.rpc('x')\n    r = items\n    return r[0]\n"
    with pytest.raises(Decline):
        rewrite("unwrap-result", code, "e.rpc")


def test_unwrap_result_declines_other_uses_of_the_variable():
    code = "def f(e):\n    r = e.rpc('x')\n    return len(r), r[0]\n"
    with pytest.raises(Decline):
        rewrite("unwrap-result", code, "e.rpc")


def test_unwrap_result_declines_an_assignment_to_the_element():
    code = "def f(e):\n    r = e.rpc('x')\n    r[0] = 5\n    return r[0]\n"
    with pytest.raises(Decline):
        rewrite("unwrap-result", code, "e.rpc")


# -- accept-kwargs -----------------------------------------------------------------------------

ACCEPT_DECLINED = params(
    ("already-takes-kwargs", "def hook(self, **kw):\n    return kw\n", "hook"),
    ("finding-not-at-the-name", "def hook(self, a):\n    return a\n", "def"),
)

ACCEPT_REWRITES = params(
    (
        "one-line",
        "def hook(self, a):\n    return a\n",
        "hook",
        "def hook(self, a, **_kwargs):\n    return a\n",
    ),
    (
        "annotated",
        "def hook(self, a: int = 1) -> int:\n    return a\n",
        "hook",
        "def hook(self, a: int = 1, **_kwargs) -> int:\n    return a\n",
    ),
    (
        "no-parameters",
        "def hook():\n    return 1\n",
        "hook",
        "def hook(**_kwargs):\n    return 1\n",
    ),
    (
        "method",
        "class C:\n    def hook(self):\n        return 1\n",
        "hook",
        "class C:\n    def hook(self, **_kwargs):\n        return 1\n",
    ),
    (
        "multi-line",
        "def hook(\n    self, input_ids, positions=None\n):\n    return 1\n",
        "hook",
        "def hook(\n    self, input_ids, positions=None, **_kwargs\n):\n    return 1\n",
    ),
    (
        "multi-line-one-per-line",
        "def hook(\n    self,\n    a\n):\n    return a\n",
        "hook",
        "def hook(\n    self,\n    a,\n    **_kwargs\n):\n    return a\n",
    ),
    (
        "trailing-comma",
        "def hook(\n    self,\n    a,\n):\n    return a\n",
        "hook",
        "def hook(\n    self,\n    a,\n    **_kwargs,\n):\n    return a\n",
    ),
    (
        "star-args",
        "def hook(self, *args):\n    return args\n",
        "hook",
        "def hook(self, *args, **_kwargs):\n    return args\n",
    ),
    (
        "star-args-and-keyword-only",
        "def hook(self, *args, b=1):\n    return args\n",
        "hook",
        "def hook(self, *args, b=1, **_kwargs):\n    return args\n",
    ),
    (
        "bare-star",
        "def hook(self, *, b=1):\n    return b\n",
        "hook",
        "def hook(self, *, b=1, **_kwargs):\n    return b\n",
    ),
)


@pytest.mark.parametrize(("before", "at"), ACCEPT_DECLINED)
def test_accept_kwargs_declines(before: str, at: str):
    with pytest.raises(Decline):
        rewrite("accept-kwargs", before, at)


@pytest.mark.parametrize(("before", "at", "after"), ACCEPT_REWRITES)
def test_accept_kwargs(before: str, at: str, after: str):
    got = rewrite("accept-kwargs", before, at)
    assert got == after
    assert_valid_python(got)


def test_accept_kwargs_star_args_trailing_comma():
    code = "def hook(\n    self,\n    *args,\n):\n    return args\n"
    got = rewrite("accept-kwargs", code, "hook")
    assert got == "def hook(\n    self,\n    *args,\n    **_kwargs,\n):\n    return args\n"


def test_accept_kwargs_after_positional_only():
    got = rewrite("accept-kwargs", "def hook(self, a, /):\n    return a\n", "hook")
    assert got == "def hook(self, a, /, **_kwargs):\n    return a\n"


def test_accept_kwargs_keeps_parameter_comments():
    code = "def hook(\n    self,  # me\n    a,  # the a\n):\n    return a\n"
    got = rewrite("accept-kwargs", code, "hook")
    assert got == "def hook(\n    self,  # me\n    a,  # the a\n    **_kwargs,\n):\n    return a\n"


def test_accept_kwargs_declines_a_name_clash():
    code = "def hook(self, _kwargs):\n    return _kwargs\n"
    new, applied, declined = fix_code(code, [finding_at("accept-kwargs", code, "hook")])
    assert (new, applied, len(declined)) == (code, [], 1)


# -- fix_code: several findings in one file ----------------------------------------------------

MANY = """\
from pkg.core import helper, RunConfig


def go(ex, s):
    ex.execute_model(s)
    c = RunConfig(batch_size=3)
    return helper(c)[0]
"""

MANY_FIXED = """\
from pkg.core import RunConfig
from pkg.utils import helper


def go(ex, s):
    ex.execute_model(s)
    ex.sample_tokens(None)
    c = RunConfig(batch_size=3, fast_mode=False)
    return helper(c)
"""


def _many_findings(code: str) -> list[Finding]:
    return [
        finding_at("rename-import", code, "helper,", **MOVE),
        finding_at("follow-up-call", code, "ex.execute", **FOLLOW),
        finding_at("add-keyword", code, "RunConfig(batch", **FAST),
        finding_at("unwrap-result", code, "helper(c)"),
    ]


def test_fix_code_applies_edits_bottom_up_and_the_import_move_last():
    findings = _many_findings(MANY)
    new, applied, declined = fix_code(MANY, findings)
    assert new == MANY_FIXED
    assert declined == []
    assert [f.fix.codemod for f in applied] == [
        "unwrap-result",
        "add-keyword",
        "follow-up-call",
        "rename-import",
    ]
    assert_valid_python(new)


def test_fix_code_order_of_findings_does_not_matter():
    findings = _many_findings(MANY)
    assert fix_code(MANY, findings[::-1])[0] == fix_code(MANY, findings)[0] == MANY_FIXED


def test_fix_code_two_edits_on_one_line():
    code = "def go(e):\n    return RunConfig(batch_size=3)[0], connect('h', retries=5)\n"
    new, applied, declined = fix_code(
        code,
        [
            finding_at("unwrap-result", code, "RunConfig"),
            finding_at("add-keyword", code, "RunConfig", **FAST),
            finding_at("remove-keyword", code, "connect", **DROP),
        ],
    )
    assert new == "def go(e):\n    return RunConfig(batch_size=3, fast_mode=False), connect('h')\n"
    assert len(applied) == 3 and declined == []


def test_fix_code_keeps_the_others_when_one_declines():
    code = "def go(ex, s):\n    x = 1 + ex.execute_model(s)\n    connect('h', retries=5)\n"
    follow = finding_at("follow-up-call", code, "ex.", **FOLLOW)
    drop = finding_at("remove-keyword", code, "connect", **DROP)
    new, applied, declined = fix_code(code, [follow, drop])
    assert new == "def go(ex, s):\n    x = 1 + ex.execute_model(s)\n    connect('h')\n"
    assert applied == [drop]
    assert [f for f, _ in declined] == [follow]
    assert "not the shape" in declined[0][1]


def test_fix_code_unknown_codemod_is_declined():
    code = "x = 1\n"
    f = finding("no-such-codemod", 1, 1)
    assert fix_code(code, [f]) == (code, [], [(f, "no codemod 'no-such-codemod'")])


def test_fix_code_import_below_a_line_adding_edit():
    code = (
        "def go(ex, s):\n    ex.execute_model(s)\n\n\n"
        "def later():\n    from pkg.core import helper\n\n    return helper(1)\n"
    )
    findings = [
        finding_at("follow-up-call", code, "ex.", **FOLLOW),
        finding_at("rename-import", code, "helper\n", **MOVE),
    ]
    _, applied, declined = fix_code(code, findings)
    assert declined == []
    assert len(applied) == 2


# -- plan --------------------------------------------------------------------------------------


def test_plan_sorts_findings_into_fixed_manual_and_skipped_unsafe():
    code = "connect('h', retries=5)\nbuild('w')\n"
    unsafe = finding_at("remove-keyword", code, "connect", safety="unsafe", **DROP)
    manual = finding("", 2, 1, safety="manual")
    no_fix = Finding("r", "missing-symbol", "error", "pkg/mod.py", 2, 1, "s", "m")
    elsewhere = finding("remove-keyword", 1, 1, file="pkg/gone.py", **DROP)
    texts = {"pkg/mod.py": code}

    p = plan([unsafe, manual, no_fix, elsewhere], texts)
    assert p.skipped_unsafe == [unsafe]
    assert p.manual == [manual, no_fix]
    assert p.pending == []  # elsewhere's file was not read: nothing to fix there

    p = plan([unsafe, manual, no_fix], texts, unsafe=True)
    assert [(ff.file, ff.new, ff.applied) for ff in p.pending] == [
        ("pkg/mod.py", "connect('h')\nbuild('w')\n", [unsafe])
    ]


# -- unified diffs apply with git apply and patch -p1 ------------------------------------------

APPLY_TOOLS = [
    pytest.param(["git", "apply", "--check"], ["git", "apply"], id="git-apply"),
    pytest.param(["patch", "-p1", "--dry-run"], ["patch", "-p1"], id="patch-p1"),
]

DIFF_INPUTS = params(
    ("many", MANY, _many_findings(MANY)),
    (
        "no-newline-at-end",
        "def g(ex, s):\n    ex.execute_model(s)",
        [finding("follow-up-call", 2, 5, **FOLLOW)],
    ),
    (
        "crlf",
        "def g(ex, s):\r\n    ex.execute_model(s)\r\n    return 1\r\n",
        [finding("follow-up-call", 2, 5, **FOLLOW)],
    ),
    (
        "non-ascii",
        "# café\ndef g(ex, s):\n    ex.execute_model(s)  # ünïcode\n",
        [finding("follow-up-call", 3, 5, **FOLLOW)],
    ),
)


def _run(cmd: list[str], cwd: Path, patch: bytes) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, input=patch, cwd=cwd, capture_output=True, check=False)


@pytest.mark.parametrize(("check", "apply"), APPLY_TOOLS)
@pytest.mark.parametrize(("old", "findings"), DIFF_INPUTS)
def test_unified_diff_applies(tmp_path: Path, check, apply, old: str, findings):
    need_tool(check[0])
    new, applied, declined = fix_code(old, findings)
    assert new != old and declined == []
    rel = "pkg/sub/mod.py"
    target = tmp_path / rel
    target.parent.mkdir(parents=True)
    target.write_bytes(old.encode())
    patch = unified_diff(rel, old, new).encode()
    assert patch.startswith(f"--- a/{rel}\n+++ b/{rel}\n".encode())
    done = _run(check, tmp_path, patch)
    assert done.returncode == 0, done.stderr.decode()
    assert target.read_bytes() == old.encode()  # a check changes nothing
    done = _run(apply, tmp_path, patch)
    assert done.returncode == 0, done.stderr.decode()
    assert target.read_bytes() == new.encode()
    assert sorted(p.name for p in target.parent.iterdir()) == ["mod.py"]  # no .orig / .rej


def test_unified_diff_of_identical_text_is_empty():
    assert unified_diff("a.py", "x = 1\n", "x = 1\n") == ""


def test_write_patches_one_per_file_and_all(tmp_path: Path):
    fixes = [
        FileFix("pkg/a.py", "x = 1\n", "x = 2\n"),
        FileFix("pkg/sub/b.py", "y = 1\n", "y = 1\n"),  # unchanged: no patch
        FileFix("pkg/c.py", "z = 1\n", "z = 3\n"),
    ]
    written = write_patches(FixPlan(fixes, [], []), tmp_path / "out")
    assert [p.name for p in written] == ["pkg__a.py.patch", "pkg__c.py.patch", "all.patch"]
    combined = (tmp_path / "out" / "all.patch").read_text()
    assert combined == fixes[0].patch() + fixes[2].patch()
    assert write_patches(FixPlan([fixes[1]], [], []), tmp_path / "none") == []
    assert not (tmp_path / "none").exists()  # nothing to patch: no folder made


# -- fix rules for the fixture hosts (fixtures/fix_rules) --------------------------------------

FIX_RULES = FIXTURES / "fix_rules"
HOSTS = FIXTURES / "hosts"


#: The fix rules alone (``load_rules`` reads only ``<host>/*.toml``: the README is no rule).
FIXTURE_FIX_RULES = load_rules(FIX_RULES, builtin=False)
#: ``fixtures/rules`` plus ``fixtures/fix_rules``: the rules the fixture clients are scanned with
#: (binding rules widen receiver inference). The built-in (vLLM) rules never apply to these hosts.
RULES_WITH_FIXES = load_rules(FIXTURES / "rules", FIX_RULES, builtin=False)
#: The same rules as CLI flags (beside the built-in ones).
RULES_WITH_FIXES_ARGS = ("--rules", str(FIXTURES / "rules"), "--rules", str(FIX_RULES))


def test_fix_rules_load():
    assert {r.id for r in FIXTURE_FIX_RULES} == {
        "engine-describe-rename",
        "load-items-unwrap",
        "run-then-finish",
    }
    assert (
        RULES_WITH_FIXES.ids
        == FIXTURE_FIX_RULES.ids | load_rules(FIXTURES / "rules", builtin=False).ids
    )


@pytest.mark.parametrize("rule", list(FIXTURE_FIX_RULES), ids=lambda r: r.id)
def test_fix_rule_structure(rule: Rule):
    assert rule.path.stem == rule.id
    assert rule.path.parent.name == rule.host
    assert rule_problems(rule) == []
    assert rule.fix is not None and rule.fix.safety == "safe"


def _scan_code(rule: Rule, code: str, root: Path, rules: RuleSet = RULES_WITH_FIXES) -> ScanResult:
    pkg = root / "case"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text(code)
    host = HOSTS / rule.host
    return scan(
        str(pkg),
        against=str(host / rule.test["target"]),
        baseline=str(host / rule.test["baseline"]),
        host=rule.host,
        rules=rules,
    )


FIX_RULE_CASES = [
    pytest.param(rule, case, id=f"{rule.id}-{i}-{case.kind}")
    for rule in FIXTURE_FIX_RULES
    for i, case in enumerate(rule.cases)
]


@pytest.mark.parametrize(("rule", "case"), FIX_RULE_CASES)
def test_fix_rule_case(rule: Rule, case, tmp_path: Path):
    result = _scan_code(rule, case.code, tmp_path)
    relevant = [f for f in result.findings if f.rule == rule.id]
    assert len(relevant) == (case.kind == "invalid"), [f.message for f in result.findings]
    if case.fixed:
        fix_plan = plan(relevant, result.client_texts)
        assert [ff.new for ff in fix_plan.pending] == [case.fixed]
        assert_valid_python(case.fixed)
        again = _scan_code(rule, case.fixed, tmp_path / "fixed")
        assert [f for f in again.findings if f.rule == rule.id] == []


# -- patch snapshots of the fixture clients ----------------------------------------------------

#: client → (host, snapshot files its fixes must produce)
SNAPSHOT_CLIENTS = {
    "miniclient": ("minihost", ["calls.py", "returns.py", "runner.py", "symbols.py"]),
    "protoclient": ("protohost", ["configs.py", "driver.py", "ext.py", "patching.py"]),
}

#: Snapshots of the correct patch that the current output does not match yet.
KNOWN_WRONG: dict[str, str] = {}


def _snapshot_path(client: str, rel: str) -> Path:
    return SNAPSHOTS / f"{client}__{rel.replace('/', '__')}.patch"


@pytest.fixture(scope="module")
def fixture_plans() -> dict[str, FixPlan]:
    plans = {}
    for client, (host, _) in SNAPSHOT_CLIENTS.items():
        result = scan(
            str(FIXTURES / "clients" / client),
            against=str(HOSTS / host / "2.0"),
            baseline=str(HOSTS / host / "1.0"),
            host=host,
            rules=RULES_WITH_FIXES,
        )
        plans[client] = plan(result.findings, result.client_texts, unsafe=True)
    return plans


@pytest.mark.parametrize("client", sorted(SNAPSHOT_CLIENTS))
def test_fixture_fixes_change_exactly_the_snapshot_files(fixture_plans, client: str):
    _, files = SNAPSHOT_CLIENTS[client]
    got = fixture_plans[client]
    assert [ff.file for ff in got.pending] == [f"{client}/{name}" for name in files]
    assert [d for ff in got.files for d in ff.declined] == []
    for ff in got.pending:
        assert_valid_python(ff.new)


SNAPSHOT_CASES = [
    pytest.param(
        client,
        f"{client}/{name}",
        id=f"{client}/{name}",
        marks=[pytest.mark.xfail(strict=True, reason=KNOWN_WRONG[f"{client}/{name}"])]
        if f"{client}/{name}" in KNOWN_WRONG
        else [],
    )
    for client, (_, names) in sorted(SNAPSHOT_CLIENTS.items())
    for name in names
]


@pytest.mark.parametrize(("client", "rel"), SNAPSHOT_CASES)
def test_patch_snapshot(fixture_plans, client: str, rel: str):
    [ff] = [ff for ff in fixture_plans[client].pending if ff.file == rel]
    path = _snapshot_path(client, rel)
    if os.environ.get("DRIFTCHECK_UPDATE_SNAPSHOTS") == "1":
        # Writing mode: a hand-reviewed correct patch of a known-wrong fix is never overwritten.
        if not (rel in KNOWN_WRONG and path.exists()):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(ff.patch())
        return
    assert path.exists(), f"no snapshot {path}; run with DRIFTCHECK_UPDATE_SNAPSHOTS=1"
    assert ff.patch() == path.read_text()


@pytest.mark.parametrize("client", sorted(SNAPSHOT_CLIENTS))
def test_snapshots_apply_to_the_fixture_client(tmp_path: Path, client: str):
    """The reviewed snapshots are real patches: they apply to a copy of the client."""
    need_tool("git")
    copy = tmp_path / client
    shutil.copytree(FIXTURES / "clients" / client, copy)
    for name in SNAPSHOT_CLIENTS[client][1]:
        patch = _snapshot_path(client, f"{client}/{name}").read_bytes()
        done = _run(["git", "apply", "-"], copy, patch)
        assert done.returncode == 0, done.stderr.decode()
        assert_valid_python((copy / client / name).read_text())


def test_a_follow_up_call_is_safe_only_where_the_result_is_not_read(tmp_path: Path):
    # The host's own callers show the bare form; ``out = ex.run(b)`` would get finish()'s
    # result instead of run()'s: the fix is offered, but not as safe.
    pkg = tmp_path / "readsclient"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "from protohost.executor import Executor\n\n\n"
        "def bare(ex: Executor, batch):\n"
        "    ex.run(batch)\n\n\n"
        "def reads(ex: Executor, batch):\n"
        "    out = ex.run(batch)\n"
        "    return out\n"
    )
    result = scan(
        str(tmp_path),
        against=str(HOSTS / "protohost" / "2.0"),
        baseline=str(HOSTS / "protohost" / "1.0"),
        host="protohost",
        rules=RULES_WITH_FIXES,
    )
    got = {f.line: f.fix.safety for f in result.findings if f.rule == "run-then-finish"}
    assert got == {5: "safe", 9: "unsafe"}
