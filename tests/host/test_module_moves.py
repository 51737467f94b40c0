"""A module that moved whole (vLLM's ``entrypoints.openai.tool_parsers`` became ``tool_parsers``):
the module on the target that defines the removed one's names is proposed as its new home,
unsafe unless the host's own words name it. Our own small host ``mvhost``, 1.0 -> 2.0."""

from __future__ import annotations

from pathlib import Path

import pytest

from driftcheck.pipeline import ScanResult, scan

ARGS = "class FrontendArgs:\n    port: int = 0\n\n\ndef make_arg_parser(parser):\n    return parser\n\n\ndef validate_args(args):\n    return None\n"
PARSERS_INIT = "from mvhost.{pkg}.base import Parser, ParserManager\n"
PARSERS_BASE = "class Parser:\n    pass\n\n\nclass ParserManager:\n    pass\n"
HERMES = "from mvhost.{pkg}.base import Parser\n\n\nclass HermesParser(Parser):\n    pass\n"
HOSTS = {
    "1.0": {
        "mvhost/__init__.py": "",
        "mvhost/serve/__init__.py": "",
        "mvhost/serve/cli_args.py": ARGS,
        "mvhost/serve/parsers/__init__.py": PARSERS_INIT.format(pkg="serve.parsers"),
        "mvhost/serve/parsers/base.py": PARSERS_BASE,
        "mvhost/serve/parsers/hermes.py": HERMES.format(pkg="serve.parsers"),
        "mvhost/serve/helpers.py": "def trim(s):\n    return s\n\n\ndef pad(s):\n    return s\n\n\ndef join(a, b):\n    return a\n",
        "mvhost/serve/old_api.py": "class Handler:\n    pass\n",
        "mvhost/api.py": "class Handler:\n    pass\n",
        "mvhost/serve/lora.py": "class Adapter:\n    pass\n\n\nclass Manager:\n    pass\n\n\nclass Cache:\n    pass\n",
    },
    "2.0": {
        "mvhost/__init__.py": "",
        "mvhost/serve/__init__.py": "",
        "mvhost/common/__init__.py": "",
        "mvhost/common/cli_args.py": ARGS + "\n\ndef resolve_defaults(args):\n    return args\n",
        "mvhost/parsers/__init__.py": PARSERS_INIT.format(pkg="parsers"),
        "mvhost/parsers/base.py": PARSERS_BASE,
        "mvhost/parsers/hermes.py": HERMES.format(pkg="parsers"),
        # the same last name, other contents: not the new home of serve.helpers
        "mvhost/helpers.py": "def trim(s):\n    return s\n\n\ndef shout(s):\n    return s\n",
        # defines Handler, but was there already on 1.0: not where old_api went
        "mvhost/api.py": "class Handler:\n    pass\n",
        # serve.lora split: most of its names in manager, which only imports Adapter
        "mvhost/serve/adapter.py": "class Adapter:\n    pass\n",
        "mvhost/serve/manager.py": "from mvhost.serve.adapter import Adapter\n\n\nclass Manager:\n    pass\n\n\nclass Cache:\n    pass\n",
    },
}
CLIENT = """\
from mvhost.serve.cli_args import FrontendArgs, make_arg_parser
from mvhost.serve.parsers import ParserManager
from mvhost.serve.helpers import trim
from mvhost.serve.old_api import Handler
from mvhost.serve.lora import Adapter


def run():
    return FrontendArgs, make_arg_parser, ParserManager, trim, Handler, Adapter
"""


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


@pytest.fixture()
def layout(tmp_path: Path) -> Path:
    for version, files in HOSTS.items():
        _write(tmp_path / "mvhost" / version, files)
    _write(tmp_path / "client", {"mvclient/__init__.py": "", "mvclient/run.py": CLIENT})
    return tmp_path


def _scan(root: Path) -> ScanResult:
    return scan(
        str(root / "client"),
        str(root / "mvhost" / "2.0"),
        baseline=str(root / "mvhost" / "1.0"),
        host="mvhost",
    )


def test_a_module_that_moved_whole_is_proposed_where_its_names_went(layout: Path):
    by_line = {f.line: f for f in _scan(layout).findings}
    args = by_line[1]
    assert args.rule == "moved-symbol" and "mvhost.common.cli_args" in args.message, args
    assert args.fix.safety == "unsafe" and ("new", "mvhost.common.cli_args") in args.fix.params
    parsers = by_line[2]
    assert parsers.rule == "moved-symbol" and parsers.fix.safety == "unsafe", parsers
    assert ("new", "mvhost.parsers") in parsers.fix.params


def test_a_module_of_the_same_name_or_one_already_there_is_no_new_home(layout: Path):
    by_line = {f.line: f for f in _scan(layout).findings}
    # helpers: another module of that name; old_api: api.py was there on 1.0; lora: split, and
    # the module with most of its names only imports the one the client reads
    for line in (3, 4, 5):
        assert by_line[line].rule == "missing-symbol", by_line[line]
        assert by_line[line].fix.safety == "manual" and "mvhost.api" not in by_line[line].message


def test_the_unsafe_move_rewrites_the_imports_and_re_scans_clean(layout: Path):
    from driftcheck.fixes.run import fix

    fix(
        str(layout / "client"),
        str(layout / "mvhost" / "2.0"),
        baseline=str(layout / "mvhost" / "1.0"),
        host="mvhost",
        apply=True,
        unsafe=True,
    )
    text = (layout / "client" / "mvclient" / "run.py").read_text()
    assert "from mvhost.common.cli_args import FrontendArgs, make_arg_parser" in text
    assert "from mvhost.parsers import ParserManager" in text
    assert {f.line for f in _scan(layout).findings} == {3, 4, 5}
