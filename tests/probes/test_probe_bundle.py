"""``driftcheck probe --bundle`` / ``--from-bundle``: pieces, manifest, corruption, and the
offline round trip, on small wheels built here (pip runs with ``--no-index``), plus one
network test that carries a real pair from the index."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import assert_one_error_line, run_cli

from driftcheck.probes.bundle.install import BASE_PTH, install_bundle
from driftcheck.probes.bundle.make import BundleRequest, make_bundle, read_have
from driftcheck.probes.bundle.pieces import (
    MANIFEST,
    BundleError,
    extract,
    parse_size,
    read_manifest,
    verify,
    write_pieces,
)
from driftcheck.probes.bundle.wheels import wheel_requires, write_wheel

REPO = Path(__file__).resolve().parents[2]
PY = f"{sys.version_info[0]}.{sys.version_info[1]}"


# -- sizes, pieces and the manifest ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("54M", 54 << 20),
        ("54MiB", 54 << 20),
        ("1.5G", 3 << 29),
        ("800K", 800 << 10),
        ("70000", 70000),
    ],
)
def test_piece_sizes(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["lots", "10", "1K"])
def test_piece_size_refused(text):
    with pytest.raises(BundleError, match="piece size"):
        parse_size(text)


def _files(tmp_path: Path) -> list[tuple[str, Path]]:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.bin").write_bytes(os.urandom(200_000))
    (src / "sub" / "b.txt").write_text("b\n" * 1000)
    (tmp_path / "one.whl").write_bytes(os.urandom(50_000))
    return [("tree", src), ("wheels/one.whl", tmp_path / "one.whl")]


def _cut(tmp_path: Path, limit: int = 70_000) -> tuple[Path, dict]:
    out = tmp_path / "out"
    out.mkdir()
    manifest = {"format": 1, **write_pieces(out, _files(tmp_path), limit)}
    (out / MANIFEST).write_text(json.dumps(manifest))
    return out, manifest


def test_pieces_cut_to_size_and_join_back(tmp_path):
    out, manifest = _cut(tmp_path)
    sizes = [p["bytes"] for p in manifest["pieces"]]
    assert len(sizes) >= 4 and max(sizes) <= 70_000 and all(s == 70_000 for s in sizes[:-1])
    assert sorted(p.name for p in out.glob("bundle.tar.*")) == [
        p["file"] for p in manifest["pieces"]
    ]
    verify(out, read_manifest(out))
    extract(out, manifest, tmp_path / "x")
    assert (tmp_path / "x" / "tree" / "a.bin").read_bytes() == (
        tmp_path / "src" / "a.bin"
    ).read_bytes()
    assert (tmp_path / "x" / "tree" / "sub" / "b.txt").read_text() == "b\n" * 1000
    assert (tmp_path / "x" / "wheels" / "one.whl").stat().st_size == 50_000


def test_same_files_same_pieces(tmp_path):
    members = _files(tmp_path)
    (tmp_path / "o1").mkdir()
    (tmp_path / "o2").mkdir()
    first = write_pieces(tmp_path / "o1", members, 100_000)
    os.utime(tmp_path / "one.whl", (1, 1))  # times and modes of this machine do not count
    assert write_pieces(tmp_path / "o2", members, 100_000) == first


def test_missing_piece_is_named(tmp_path):
    out, manifest = _cut(tmp_path)
    (out / "bundle.tar.002").unlink()
    with pytest.raises(BundleError, match=r"piece bundle\.tar\.002 is missing"):
        verify(out, manifest)


def test_short_piece_is_named(tmp_path):
    out, manifest = _cut(tmp_path)
    with (out / "bundle.tar.001").open("r+b") as f:
        f.truncate(1000)
    with pytest.raises(BundleError, match=r"piece bundle\.tar\.001 has 1000 of its 70000 bytes"):
        verify(out, manifest)


def test_damaged_piece_is_named(tmp_path):
    out, manifest = _cut(tmp_path)
    data = bytearray((out / "bundle.tar.000").read_bytes())
    data[600] ^= 0xFF
    (out / "bundle.tar.000").write_bytes(bytes(data))
    with pytest.raises(BundleError, match=r"piece bundle\.tar\.000 is damaged"):
        verify(out, manifest)


def test_pieces_of_another_bundle(tmp_path):
    out, manifest = _cut(tmp_path)
    manifest["whole"]["sha256"] = "0" * 64
    with pytest.raises(BundleError, match="do not make the bundle"):
        verify(out, manifest)


def test_manifest_missing_or_foreign(tmp_path):
    with pytest.raises(BundleError, match="no such folder"):
        read_manifest(tmp_path / "nowhere")
    with pytest.raises(BundleError, match="manifest.json: missing"):
        read_manifest(tmp_path)
    (tmp_path / MANIFEST).write_text(json.dumps({"format": 99}))
    with pytest.raises(BundleError, match="bundle format 99"):
        read_manifest(tmp_path)


# -- making a bundle offline from wheels built here ---------------------------------------------


@pytest.fixture
def index(tmp_path) -> Path:
    """A folder of wheels pip reads with ``--no-index --find-links``: a host, its two
    requirements (one large, which the other machine has) and a client."""
    idx = tmp_path / "index"
    write_wheel(idx, "hosty", "1.0", ["depa>=1"], {"hosty/__init__.py": b"X = 1\n"})
    write_wheel(idx, "hosty", "2.0", ["depa>=1"], {"hosty/__init__.py": b"X = 2\n"})
    write_wheel(idx, "depa", "1.2", ["bigdep>=2"], {"depa/__init__.py": b"A = 2\n"})
    write_wheel(
        idx,
        "bigdep",
        "3.0",
        [],
        {"bigdep/__init__.py": b"B = '%s'\n" % os.urandom(300_000).hex().encode()},
    )
    write_wheel(idx, "depb", "0.5", [], {"depb/__init__.py": b""})
    return idx


def _client(tmp_path: Path) -> Path:
    requires = ["hosty", 'depb; python_version > "3"', 'nothere; extra == "never"']
    files = {"clienty/__init__.py": b"import hosty\n"}
    return write_wheel(tmp_path / "client", "clienty", "0.1", requires, files)


def _request(tmp_path: Path, index: Path, **kw) -> BundleRequest:
    have = tmp_path / "have.txt"
    have.write_text("# pip list --format=freeze\nbigdep==3.0\nunrelated==1.0\n")
    fields = dict(
        client=str(_client(tmp_path)),
        host="hosty==1.0",
        folder=tmp_path / "bundle",
        piece_size=100_000,
        have=have,
        driftcheck=False,
        pip_args=["--no-index", "--find-links", str(index)],
    )
    return BundleRequest(**{**fields, **kw})


def test_make_bundle_carries_what_the_machine_lacks(tmp_path, index):
    patches = tmp_path / "patches"
    patches.mkdir()
    (patches / "one.patch").write_text("--- a/x\n+++ b/x\n")
    manifest = make_bundle(_request(tmp_path, index, patches=patches))
    out = tmp_path / "bundle"
    assert sorted(w["name"] for w in manifest["wheels"]) == ["depa", "depb", "hosty"]
    assert next(w for w in manifest["wheels"] if w["name"] == "hosty")["version"] == "1.0"
    assert manifest["provided"] == {"bigdep": "3.0"}  # resolved against, not carried
    assert manifest["client"] == "client/clienty-0.1-py3-none-any.whl"
    assert manifest["patches"] == ["patches/one.patch"]
    assert manifest["target"]["python"] == PY and manifest["bootstrap"] is None
    assert read_manifest(out) == manifest
    verify(out, manifest)
    readme = (out / "README.txt").read_text()
    assert "driftcheck probe --from-bundle . [probe options]" in readme
    extract(out, manifest, tmp_path / "x")
    assert sorted(p.name for p in (tmp_path / "x" / "wheels").iterdir()) == sorted(
        Path(w["file"]).name for w in manifest["wheels"]
    )


def test_excluded_package_is_resolved_against_and_left_out(tmp_path, index, machine):
    """depb is required by the client but excluded: no wheel of it, and the install there
    does not ask for it."""
    manifest = make_bundle(_request(tmp_path, index, exclude=["depb"]))
    assert sorted(w["name"] for w in manifest["wheels"]) == ["depa", "hosty"]
    assert manifest["excluded"] == {"depb": "0.5"}
    done = install_bundle(tmp_path / "bundle", tmp_path / "env", python=machine)
    code = "import hosty, depa, bigdep, importlib.util as u; print(u.find_spec('depb'))"
    got = subprocess.run([str(done.python), "-c", code], capture_output=True, text=True)
    assert got.stdout.strip() == "None", got.stderr


def test_bundle_folder_must_be_empty(tmp_path, index):
    (tmp_path / "bundle").mkdir()
    (tmp_path / "bundle" / "old").write_text("")
    with pytest.raises(BundleError, match="not an empty folder"):
        make_bundle(_request(tmp_path, index))


def test_have_lines_need_versions(tmp_path):
    have = tmp_path / "have.txt"
    have.write_text("torch==2.11.0+cu130\nNumPy==2.5.2\n")
    assert read_have(have) == {"torch": "2.11.0+cu130", "numpy": "2.5.2"}
    have.write_text("torch==2.11.0\nnumpy\n")
    with pytest.raises(BundleError, match=r"line 2: 'numpy' has no version"):
        read_have(have)


def test_unmet_requirement_fails_at_bundling(tmp_path, index):
    """The machine's bigdep 1.0 does not meet depa's bigdep>=2: pip says so here."""
    req = _request(tmp_path, index)
    assert req.have is not None
    req.have.write_text("bigdep==1.0\n")
    with pytest.raises(BundleError, match="pip download failed"):
        make_bundle(req)


def test_wheel_writer_reads_back(tmp_path):
    path = write_wheel(tmp_path, "Some.Name", "1.0", ["a>=1", "b; extra == 'x'"])
    assert path.name == "some_name-1.0-py3-none-any.whl"
    assert wheel_requires(path) == ("Some.Name", "1.0", ["a>=1", "b; extra == 'x'"])


# -- installing offline ---------------------------------------------------------------------


@pytest.fixture
def machine(tmp_path, index) -> Path:
    """The other machine's interpreter: a venv without pip that has bigdep 3.0."""
    venv = tmp_path / "machine"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    cmd = [sys.executable, "-m", "pip", "-q", "--python", str(venv / "bin" / "python")]
    cmd += ["install", "--no-index", str(index / "bigdep-3.0-py3-none-any.whl")]
    subprocess.run(cmd, check=True)
    return venv / "bin" / "python"


