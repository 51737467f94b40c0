"""What a release's defaults make of a switch between implementations (host/switches.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import host_api_of

from driftcheck.host.api import Found, HostAPI
from driftcheck.host.switches import Selection, selection
from driftcheck.sources.trees import DirectoryTree

RUNNER = """
import importlib.util
import os
from dataclasses import dataclass, field

from pkg import envs

FAST = frozenset({"FastLM"})
HAS_LIB = importlib.util.find_spec("somelib") is not None


def on(value):
    if value is None:
        return None
    return bool(int(value))


@dataclass
class Config:
    paged: bool = True
    later: object = None
    boxed: bool = field(default=False)

    @property
    def fast(self) -> bool:
        chosen = on(os.getenv("PKG_FAST", None))
        if chosen is not None:
            return chosen
        items = []
        if HAS_LIB:
            items.append(1)
        if items:
            return False
        return any(a in FAST for a in self.model_config.architectures)


class Runner:
    def __init__(self, config: Config, other):
        self.from_env = envs.USE_X
        self.config = config
        if self.from_env:
            pass  # line 55: the arms below are read from here
        if config.fast:
            pass
"""
FILES = {
    "pkg/__init__.py": "",
    "pkg/envs.py": (
        "import os\n\n"
        "table = {'USE_X': lambda: bool(int(os.getenv('USE_X', '0')))}\n\n\n"
        "def __getattr__(name):\n"
        "    return table[name]()\n"
    ),
    "pkg/runner.py": RUNNER,
}


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> HostAPI:
    return host_api_of(tmp_path_factory.mktemp("switches"), FILES)


def _select(api: HostAPI, condition: str, arch: str = "SlowLM") -> Selection | None:
    owner = api.resolve("pkg.runner.Runner")
    assert isinstance(owner, Found)
    line = RUNNER.splitlines().index("    def __init__(self, config: Config, other):") + 2
    return selection(api, owner, line, condition, {"architectures": (arch,)})


def test_an_environment_flag_read_through_a_getattr_table(api: HostAPI):
    got = _select(api, "self.from_env")
    assert got is not None and not got.selected and got.settings == ("USE_X",)
    assert _select(api, "not self.from_env").paths == ((),)  # type: ignore[union-attr]


def test_a_literal_field_default_is_a_setting_the_caller_may_pass(api: HostAPI):
    got = _select(api, "config.paged")
    assert got is not None and got.paths == ((),)
    assert got.fields == (("pkg.runner.Config", "paged"),)
    assert _select(api, "config.boxed").paths == ()  # type: ignore[union-attr]  # field(default=)


def test_a_none_default_is_not_read_as_the_value(api: HostAPI):
    assert _select(api, "config.later") is None  # nothing decided: None is "filled in later"


def test_a_property_with_a_served_architecture_and_an_open_term(api: HostAPI):
    fast = _select(api, "config.fast", arch="FastLM")
    assert fast is not None and fast.settings == ("PKG_FAST",)
    # The appends under an open test make the list open: the way that selects assumes it empty.
    assert fast.paths == (("not items",),)
    slow = _select(api, "config.fast", arch="SlowLM")
    assert slow is not None and not slow.selected


def test_a_parameter_without_a_type_is_open(api: HostAPI):
    assert _select(api, "other.flag") is None


LOOPS = """
import os

FAST = frozenset({"FastLM"})


def listed(architectures):
    for a in architectures:
        if a in FAST:
            return True
    return False


class Runner:
    def __init__(self, model_config):
        self.fast = listed(model_config.architectures)
        if self.fast:
            pass
"""


def test_a_loop_that_returns_is_open_not_its_fall_through(tmp_path: Path):
    """``for ...: return True`` then ``return False``: the loop's return is not skipped."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "runner.py").write_text(LOOPS)
    api = HostAPI(tree=DirectoryTree(tmp_path), name="pkg", version="1.0")
    owner = api.resolve("pkg.runner.Runner")
    assert isinstance(owner, Found)
    line = LOOPS.splitlines().index("    def __init__(self, model_config):") + 2
    got = selection(api, owner, line, "self.fast", {"architectures": ("FastLM",)})
    assert got is not None and got.selected  # open, never "not selected"
