"""Source trees, the release cache and the pip fetch logic."""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest
from conftest import build_wheel
from packaging.specifiers import SpecifierSet

from driftcheck.errors import FetchError, SourceError, UsageError
from driftcheck.sources import fetch as releases
from driftcheck.sources.fetch import fetch_release
from driftcheck.sources.metadata import DistMetadata
from driftcheck.sources.specs import PackageSpec, parse_spec
from driftcheck.sources.trees import DirectoryTree, TarTree, ZipTree, open_archive

# -- specs -------------------------------------------------------------------------------------


def test_parse_release_installed_and_paths(tmp_path):
    assert parse_spec("vllm==0.16.0") == PackageSpec("release", name="vllm", version="0.16.0")
    assert parse_spec("vllm[cpu]==0.16.0") == PackageSpec("release", name="vllm", version="0.16.0")
    assert parse_spec("==0.16.0", default_name="vllm").name == "vllm"
    assert parse_spec("vllm") == PackageSpec("installed", name="vllm")
    assert parse_spec("vllm@installed") == PackageSpec("installed", name="vllm")
    assert parse_spec(str(tmp_path)) == PackageSpec("directory", path=tmp_path.resolve())
    wheel = build_wheel(tmp_path / "w-1.0-py3-none-any.whl", {"w/__init__.py": ""}, name="w")
    assert parse_spec(str(wheel)) == PackageSpec("archive", path=wheel.resolve())


@pytest.mark.parametrize(
    "text",
    ["", "vllm>=", "vllm>=0.11", "vllm==", "vllm==0.*", "vllm===0.16", "vllm!=1", "a b", "-x"],
)
def test_parse_rejects(text):
    with pytest.raises(UsageError):
        parse_spec(text)


# -- metadata ----------------------------------------------------------------------------------


def test_pin_on_exact_and_range():
    md = DistMetadata(
        "speculators",
        "0.3.0",
        ['vllm==0.11.0; extra == "datagen"', "torch>=2"],
    )
    assert md.pin_on("vllm") == "0.11.0"
    assert DistMetadata("x", "1", ["vLLM>=0.10.2,<0.12"]).pin_on("vllm") == "0.10.2"
    assert DistMetadata("x", "1", ["not a requirement !!"]).pin_on("vllm") is None


def test_pin_range_is_the_range_with_the_lowest_bound():
    md = DistMetadata("x", "1", ['torch>=2.6; extra == "torch"', "torch>1.0,<3"])
    assert str(md.pin_range("torch")) == "<3,>1.0"
    assert md.pin_on("torch") == "1.0"
    assert DistMetadata("x", "1", ["vllm==0.11.0"]).pin_range("vllm") is None
    assert DistMetadata("x", "1", ["vllm"]).pin_range("vllm") is None


def test_a_range_baseline_is_the_oldest_release_the_index_offers(monkeypatch: pytest.MonkeyPatch):
    from driftcheck.host import load as hosts

    listing = ["2.10.0", "2.1.0", "1.13.1", "1.13.0"]  # newest first, as the index lists them
    monkeypatch.setattr("driftcheck.sources.versions.available_versions", lambda name: listing)
    monkeypatch.setattr("driftcheck.sources.fetch.cached_sha256", lambda name, version: None)
    assert hosts._oldest_allowed("torch", "1.0", SpecifierSet(">=1.0")) == "1.13.0"
    assert hosts._oldest_allowed("torch", "1.13.0", SpecifierSet(">1.13.0")) == "1.13.1"
    monkeypatch.setattr("driftcheck.sources.fetch.cached_sha256", lambda name, version: "abc")
    assert hosts._oldest_allowed("torch", "1.0", SpecifierSet(">=1.0")) == "1.0"