def test_install_offline_round_trip(tmp_path, index, machine):
    make_bundle(_request(tmp_path, index))
    seen: list[str] = []
    done = install_bundle(
        tmp_path / "bundle", tmp_path / "env", python=machine, progress=seen.append
    )
    assert not done.reused and done.host == "hosty==1.0" and done.client.is_file()
    code = "import hosty, depa, depb, bigdep; print(hosty.X, bigdep.__file__)"
    got = subprocess.run([str(done.python), "-c", code], capture_output=True, text=True, check=True)
    x, where = got.stdout.split()
    assert x == "1" and where.startswith(str(tmp_path / "machine"))  # the machine's own bigdep
    assert any("offline" in line for line in seen)
    again = install_bundle(tmp_path / "bundle", tmp_path / "env", python=machine)
    assert again.reused and again.python == done.python


def test_install_names_what_neither_has(tmp_path, index):
    """This interpreter has no bigdep, and the bundle left it to the machine."""
    make_bundle(_request(tmp_path, index))
    with pytest.raises(BundleError, match=r"bigdep.*neither .* nor the bundle has it"):
        install_bundle(tmp_path / "bundle", tmp_path / "env")


def test_install_refuses_another_python(tmp_path, index):
    make_bundle(_request(tmp_path, index, python_version="3.4"))
    with pytest.raises(BundleError, match=rf"the bundle is for Python 3\.4, .* is Python {PY}"):
        install_bundle(tmp_path / "bundle", tmp_path / "env")


