"""The clients file: what a line may be, and one clear error for a line that is none."""

from __future__ import annotations

import pytest
from conftest import assert_one_error_line, run_cli

from driftcheck.errors import UsageError
from driftcheck.matrix.clients import read_clients


def test_lines_comments_and_folders_relative_to_the_file(tmp_path):
    (tmp_path / "sub" / "pkg").mkdir(parents=True)
    (tmp_path / "localname").mkdir()
    listed = tmp_path / "sub" / "clients.txt"
    listed.write_text(
        "# clients\n\ntrl==0.19.0\nspeculators   # newest\n./pkg\n../localname\n"
        "  vllm-client == 1.2 \n"
    )
    got = read_clients(listed)
    assert [(c.kind, c.line, c.spec) for c in got] == [
        ("release", 3, "trl==0.19.0"),
        ("newest", 4, "speculators"),
        ("folder", 5, "./pkg"),
        ("folder", 6, "../localname"),
        ("release", 7, "vllm-client == 1.2"),
    ]
    assert got[2].path == (tmp_path / "sub" / "pkg").resolve()
    assert got[3].path == (tmp_path / "localname").resolve()
    assert (got[4].name, got[4].version) == ("vllm-client", "1.2")


def test_a_bare_name_is_a_name_even_beside_a_folder_of_that_name(tmp_path):
    # As for scan: a folder is written ./trl; a bare name never silently becomes a folder.
    (tmp_path / "trl").mkdir()
    (tmp_path / "c.txt").write_text("trl\n./trl\n")
    named, folder = read_clients(tmp_path / "c.txt")
    assert (named.kind, named.name, named.path) == ("newest", "trl", None)
    assert folder.kind == "folder" and folder.path == (tmp_path / "trl").resolve()


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("trl>=0.19", "is not a client"),
        ("trl==", "is not a client"),
        ("trl==abc", "'abc' is not a version"),
        ("./missing", "no such folder"),
        ("-bad name", "is not a client"),
    ],
)
def test_a_bad_line_is_named_with_its_number(tmp_path, line, needle):
    listed = tmp_path / "c.txt"
    listed.write_text(f"# ok\ntrl==0.19.0\n{line}\n")
    with pytest.raises(UsageError, match="line 3") as err:
        read_clients(listed)
    assert needle in str(err.value)


def test_a_client_listed_twice_or_none_at_all(tmp_path):
    listed = tmp_path / "c.txt"
    listed.write_text("trl==0.19.0\nTRL==0.19.0\n")
    with pytest.raises(UsageError, match="line 2: 'TRL==0.19.0' is already listed on line 1"):
        read_clients(listed)
    listed.write_text("# nothing\n\n")
    with pytest.raises(UsageError, match="lists no client"):
        read_clients(listed)


def test_the_cli_says_a_bad_line_in_one_line_and_exits_2(tmp_path):
    listed = tmp_path / "c.txt"
    listed.write_text("trl==0.19.0\n\nnot a client\n")
    db = tmp_path / "m.sqlite"
    result = run_cli(
        "matrix", "run", "--host", "vllm", "--releases", "0.16.0", "--clients", str(listed),
        "--db", str(db),
    )  # fmt: skip
    assert_one_error_line(result, "line 3", "'not a client' is not a client")
    assert not db.exists()  # nothing written for a run that could not start
