"""``[tool.driftcheck]`` in the client's pyproject.toml: honoured, overridden by flags, and strict
about keys (a misspelled key fails with one line that names it)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import assert_one_error_line, run_cli

from driftcheck.config import Config, config_for, find_pyproject, is_excluded, load_config
from driftcheck.errors import UsageError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

SETTINGS = """\
[tool.driftcheck]
host = "minihost"
against = "../minihost-2.0"
baseline = "../minihost-1.0"
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """miniclient with both minihost versions beside it; the cwd is an unrelated folder, so
    relative paths in the settings must be read relative to the pyproject.toml."""
    for version in ("1.0", "2.0"):
        shutil.copytree(FIXTURES / "hosts" / "minihost" / version, tmp_path / f"minihost-{version}")
    proj = tmp_path / "proj"
    shutil.copytree(FIXTURES / "clients" / "miniclient", proj)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    return proj


def _configure(proj: Path, extra: str = "", base: str = SETTINGS) -> None:
    (proj / "pyproject.toml").write_text(base + extra)


def _scan(proj: Path, *args: str) -> tuple[int, dict]:
    result = run_cli("scan", str(proj), "--format", "json", "--quiet", *args)
    assert result.exception is None, repr(result.exception)
    assert result.exit_code in (0, 1), result.stderr
    return result.exit_code, json.loads(result.stdout)


def _rules(data: dict) -> set[str]:
    return {f["rule"] for f in data["findings"]}


# -- honoured -------------------------------------------------------------------------------------


def test_settings_are_honoured(project: Path):
    _configure(project)
    code, data = _scan(project)
    assert code == 1
    assert data["host"] == {
        "name": "minihost",
        "baseline": "1.0",
        "baseline_source": "given",
        "target": "2.0",
    }
    assert len(data["findings"]) == 11


def test_flags_override_settings(project: Path):
    _configure(project, base=SETTINGS.replace("minihost-2.0", "minihost-1.0"))
    code, data = _scan(project)
    assert (code, data["findings"]) == (0, [])  # baseline == target: nothing changed
    code, data = _scan(project, "--against", str(project.parent / "minihost-2.0"))
    assert code == 1 and len(data["findings"]) == 11


def test_disable(project: Path):
    _configure(project, 'disable = ["call-signature", "moved-symbol"]\n')
    _, data = _scan(project)
    assert _rules(data) == {"missing-symbol", "return-semantics", "attribute-missing"}
    _, data = _scan(project, "--disable", "return-semantics,attribute-missing")
    assert _rules(data) == {"missing-symbol", "moved-symbol", "call-signature"}


def test_rule_folders(project: Path):
    """``rules = [...]`` adds rule folders (relative to the pyproject.toml) beside the built-in
    rules; ``--rules`` replaces them; their ids are ids ``disable`` accepts."""
    mine = project.parent / "myrules"
    shutil.copytree(FIXTURES / "fix_rules" / "minihost", mine / "minihost")
    from_folder = {"engine-describe-rename", "load-items-unwrap"}
    _configure(project)
    _, data = _scan(project)
    assert not _rules(data) & from_folder
    _configure(project, 'rules = ["../myrules"]\n')
    _, data = _scan(project)
    assert from_folder <= _rules(data)
    empty = project.parent / "empty-rules"
    empty.mkdir()
    _, data = _scan(project, "--rules", str(empty))  # the flag wins over the settings
    assert not _rules(data) & from_folder
    _configure(project, 'rules = ["../myrules"]\ndisable = ["load-items-unwrap"]\n')
    _, data = _scan(project)
    assert from_folder & _rules(data) == {"engine-describe-rename"}
    _configure(project, 'disable = ["load-items-unwrap"]\n')  # not a known id without them
    assert_one_error_line(run_cli("scan", str(project)), "unknown id 'load-items-unwrap'")


def test_exclude(project: Path):
    _configure(project, 'exclude = ["miniclient/calls.py", "miniclient/symbols.py"]\n')
    _, data = _scan(project)
    assert {f["file"] for f in data["findings"]} == {
        "miniclient/returns.py",
        "miniclient/runner.py",
    }
    _, data = _scan(project, "--exclude", "miniclient/r*.py")
    assert {f["file"] for f in data["findings"]} == {"miniclient/calls.py", "miniclient/symbols.py"}