def test_a_range_baseline_without_the_index_is_the_lower_bound(monkeypatch: pytest.MonkeyPatch):
    from driftcheck.errors import FetchError
    from driftcheck.host import load as hosts

    def offline(name: str) -> list[str]:
        raise FetchError("cannot list the releases of torch (no network?)")

    monkeypatch.setattr("driftcheck.sources.versions.available_versions", offline)
    monkeypatch.setattr("driftcheck.sources.fetch.cached_sha256", lambda name, version: None)
    assert hosts._oldest_allowed("torch", "1.0", SpecifierSet(">=1.0")) == "1.0"


@pytest.mark.parametrize(
    "pyproject",
    [
        "not = [valid toml",
        "project = 3",
        '[project]\nname = 3\nversion = "1"',
        '[project]\nname = "x"\ndependencies = "vllm"\noptional-dependencies = 4',
        '[project]\nname = "x"\n[project.optional-dependencies]\nextra = "vllm==1"',
    ],
)
def test_odd_pyproject_never_raises(tmp_path, pyproject):
    (tmp_path / "pyproject.toml").write_text(pyproject)
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "__init__.py").write_text("")
    md = DirectoryTree(tmp_path).metadata
    assert md is None or md.name == "x"


# -- trees -------------------------------------------------------------------------------------


def test_zip_tree_skips_unsafe_member_names(tmp_path):
    wheel = build_wheel(
        tmp_path / "p-1.0-py3-none-any.whl",
        {"p/__init__.py": "X = 1\n"},
        name="p",
        raw_members={
            "../evil.py": b"bad",
            "p/../../evil2.py": b"bad",
            "/etc/evil3.py": b"bad",
            "..\\evil4.py": b"bad",
        },
    )
    tree = ZipTree(wheel)
    assert sorted(tree.python_files()) == ["p/__init__.py"]
    assert {name for name, _ in tree.skipped} == {
        "../evil.py",
        "p/../../evil2.py",
        "/etc/evil3.py",
        "..\\evil4.py",
    }
    assert all(reason == "unsafe member name" for _, reason in tree.skipped)
    assert tree.read_text("p/__init__.py") == "X = 1\n"
    assert tree.metadata is not None and tree.metadata.name == "p"


def test_zip_tree_truncated_is_source_error(tmp_path):
    wheel = build_wheel(tmp_path / "p-1.0-py3-none-any.whl", {"p/__init__.py": "X = 1\n" * 99})
    wheel.write_bytes(wheel.read_bytes()[:-40])
    with pytest.raises(SourceError) as info:
        ZipTree(wheel)
    message = str(info.value)
    assert "\n" not in message and "corrupt or unreadable archive" in message


def test_zip_member_with_damaged_data_is_source_error(tmp_path):
    payload = ("def f():\n    return 1\n" * 200).encode()
    wheel = build_wheel(tmp_path / "p-1.0-py3-none-any.whl", {"p/mod.py": payload})
    blob = bytearray(wheel.read_bytes())
    with zipfile.ZipFile(wheel) as zf:
        info = zf.getinfo("p/mod.py")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    for i in range(start + 5, start + 25):  # scribble over the deflate stream
        blob[i] ^= 0xFF
    wheel.write_bytes(bytes(blob))
    tree = ZipTree(wheel)  # the central directory is intact
    with pytest.raises(SourceError) as exc:
        tree.read_bytes("p/mod.py")
    assert "cannot read p/mod.py" in str(exc.value)
    with pytest.raises(SourceError):
        tree.read_bytes("p/absent.py")