def test_install_refuses_a_folder_in_use(tmp_path, index):
    make_bundle(_request(tmp_path, index))
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "mine").write_text("")
    with pytest.raises(BundleError, match="is not empty"):
        install_bundle(tmp_path / "bundle", tmp_path / "env")


def test_install_names_a_damaged_piece(tmp_path, index, machine):
    make_bundle(_request(tmp_path, index, piece_size=65_536))
    last = sorted((tmp_path / "bundle").glob("bundle.tar.*"))[-1]
    last.write_bytes(last.read_bytes()[:-1] + b"!")
    with pytest.raises(BundleError, match=rf"piece {last.name} is damaged"):
        install_bundle(tmp_path / "bundle", tmp_path / "env", python=machine)
    assert not (tmp_path / "env").exists()


def test_venv_sees_the_machine_first_its_own_wheels_before(tmp_path, index, machine):
    make_bundle(_request(tmp_path, index))
    done = install_bundle(tmp_path / "bundle", tmp_path / "env", python=machine)
    pth = next(done.root.glob(f"venv/lib/python*/site-packages/{BASE_PTH}"))
    assert str(tmp_path / "machine") in pth.read_text()


# -- the command line and the bootstrap ------------------------------------------------------


def test_cli_bundle_needs_one_release(tmp_path):
    result = run_cli("probe", "x==1", "--bundle", str(tmp_path / "b"), "--host", "installed")
    assert_one_error_line(result, "--host vllm==X")
    result = run_cli("probe", "--from-bundle", str(tmp_path / "nowhere"), "-q")
    assert_one_error_line(result, "no such folder")
    result = run_cli("probe", "--from-bundle", str(tmp_path), "--releases", "0.11.0,0.16.0")
    assert_one_error_line(result, "the one release its bundle carries")
    result = run_cli("probe", "--bundle", str(tmp_path / "b"), "--host", "vllm==0.25.0")
    assert_one_error_line(result, "name the CLIENT to carry")