def test_fail_on(project: Path):
    """Only a warning is left (find_item() may now return None): fail-on decides the exit code."""
    (project / "miniclient" / "returns.py").write_text(
        "from minihost.core import find_item\n\n\n"
        "def gained_none() -> str:\n"
        '    return find_item("widget").name\n'
    )
    only_returns = (
        'exclude = ["miniclient/calls.py", "miniclient/symbols.py", "miniclient/runner.py"]\n'
    )
    _configure(project, only_returns)
    code, data = _scan(project)
    assert [f["severity"] for f in data["findings"]] == ["warning"]
    assert code == 0  # default: error
    _configure(project, only_returns + 'fail-on = "warning"\n')
    assert _scan(project)[0] == 1
    assert _scan(project, "--fail-on", "error")[0] == 0


def test_every_path_setting_is_relative_to_its_file(project: Path):
    """From an unrelated cwd, ``accepted = "accepted.toml"`` (a bare file name) is the file beside
    the settings; ``--accepted accepted.toml`` (a flag) stays relative to the cwd (near-miss)."""
    _configure(project)
    recorded = project / "accepted.toml"
    done = run_cli("scan", str(project), "--write-baseline", str(recorded), "--quiet")
    assert done.exit_code == 0, done.stderr
    (Path.cwd() / "accepted.toml").write_text("version = 1\n")  # the cwd's: accepts nothing
    _configure(project, 'accepted = "accepted.toml"\n')
    code, data = _scan(project)
    assert (code, data["accepted_file"], len(data["accepted"])) == (0, str(recorded), 11)
    code, data = _scan(project, "--accepted", "accepted.toml")
    assert (code, data["accepted_file"], len(data["findings"])) == (1, "accepted.toml", 11)


def test_a_bare_name_beside_the_settings_is_ambiguous_as_on_the_command_line(project: Path):
    """``against = "hostdir"`` with a folder ``hostdir`` beside the settings: a package name or
    that folder? One line, as ``scan hostdir`` says in that folder; ``./hostdir`` is the folder
    (from any cwd), and a bare name with no such folder stays a package name (near-miss)."""
    shutil.copytree(FIXTURES / "hosts" / "minihost" / "2.0", project / "hostdir")
    _configure(
        project, 'against = "hostdir"\n', base=SETTINGS.replace('against = "../minihost-2.0"\n', "")
    )
    assert_one_error_line(run_cli("scan", str(project)), "'against'", "./hostdir")
    _configure(
        project,
        'against = "./hostdir"\n',
        base=SETTINGS.replace('against = "../minihost-2.0"\n', ""),
    )
    code, data = _scan(project)
    assert code == 1 and data["host"]["target"] == "2.0"
    cfg = load_config(project / "pyproject.toml")
    assert cfg.against == str(project / "hostdir")
    (project / "pyproject.toml").write_text('[tool.driftcheck]\nagainst = "otherhost"\n')
    assert load_config(project / "pyproject.toml").against == "otherhost"


def test_settings_of_a_package_dir_client_come_from_the_project_above(project: Path):
    _configure(project)
    code, data = _scan(project / "miniclient")
    assert code == 1 and data["host"]["target"] == "2.0"


def test_config_option_reads_a_standalone_file(project: Path, tmp_path: Path):
    """``--config FILE`` with the keys at the top level; it wins over the client's pyproject."""
    _configure(project, 'disable = ["call-signature"]\n')
    other = tmp_path / "driftcheck.toml"
    other.write_text(SETTINGS.replace("[tool.driftcheck]\n", "").replace("../", "./"))
    code, data = _scan(project, "--config", str(other))
    assert code == 1 and "call-signature" in _rules(data)


def test_pyproject_without_the_table_is_no_configuration(project: Path):
    _configure(project, base='[project]\nname = "miniclient"\nversion = "0.1"\n')
    result = run_cli("scan", str(project), "--quiet")
    # no host named anywhere: the usual usage error, not a configuration error
    assert_one_error_line(result, "name the host")


