"""Bad input and a broken environment: one ``driftcheck: error:`` line, exit code 2, no
traceback. A damaged client file is skipped, not fatal."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import OFFLINE_PIP_ENV, assert_one_error_line, build_wheel

# -- specs -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["vllm>=", "--against", "vllm==0.16.0"], "unsupported package spec 'vllm>='"),
        (["speculators==0.3.0", "--against", "vllm>="], "invalid version range '>=' in 'vllm>='"),
        (["speculators==0.3.0", "--against", "vllm=="], "no version after '=='"),
        (["speculators==0.3.0", "--against", "vllm==0.16.*"], "wildcard version"),
        (["speculators==0.3.0", "--against", "vllm==latest"], "invalid version 'latest'"),
        (["spec ulators==0.3.0", "--against", "vllm==0.16.0"], "invalid package name"),
        (["==0.3.0", "--against", "vllm==0.16.0"], "missing package name"),
        (["/nonexistent/driftcheck/dir", "--against", "vllm==0.16.0"], "no such directory"),
        (["./missing-1.0-py3-none-any.whl", "--against", "vllm==0.16.0"], "no such file"),
        (["x" * 5000 + "/y", "--against", "vllm==0.16.0"], "bad path"),
    ],
)
def test_bad_spec_is_one_line(cli, args, needle):
    assert_one_error_line(cli("scan", *args), needle)


def test_path_to_a_plain_file_is_refused(cli, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("hello")
    assert_one_error_line(
        cli("scan", str(notes), "--against", "vllm==0.16.0"), "not a directory or a wheel"
    )


def test_click_usage_errors_are_one_line(cli):
    assert_one_error_line(cli("scan"), "Missing argument 'CLIENT'")
    assert_one_error_line(cli("scan", "x", "--format", "xml"), "'--format'")
    assert_one_error_line(cli("--no-such-option"), "No such option")
    assert_one_error_line(cli("no-such-command"), "No such command")


def test_unwritable_output_is_one_line(cli, tiny_project, tmp_path):
    out = tmp_path / "missing-dir" / "report.json"
    assert_one_error_line(cli(*tiny_project.scan_args("-o", str(out))), "Could not open file")


def test_subprocess_bad_spec_has_no_traceback(cli_subprocess):
    result = cli_subprocess("scan", "vllm>=", "--against", "vllm==0.16.0")
    assert_one_error_line(result, "unsupported package spec")


# -- client files that cannot be analysed ------------------------------------------------------


def test_syntax_error_file_is_skipped_and_the_rest_scanned(cli, tiny_project):
    (tiny_project.client / "myclient" / "bad.py").write_text(
        "import tinyhost\n\ndef broken(:\n    pass\n"
    )
    result = cli(*tiny_project.scan_args("--format", "json"))
    assert result.exception is None
    assert result.exit_code == 1, result.stderr  # the finding in good.py, not 2
    data = json.loads(result.stdout)
    assert [s["file"] for s in data["skipped"]] == ["myclient/bad.py"]
    assert "syntax error" in data["skipped"][0]["reason"]
    assert [f["file"] for f in data["findings"]] == ["myclient/good.py"]

    text = cli(*tiny_project.scan_args())
    assert text.exit_code == 1
    assert "skipped myclient/bad.py" in text.stdout + text.stderr


def test_unreadable_files_are_skipped(cli, tiny_project):
    pkg = tiny_project.client / "myclient"
    (pkg / "dangling.py").symlink_to(pkg / "does-not-exist.py")
    os.mkfifo(pkg / "fifo.py")  # would block a naive read forever
    result = cli(*tiny_project.scan_args("--format", "json"))
    assert result.exit_code == 1, result.stderr
    skipped = {s["file"]: s["reason"] for s in json.loads(result.stdout)["skipped"]}
    assert "cannot read" in skipped["myclient/dangling.py"]
    assert "not a regular file" in skipped["myclient/fifo.py"]


def test_file_without_read_permission_is_skipped(cli, tiny_project, monkeypatch):
    secret = tiny_project.client / "myclient" / "secret.py"
    secret.write_text("import tinyhost\n")
    secret.chmod(0)
    if os.geteuid() == 0:
        # root reads files whatever their mode: refuse the read as the kernel would for a user.
        read_bytes = Path.read_bytes

        def refused(self: Path) -> bytes:
            if self == secret:
                raise PermissionError(13, "Permission denied", str(self))
            return read_bytes(self)

        monkeypatch.setattr(Path, "read_bytes", refused)
    try:
        result = cli(*tiny_project.scan_args("--format", "json"))
    finally:
        secret.chmod(0o644)
    assert result.exit_code == 1, result.stderr
    skipped = {s["file"]: s["reason"] for s in json.loads(result.stdout)["skipped"]}
    assert "Permission denied" in skipped["myclient/secret.py"]


def test_client_without_python_files_is_one_line(cli, tiny_project, tmp_path):
    empty = tmp_path / "empty-client"
    empty.mkdir()
    (empty / "README").write_text("nothing here")
    result = cli("scan", str(empty), "--against", str(tiny_project.host_v2))
    assert_one_error_line(result, "no Python files")


# -- archives ------------------------------------------------------------------------------


def test_truncated_wheel_is_one_line(cli, tiny_project, tmp_path):
    wheel = build_wheel(
        tmp_path / "myclient-0.1-py3-none-any.whl",
        {"myclient/__init__.py": "import tinyhost\n"},
        name="myclient",
        version="0.1",
    )
    data = wheel.read_bytes()
    wheel.write_bytes(data[: len(data) // 2])
    result = cli("scan", str(wheel), "--against", str(tiny_project.host_v2))
    assert_one_error_line(result, "corrupt or unreadable archive", wheel.name)


def test_wheel_with_unsafe_member_names_is_scanned_without_them(cli, tiny_project, tmp_path):
    wheel = build_wheel(
        tmp_path / "myclient-0.1-py3-none-any.whl",
        {
            "myclient/__init__.py": "",
            "myclient/good.py": "from tinyhost.core import make\n\nmake(1, b=2)\n",
        },
        name="myclient",
        version="0.1",
        raw_members={"../evil.py": b"import tinyhost\n", "/abs/evil.py": b"import tinyhost\n"},
    )
    result = cli(
        "scan",
        str(wheel),
        "--against",
        str(tiny_project.host_v2),
        "--baseline",
        str(tiny_project.host_v1),
        "--format",
        "json",
    )
    assert result.exit_code == 1, result.stderr
    data = json.loads(result.stdout)
    assert {s["file"] for s in data["skipped"]} == {"../evil.py", "/abs/evil.py"}
    assert all(s["reason"] == "unsafe member name" for s in data["skipped"])
    assert [f["file"] for f in data["findings"]] == ["myclient/good.py"]
    assert not (tmp_path.parent / "evil.py").exists()


# -- fetching ------------------------------------------------------------------------------


def test_no_network_and_empty_cache_is_one_line(cli_subprocess, tmp_path):
    env = {**OFFLINE_PIP_ENV, "DRIFTCHECK_CACHE_DIR": str(tmp_path / "cache")}
    result = cli_subprocess("scan", "speculators==0.3.0", "--against", "vllm==0.16.0", env=env)
    assert_one_error_line(result, "no network", "vllm==0.16.0", "not in the cache")


def test_unusable_cache_folder_is_one_line(cli, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("DRIFTCHECK_CACHE_DIR", str(blocker / "cache"))
    result = cli("scan", "speculators==0.3.0", "--against", "vllm==0.16.0")
    assert_one_error_line(result, "cache folder", "DRIFTCHECK_CACHE_DIR")


@pytest.mark.network
def test_unknown_package_is_one_line(cli, tiny_project):
    result = cli("scan", str(tiny_project.client), "--against", "driftcheck-no-such-pkg-xyz==1.0")
    assert_one_error_line(result, "unknown package 'driftcheck-no-such-pkg-xyz'")


@pytest.mark.network
def test_unknown_version_lists_the_nearest(cli, tiny_project):
    result = cli("scan", str(tiny_project.client), "--against", "vllm==0.0.999")
    line = assert_one_error_line(result, "vllm has no release 0.0.999", "nearest: ")
    nearest = line.split("nearest: ", 1)[1].split(" (latest", 1)[0].split(", ")
    assert 2 <= len(nearest) <= 4, line
    assert all(v[0].isdigit() for v in nearest), line


def test_everything_raised_on_these_paths_is_a_driftcheck_error(tmp_path):
    """The library raises DriftcheckError (never a bare OSError/BadZipFile) for bad input."""
    from driftcheck.errors import DriftcheckError
    from driftcheck.sources.specs import parse_spec
    from driftcheck.sources.trees import open_archive

    for text in ("vllm>=", "", "x==", "a b", "\0", "/nonexistent/x", "x" * 5000 + "/y"):
        with pytest.raises(DriftcheckError):
            parse_spec(text)
    for blob in (b"", b"PK\x03\x04garbage", b"\x1f\x8b\x08garbage"):
        for suffix in (".whl", ".tar.gz"):
            bad = tmp_path / f"bad{suffix}"
            bad.write_bytes(blob)
            with pytest.raises(DriftcheckError):
                open_archive(bad).files()
    with pytest.raises(DriftcheckError):
        open_archive(Path(tmp_path / "missing.whl"))