def _sdist(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_tar_tree_strips_top_and_src_and_skips_unsafe(tmp_path):
    sdist = _sdist(
        tmp_path / "p-1.0.tar.gz",
        {
            "p-1.0/src/p/__init__.py": b"X = 1\n",
            "p-1.0/PKG-INFO": b"Metadata-Version: 2.1\nName: p\nVersion: 1.0\n",
            "../evil.py": b"bad",
        },
    )
    tree = open_archive(sdist)
    assert isinstance(tree, TarTree)
    assert tree.python_files() == ["p/__init__.py"]
    assert tree.skipped == [("../evil.py", "unsafe member name")]
    assert tree.metadata is not None and tree.metadata.version == "1.0"


PKG_INFO = b"Metadata-Version: 2.1\nName: p\nVersion: 1.0\n"


@pytest.mark.parametrize(
    ("members", "expected"),
    [
        # near misses first: a top-level package stays where it is, and so do folders named
        # lib/ or src/ inside it or beside it that hold no package of their own
        ({"p/__init__.py": b"", "p/lib/__init__.py": b"", "lib/notes.txt": b""}, ["p/__init__.py", "p/lib/__init__.py"]),
        ({"p/__init__.py": b"", "src/p/__init__.py": b""}, ["p/__init__.py", "src/p/__init__.py"]),
        # lib/ (SQLAlchemy 1.3), found by the layout, its egg-info naming the package
        (
            {"lib/p/__init__.py": b"", "lib/p/orm.py": b"", "test/__init__.py": b"",
             "lib/P.egg-info/top_level.txt": b"p\n"},
            ["p/__init__.py", "p/orm.py", "test/__init__.py"],
        ),
        # a folder of another name, named by setup.py, setup.cfg or pyproject.toml
        ({"code/p/__init__.py": b"", "setup.py": b"setup(package_dir={'': 'code'})"}, ["p/__init__.py", "setup.py"]),
        ({"code/p/__init__.py": b"", "setup.cfg": b"[options]\npackage_dir =\n    =code\n"}, ["p/__init__.py"]),
        (
            {"code/p/__init__.py": b"",
             "pyproject.toml": b'[tool.setuptools.package-dir]\n"" = "code"\n'},
            ["p/__init__.py"],
        ),
    ],
)  # fmt: skip
def test_tar_tree_finds_the_folder_that_holds_the_packages(tmp_path, members, expected):
    files = {f"p-1.0/{k}": v for k, v in members.items()} | {"p-1.0/PKG-INFO": PKG_INFO}
    tree = open_archive(_sdist(tmp_path / "p-1.0.tar.gz", files))
    assert tree.python_files() == expected
    assert "p" in tree.top_level_packages()


def test_tar_tree_roots_come_from_the_egg_info(tmp_path):
    files = {
        "p-1.0/lib/p/__init__.py": b"",
        "p-1.0/lib/P.egg-info/top_level.txt": b"p\n",
        "p-1.0/test/__init__.py": b"",
        "p-1.0/PKG-INFO": PKG_INFO,
    }
    assert open_archive(_sdist(tmp_path / "p-1.0.tar.gz", files)).top_level_packages() == ["p"]


def test_tar_tree_truncated_is_source_error(tmp_path):
    sdist = _sdist(tmp_path / "p-1.0.tar.gz", {"p-1.0/p/__init__.py": b"X = 1\n" * 5000})
    blob = sdist.read_bytes()
    sdist.write_bytes(blob[: len(blob) // 2])
    with pytest.raises(SourceError):
        TarTree(sdist)


def test_directory_tree_layouts(tmp_path):
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "__init__.py").write_text("")
    (tmp_path / "src" / "pkg" / "__pycache__").mkdir()
    (tmp_path / "src" / "pkg" / "__pycache__" / "x.py").write_text("")
    tree = DirectoryTree(tmp_path)
    assert tree.python_files() == ["pkg/__init__.py"]
    inner = DirectoryTree(tmp_path / "src" / "pkg")
    assert inner.python_files() == ["pkg/__init__.py"]


def test_directory_tree_unreadable_entries(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "gone.py").symlink_to(tmp_path / "nowhere.py")
    tree = DirectoryTree(tmp_path)
    assert "pkg/gone.py" in tree.python_files()
    with pytest.raises(SourceError, match="cannot read"):
        tree.read_bytes("pkg/gone.py")


# -- the cache ---------------------------------------------------------------------------------


@pytest.fixture
def fake_pip(monkeypatch, tmp_path):
    """Replace the pip download with one that writes a tiny wheel; counts the calls."""
    monkeypatch.setenv("DRIFTCHECK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DRIFTCHECK_NO_RANGED", "1")  # the index knows no tinypkg
    calls: list[tuple[str, str]] = []

    def download(name, version, dest, *, quiet):
        calls.append((name, version))
        build_wheel(
            dest / f"{name}-{version}-py3-none-any.whl",
            {f"{name}/__init__.py": "VALUE = 1\n"},
            name=name,
            version=version,
        )

    monkeypatch.setattr(releases, "_pip_download", download)
    return calls


def _entry(archive: Path) -> dict:
    return json.loads((archive.parent / "entry.json").read_text())


def test_cache_hit_does_not_refetch(fake_pip):
    first = fetch_release("tinypkg", "1.0")
    again = fetch_release("tinypkg", "1.0")
    assert first == again and fake_pip == [("tinypkg", "1.0")]
    assert _entry(first)["sha256"] == releases._sha256(first)


def test_truncated_cached_archive_is_refetched(fake_pip):
    archive = fetch_release("tinypkg", "1.0")
    good = archive.read_bytes()
    archive.write_bytes(good[: len(good) // 2])
    again = fetch_release("tinypkg", "1.0")
    assert len(fake_pip) == 2
    assert again.read_bytes() == good
    assert ZipTree(again).python_files() == ["tinypkg/__init__.py"]


def test_cached_archive_with_wrong_sha_is_discarded(fake_pip, tmp_path):
    folder = tmp_path / "cache" / "archives" / "tinypkg" / "1.0"
    planted = build_wheel(
        folder / "tinypkg-1.0-py3-none-any.whl", {"tinypkg/__init__.py": "PLANTED = 1\n"}
    )
    (folder / "entry.json").write_text(json.dumps({"file": planted.name, "sha256": "0" * 64}))
    (folder / ".download-leftover").mkdir()  # what a killed run leaves behind
    archive = fetch_release("tinypkg", "1.0")
    assert fake_pip == [("tinypkg", "1.0")]
    assert "VALUE = 1" in ZipTree(archive).read_text("tinypkg/__init__.py")
    assert sorted(p.name for p in folder.iterdir()) == ["entry.json", archive.name]


@pytest.mark.parametrize(
    "entry", ["{not json", '{"file": "../../../etc/passwd", "sha256": "x"}', "[]", '{"file": 3}']
)
def test_damaged_entry_json_is_refetched(fake_pip, tmp_path, entry):
    folder = tmp_path / "cache" / "archives" / "tinypkg" / "1.0"
    folder.mkdir(parents=True)
    (folder / "entry.json").write_text(entry)
    fetch_release("tinypkg", "1.0")
    assert fake_pip == [("tinypkg", "1.0")]


@pytest.mark.network
def test_real_tiny_release_refetched_after_truncation(monkeypatch, tmp_path):
    monkeypatch.setenv("DRIFTCHECK_CACHE_DIR", str(tmp_path / "cache"))
    archive = fetch_release("six", "1.16.0")
    digest = _entry(archive)["sha256"]
    assert "six.py" in ZipTree(archive).files()
    archive.write_bytes(archive.read_bytes()[:100])
    again = fetch_release("six", "1.16.0")
    assert releases._sha256(again) == digest
    assert "six.py" in ZipTree(again).files()


# -- pip's answers -----------------------------------------------------------------------------


def _fake_run(monkeypatch, answers: list[tuple[int, str]], files: list[str] | None = None):
    """Make subprocess.run answer with ``answers`` in turn (returncode, stderr), the index
    list ``files`` for the release (None: it does not say)."""
    seen: list[list[str]] = []
    monkeypatch.setattr(releases, "_release_files", lambda name, version: files)

    def run(cmd, **kwargs):
        seen.append(cmd)
        code, err = answers[len(seen) - 1]
        return subprocess.CompletedProcess(cmd, code, stdout="", stderr=err)

    monkeypatch.setattr(releases.subprocess, "run", run)
    return seen


def _not_found(versions: str) -> tuple[int, str]:
    return (
        1,
        f"ERROR: Could not find a version that satisfies the requirement x==9 "
        f"(from versions: {versions})\nERROR: No matching distribution found for x==9\n",
    )


def test_unknown_version_is_decided_on_all_attempts(monkeypatch, tmp_path):
    seen = _fake_run(
        monkeypatch, [_not_found("1.0, 2.0"), _not_found("1.0, 2.0"), _not_found("0.5")], files=[]
    )
    with pytest.raises(FetchError) as info:
        releases._pip_download("x", "1.5", tmp_path, quiet=True)
    assert len(seen) == 3
    assert str(info.value) == "x has no release 1.5; nearest: 0.5, 1.0, 2.0 (latest: 2.0)"


def test_version_only_as_sdist_is_not_called_unknown(monkeypatch, tmp_path):
    build_failure = (1, "error: subprocess-exited-with-error\nERROR: Failed to build x\n")
    seen = _fake_run(
        monkeypatch,
        [_not_found("2.0"), _not_found("2.0"), build_failure, build_failure],
        files=["x-1.0.tar.gz"],
    )
    with pytest.raises(FetchError) as info:
        releases._pip_download("x", "1.0", tmp_path, quiet=True)
    assert "no release" not in str(info.value)
    assert "ERROR: Failed to build x" in str(info.value)
    assert len(seen) == 4  # the sdist built in isolation too: then the build error is said


def test_an_sdist_pip_cannot_prepare_here_is_prepared_in_an_isolated_build(monkeypatch, tmp_path):
    """SQLAlchemy 1.3.17 in a fresh venv: its setup.py needs ``wheel`` (``invalid command
    'bdist_wheel'``), which pip's isolated build environment brings."""
    no_wheel = (1, "error: invalid command 'bdist_wheel'\nerror: metadata-generation-failed\n")
    seen = _fake_run(
        monkeypatch,
        [_not_found("2.0"), _not_found("2.0"), no_wheel, (0, "")],
        files=["x-1.0.tar.gz"],
    )
    releases._pip_download("x", "1.0", tmp_path, quiet=True)
    assert "--no-build-isolation" in seen[2]
    assert "--no-binary=:all:" in seen[3] and "--no-build-isolation" not in seen[3]


def test_a_release_without_a_wheel_for_this_python_takes_an_older_ones(monkeypatch, tmp_path):
    """numpy 1.15 to 1.21 on this Python: wheels for older Pythons only; such a wheel carries
    the same sources and is taken before the sdist (whose setup.py may not run here)."""
    files = [
        "x-1.0-cp37-cp37m-win_amd64.whl",
        "x-1.0-cp38-cp38-manylinux1_x86_64.whl",
        "x-1.0-cp38-cp38-win_amd64.whl",
        "x-1.0.tar.gz",
    ]
    seen = _fake_run(monkeypatch, [_not_found("2.0"), _not_found("2.0"), (0, "")], files=files)
    releases._pip_download("x", "1.0", tmp_path, quiet=True)
    assert len(seen) == 3
    assert seen[2][seen[2].index("--python-version") + 1] == "3.8"
    assert seen[2][seen[2].index("--platform") + 1] == "manylinux1_x86_64"


def test_without_the_index_s_file_list_every_older_python_is_tried_before_the_sdist(
    monkeypatch, tmp_path
):
    older = [_not_found("2.0")] * len(releases._OLDER_PYTHONS)
    seen = _fake_run(monkeypatch, [_not_found("2.0"), _not_found("2.0"), *older, (0, "")])
    releases._pip_download("x", "1.0", tmp_path, quiet=True)
    tried = [c[c.index("--python-version") + 1] for c in seen if "--python-version" in c]
    assert tried == releases._OLDER_PYTHONS and "3.6" in tried
    assert "--no-binary=:all:" in seen[-1]


def test_older_wheels_one_per_python_newest_first_linux_preferred():
    files = [
        "x-1.0-cp36-cp36m-macosx_10_9_x86_64.whl",
        "x-1.0-cp37-cp37m-win_amd64.whl",
        "x-1.0-cp37-cp37m-manylinux2010_x86_64.whl",
        "x-1.0-cp399-cp399-manylinux1_x86_64.whl",  # not older than this Python
        "x-1.0-py2.py3-none-any.whl",  # a pure wheel: this Python takes it already
        "x-1.0.tar.gz",
        "x-1.0-cp37-bad.whl",
    ]
    assert releases.older_wheels(files) == [
        ("3.7", "manylinux2010_x86_64"),
        ("3.6", "macosx_10_9_x86_64"),
    ]
    assert releases.older_wheels([]) == []


def test_sdist_only_package_is_not_called_unknown(monkeypatch, tmp_path):
    seen = _fake_run(monkeypatch, [_not_found("none"), _not_found("none"), (0, "")], files=[])
    releases._pip_download("x", "1.0", tmp_path, quiet=True)
    assert "--no-binary=:all:" in seen[-1]


def test_a_release_the_index_has_is_never_called_missing(monkeypatch, tmp_path):
    """A release whose files all exclude this Python (Requires-Python): pip lists it nowhere,
    the index has it."""
    _fake_run(monkeypatch, [_not_found("2.0")] * 3, files=["x-1.0.tar.gz"])
    with pytest.raises(FetchError) as info:
        releases._pip_download("x", "1.0", tmp_path, quiet=True)
    assert "no release" not in str(info.value)
    assert "pip found no file of x==1.0 it can use here (the index has x-1.0.tar.gz)" in str(
        info.value
    )


def test_unknown_package(monkeypatch, tmp_path):
    _fake_run(monkeypatch, [_not_found("none")] * 3, files=[])
    with pytest.raises(FetchError, match="unknown package 'x'"):
        releases._pip_download("x", "1.0", tmp_path, quiet=True)


def test_offline_is_reported_at_once(monkeypatch, tmp_path):
    refused = (
        1,
        "WARNING: Retrying ... NewConnectionError(... Failed to establish a new connection: "
        "[Errno 111] Connection refused)\n" + _not_found("none")[1],
    )
    seen = _fake_run(monkeypatch, [refused] * 3)
    with pytest.raises(FetchError, match="no network"):
        releases._pip_download("x", "1.0", tmp_path, quiet=True)
    assert len(seen) == 1


def test_untrusted_index_is_named(monkeypatch, tmp_path):
    ignored = (
        1,
        "WARNING: The repository located at mirror.invalid is not a trusted or secure host "
        "and is being ignored.\n" + _not_found("none")[1],
    )
    _fake_run(monkeypatch, [ignored] * 3, files=[])
    with pytest.raises(FetchError, match="ignored the package index mirror.invalid"):
        releases._pip_download("x", "1.0", tmp_path, quiet=True)


def test_pip_cannot_start(monkeypatch, tmp_path):
    def run(cmd, **kwargs):
        raise FileNotFoundError(2, "No such file or directory", cmd[0])

    monkeypatch.setattr(releases.subprocess, "run", run)
    with pytest.raises(FetchError, match="cannot run pip"):
        releases._pip_download("x", "1.0", tmp_path, quiet=True)


# -- real releases users have --------------------------------------------------------------------


@pytest.mark.network
@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "version", "module"),
    [
        # wheels only for Pythons older than this one; the sdist's setup.py does not run here
        ("numpy", "1.15.4", "numpy/core/numeric.py"),
        ("scipy", "1.8.0", "scipy/linalg/basic.py"),
        # an sdist whose package sits in lib/, and whose setup.py needs `wheel`
        ("SQLAlchemy", "1.3.17", "sqlalchemy/orm/session.py"),
    ],
)
def test_old_releases_are_read_whole(name: str, version: str, module: str):
    tree = open_archive(fetch_release(name, version))
    assert tree.exists(module)
    assert name.lower() in tree.top_level_packages()


@pytest.mark.network
def test_release_times_of_a_real_package():
    from driftcheck.sources.release_times import newest_before, release_times

    times = release_times("six")
    assert times["1.16.0"] < times["1.17.0"]
    assert newest_before(times, times["1.17.0"]) == "1.16.0"