def test_a_release_has_no_user_configuration(project: Path, monkeypatch: pytest.MonkeyPatch):
    _configure(project, 'colour = "red"\n')
    monkeypatch.chdir(project)  # a bad pyproject.toml in the cwd is not the release's
    assert config_for("somepkg==1.0") == Config()
    assert config_for("somepkg") == Config()


# -- strict -------------------------------------------------------------------------------------


def test_misspelled_key_fails_naming_it(project: Path):
    _configure(project, 'fail_on = "warning"\n')
    line = assert_one_error_line(run_cli("scan", str(project)), "'fail_on'", "'fail-on'")
    assert "[tool.driftcheck]" in line and "pyproject.toml" in line


def test_unknown_key_fails_and_lists_the_known_ones(project: Path):
    _configure(project, 'colour = "red"\n')
    assert_one_error_line(run_cli("scan", str(project)), "unknown key 'colour'", "exclude")


@pytest.mark.parametrize(
    ("extra", "needles"),
    [
        ('disable = "call-signature"\n', ("'disable'", "list of strings")),
        ("exclude = [1]\n", ("'exclude'", "list of strings")),
        ("accepted = 3\n", ("'accepted'", "a string")),
        ('fail-on = "fatal"\n', ("'fail-on'", "error")),
        ('disable = ["call-signatures"]\n', ("'call-signatures'", "'call-signature'")),
        ("host = \n", ("invalid TOML", "pyproject.toml")),
    ],
)
def test_bad_values_fail_with_one_line(project: Path, extra: str, needles: tuple[str, ...]):
    _configure(project, extra)
    assert_one_error_line(run_cli("scan", str(project)), *needles)


def test_unknown_rule_on_the_command_line(project: Path):
    _configure(project)
    line = assert_one_error_line(
        run_cli("scan", str(project), "--disable", "nope"), "--disable", "unknown id 'nope'"
    )
    assert "valid ids: " in line and "call-signature" in line  # the valid ones are listed


def test_missing_config_file(project: Path):
    result = run_cli("scan", str(project), "--config", str(project / "nope.toml"))
    assert_one_error_line(result, "nope.toml")


# -- pieces ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rel", "globs", "excluded"),
    [
        ("pkg/a.py", ["pkg/a.py"], True),
        ("pkg/a.py", ["pkg/b.py"], False),
        ("pkg/legacy/a.py", ["pkg/legacy"], True),
        ("pkg/legacy/a.py", ["pkg/legacy/"], True),
        ("pkg/legacy_tools/a.py", ["pkg/legacy"], False),
        ("pkg/sub/tests/test_a.py", ["*/tests"], True),
        ("pkg/sub/test_a.py", ["*test_*.py"], True),
        ("pkg/a.py", [], False),
    ],
)
def test_is_excluded(rel: str, globs: list[str], excluded: bool):
    assert is_excluded(rel, globs) is excluded


def test_find_pyproject_stops_at_the_repository_root(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text("[tool.driftcheck]\n")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "src" / "pkg").mkdir(parents=True)
    assert find_pyproject(repo / "src" / "pkg") is None
    (repo / "pyproject.toml").write_text("")
    assert find_pyproject(repo / "src" / "pkg") == repo / "pyproject.toml"


def test_load_config_reads_paths_relative_to_the_file(tmp_path: Path):
    path = tmp_path / "pyproject.toml"
    path.write_text(
        '[tool.driftcheck]\nagainst = "vllm==0.16.0"\nbaseline = "../old"\n'
        'accepted = "ci/accepted.toml"\n'
    )
    cfg = load_config(path)
    assert cfg.against == "vllm==0.16.0"  # not a path: unchanged
    assert cfg.baseline == str(tmp_path / "../old")
    assert cfg.accepted == tmp_path / "ci" / "accepted.toml"
    assert (cfg.path, cfg.root) == (path, tmp_path)


def test_load_config_of_a_non_table(tmp_path: Path):
    path = tmp_path / "pyproject.toml"
    path.write_text('[tool]\ndriftcheck = "on"\n')
    with pytest.raises(UsageError, match="must be a table"):
        load_config(path)