def test_cli_from_bundle_installs_then_probes(tmp_path, index, machine):
    make_bundle(_request(tmp_path, index))
    env = str(tmp_path / "env")
    result = run_cli("probe", "x==1", "--from-bundle", str(tmp_path / "bundle"), "-q")
    assert_one_error_line(result, "the bundle names its client")
    result = run_cli(
        "probe", "--from-bundle", str(tmp_path / "bundle"), "--bundle-env", env,
        "--env", str(machine), "-q",
    )  # fmt: skip
    # Installed, then handed to the probe with the bundle's client, for which it knows no
    # workload (it drives vLLM clients).
    assert_one_error_line(result, "no probe workload for clienty-0.1-py3-none-any.whl")
    assert (tmp_path / "env" / "installed.json").is_file()


def test_bootstrap_runs_on_the_standard_library_alone(tmp_path, index):
    """``python -m driftcheck.probes.bundle`` before anything is installed: no site packages."""
    make_bundle(_request(tmp_path, index))
    (tmp_path / "bundle" / "bundle.tar.000").unlink()
    code = (
        f"import sys; sys.path.insert(0, {str(REPO)!r}); "
        "from driftcheck.probes.bundle.__main__ import main; "
        f"sys.exit(main([{str(tmp_path / 'bundle')!r}, '--bundle-env', {str(tmp_path / 'e')!r}]))"
    )
    proc = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        f"driftcheck probe --from-bundle: piece bundle.tar.000 is missing from {tmp_path / 'bundle'}: "
        "copy it there"
    )


# -- a real pair from the index ------------------------------------------------------------------


@pytest.mark.network
@pytest.mark.slow
def test_real_pair_round_trip_offline(tmp_path):
    """markdown-it-py (client) on mdurl (host), with driftcheck's own wheel and requirements,
    for this Python: bundled from the index, then, on a bare interpreter that has only
    packaging, installed with --no-index and run by the bootstrap."""
    from importlib import metadata

    version = metadata.version("packaging")
    machine = tmp_path / "machine"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(machine)], check=True)
    cmd = [sys.executable, "-m", "pip", "-q", "--python", str(machine / "bin" / "python")]
    subprocess.run([*cmd, "install", f"packaging=={version}"], check=True)
    have = tmp_path / "have.txt"
    have.write_text(f"packaging=={version}\n")
    req = BundleRequest(
        client="markdown-it-py==3.0.0",
        host="mdurl==0.1.2",
        folder=tmp_path / "bundle",
        piece_size=parse_size("1M"),
        have=have,
    )
    manifest = make_bundle(req)
    names = {w["name"] for w in manifest["wheels"]}
    assert {"mdurl", "click", "libcst"} <= names and "packaging" not in names
    assert manifest["provided"] == {"packaging": version}
    assert manifest["bootstrap"]["file"].startswith("driftcheck-")
    assert len(manifest["pieces"]) > 1
    env = tmp_path / "env"
    boot = subprocess.run(
        [sys.executable, "-m", "driftcheck.probes.bundle", ".", "--bundle-env", str(env),
         "--env", str(machine / "bin" / "python"), "-q"],
        cwd=tmp_path / "bundle",
        env={**os.environ, "PYTHONPATH": manifest["bootstrap"]["file"], "PIP_NO_INDEX": "1"},
        capture_output=True,
        text=True,
    )  # fmt: skip
    # Installed offline, then the installed driftcheck's probe, with the bundle's client, for
    # which it knows no workload (it drives vLLM clients).
    assert boot.returncode == 2, boot.stderr
    assert "no probe workload for markdown_it_py" in boot.stderr.strip().splitlines()[-1]
    code = "import mdurl, driftcheck, packaging; print(driftcheck.__file__, packaging.__file__)"
    py = env / "venv" / "bin" / "python"
    got = subprocess.run(
        [str(py), "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    own, base = got.stdout.split()
    assert own.startswith(str(env)) and base.startswith(str(machine))
