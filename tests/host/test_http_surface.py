"""The static HTTP-surface reader on our own hosts (issue 17, item 1).

``fixtures/hosts/webhost`` 1.0 keeps its routes in one module, 2.0 splits them into
``api/*/api_router.py`` files attached by functions the app builder calls (its README lists every
difference). Near-misses come first: what must NOT be read as conditional, routed or a flag.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from driftcheck.http import HttpSurface, http_surface

HOST = Path(__file__).resolve().parents[2] / "fixtures" / "hosts" / "webhost"


def _surface(path: Path, name: str = "webhost") -> HttpSurface:
    from driftcheck.host.load import load_host
    from driftcheck.sources.specs import parse_spec

    return http_surface(load_host(parse_spec(str(path), default_name=name)))


@pytest.fixture(scope="module")
def old() -> HttpSurface:
    return _surface(HOST / "1.0")


@pytest.fixture(scope="module")
def new() -> HttpSurface:
    return _surface(HOST / "2.0")


# -- near-misses ------------------------------------------------------------------------------


def test_a_guard_around_something_else_does_not_make_later_routes_conditional(new) -> None:
    sleep = new.route("POST", "/sleep")
    assert sleep is not None and sleep.condition is None and not sleep.flags


def test_try_except_import_is_not_a_condition_and_prefixes_apply(old, new) -> None:
    for surface in (old, new):
        stats = surface.route("GET", "/admin/stats")
        assert stats is not None and stats.condition is None
        assert surface.route("GET", "/stats") is None


def test_routers_nothing_includes_and_other_apps_are_not_the_servers(old, new) -> None:
    for surface in (old, new):
        paths = {r.path for r in surface.routes}
        assert "/experimental/echo" not in paths
        assert "/demo/generate" not in paths
        assert surface.app == "webhost.server:build_app"


def test_a_benchmarks_parser_is_not_the_servers(old, new) -> None:
    for surface in (old, new):
        assert surface.flag("--num-prompts") is None
    assert new.flag("--max-batch") is None  # only bench.py still has it in 2.0


def test_env_condition_in_both_shapes(old, new) -> None:
    for surface in (old, new):  # 1.0: module-level if; 2.0: early return in attach_router
        debug = surface.route("GET", "/debug/state")
        assert debug is not None
        assert debug.condition == "envs.WEBHOST_DEV_MODE"
        assert debug.env == ("WEBHOST_DEV_MODE",) and debug.flags == ()


def test_unchanged_routes_read_the_same(old, new) -> None:
    for surface in (old, new):
        chat = surface.route("POST", "/v1/chat")
        assert chat.request == "webhost.protocol.ChatRequest"
        assert [(s.kind, s.model) for s in chat.responses] == [
            ("model", "webhost.protocol.GenerateResponse")
        ]
        messages = surface.model(chat.request).fields["messages"]
        assert messages.required and messages.model == "webhost.protocol.Message"
        assert surface.model("webhost.protocol.Message") is not None
        health = surface.route("GET", "/health")
        assert [s.kind for s in health.responses] == ["empty"]


# -- what changed -----------------------------------------------------------------------------


def test_routes_of_each_version(old, new) -> None:
    common = {
        ("GET", "/admin/stats"),
        ("GET", "/debug/state"),
        ("GET", "/health"),
        ("POST", "/reset_cache"),
        ("POST", "/sleep"),
        ("POST", "/v1/chat"),
        ("POST", "/v1/embed"),
        ("POST", "/v1/tokenize"),
    }
    assert {(r.method, r.path) for r in old.routes} == common | {("POST", "/v1/generate")}
    assert {(r.method, r.path) for r in new.routes} == common | {("POST", "/v1/generations")}
    assert new.route("POST", "/v1/generations").handler.endswith("api_router.generations")


def test_route_moved_under_a_flag(old, new) -> None:
    assert old.route("POST", "/reset_cache").condition is None
    moved = new.route("POST", "/reset_cache")
    assert moved.condition == "args.enable_cache_admin"
    assert moved.flags == ("--enable-cache-admin",)
    assert new.flag("--enable-cache-admin").dest == "enable_cache_admin"


def test_request_fields(old, new) -> None:
    before = old.model("webhost.protocol.GenerateRequest").fields
    after = new.model("webhost.protocol.GenerateRequest").fields
    assert "stop_words" in before and "stop_words" not in after
    assert "max_tokens" in before and "max_new_tokens" in after and "max_tokens" not in after
    assert not before["model"].required and after["model"].required
    assert before["prompt"].required and after["prompt"].required
    ids = new.model("webhost.protocol.GenerateRequest").field_named("prompt_token_ids")
    assert ids is not None and ids.name == "prompt_ids" and not ids.required


def test_extra_is_inherited_and_overridden(old, new) -> None:
    assert old.model("webhost.protocol.TokenizeRequest").extra == "allow"
    assert new.model("webhost.protocol.TokenizeRequest").extra == "forbid"
    assert old.model("webhost.protocol.GenerateResponse").extra is None


def test_a_union_alias_is_one_model(new) -> None:
    embed = new.model(new.route("POST", "/v1/embed").request)
    assert embed.alternatives == (
        "webhost.protocol.EmbedTextRequest",
        "webhost.protocol.EmbedIdsRequest",
    )
    assert {n: f.required for n, f in embed.fields.items()} == {
        "text": False,
        "input_ids": False,
        "normalize": False,
    }


def test_response_shapes(old, new) -> None:
    def shapes(surface, path):
        return [(s.kind, s.model, s.keys) for s in surface.route("POST", path).responses]

    assert shapes(old, "/v1/tokenize") == [("keys", None, ("tokens", "count"))]
    assert shapes(new, "/v1/tokenize") == [("keys", None, ("tokens",))]
    assert shapes(old, "/sleep") == [("keys", None, ("status",))]
    assert shapes(new, "/sleep") == [("empty", None, ())]
    generate = "webhost.protocol.GenerateResponse"
    assert shapes(old, "/v1/generate") == [("stream", None, ()), ("model", generate, ())]
    assert "token_ids" in old.model(generate).fields
    assert "token_ids" not in new.model(generate).fields


def test_flags(old, new) -> None:
    assert old.flag("--disable-log-requests") is not None
    assert new.flag("--disable-log-requests") is None
    assert old.flag("-b").name == "--max-batch" and new.flag("-b").name == "--max-batch-size"
    assert new.flag("--max_batch_size").name == "--max-batch-size"
    assert new.flag("--max-batch-size=4").name == "--max-batch-size"
    assert old.flag("--legacy-tokenizer").deprecated is None
    assert "Deprecated" in new.flag("--legacy-tokenizer").deprecated
    assert old.flag("--root-path").deprecated is None
    assert "Deprecated" in new.flag("--root-path").deprecated
    assert old.flag("--legacy-tokenizer").type == "bool"
    assert old.flag("--legacy-tokenizer").default == "False"
    assert new.flag("--port").default == "8000" and new.flag("--port").type == "int"


def test_boolean_dataclass_flags_are_negatable_others_not(new) -> None:
    assert new.flag("--no-disable-docs").name == "--disable-docs"
    assert new.flag("--no-port") is None
    assert new.flag("--no-legacy-tokenizer") is None  # store_true: no --no- form


def test_json_round_trip(old, new) -> None:
    for surface in (old, new):
        data = json.loads(json.dumps(surface.to_json()))
        assert HttpSurface.from_json(data) == surface


# -- condition forms, one tiny host per row -----------------------------------------------------

_BUILDER = """
from fastapi import FastAPI
from h import envs
from h.extra import router


def build_app(args):
    app = FastAPI()
{body}
    return app
"""

_EXTRA = """
from fastapi import APIRouter

router = APIRouter()


@router.get("/x")
async def x():
    return {{"x": 1}}
"""

CONDITIONS = [
    # (body of build_app, expected condition, flags, env)
    ("app.include_router(router)", None, (), ()),
    ("if args.verbose:\n    print('hi')\napp.include_router(router)", None, (), ()),
    ("try:\n    app.include_router(router)\nexcept ImportError:\n    pass", None, (), ()),
    ("for _ in range(1):\n    app.include_router(router)", None, (), ()),
    (
        "if not envs.H_DEV:\n    return app\napp.include_router(router)",
        "envs.H_DEV",
        (),
        ("H_DEV",),
    ),
    ("if args.enable_x:\n    app.include_router(router)", "args.enable_x", ("--enable-x",), ()),
    (
        "if getattr(args, 'enable_y', False):\n    app.include_router(router)",
        "getattr(args, 'enable_y', False)",
        ("--enable-y",),
        (),
    ),
    ("if not args.disable_z:\n    app.include_router(router)", "not args.disable_z", (), ()),
    (
        "if args.a:\n    pass\nelse:\n    app.include_router(router)",
        "not args.a",
        (),
        (),
    ),
    (
        "if envs.H_A or args.enable_b:\n    app.include_router(router)",
        "envs.H_A or args.enable_b",
        ("--enable-b",),
        ("H_A",),
    ),
    (
        "if os.environ.get('H_C') == '1':\n    app.include_router(router)",
        "os.environ.get('H_C') == '1'",
        (),
        ("H_C",),
    ),
]


@pytest.mark.parametrize(("body", "condition", "flags", "env"), CONDITIONS)
def test_condition_forms(tmp_path: Path, body, condition, flags, env) -> None:
    pkg = tmp_path / "h"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "envs.py").write_text("H_DEV = False\n")
    (pkg / "extra.py").write_text(textwrap.dedent(_EXTRA))
    code = "import os\n" + _BUILDER.format(body=textwrap.indent(body, "    "))
    (pkg / "server.py").write_text(code)
    surface = _surface(tmp_path, "h")
    route = surface.route("GET", "/x")
    assert route is not None
    assert (route.condition, route.flags, route.env) == (condition, flags, env)


def _package(root: Path, name: str, files: dict[str, str]) -> HttpSurface:
    """The HTTP surface of a host package written to ``root/name`` from ``files``."""
    (root / name).mkdir()
    for rel, text in files.items():
        (root / name / rel).write_text(text)
    return _surface(root, name)


def test_a_mount_serves_paths_below_it(tmp_path: Path) -> None:
    init = (
        "from fastapi import FastAPI\nfrom starlette.routing import Mount\n\n\n"
        "def build_app(args):\n    app = FastAPI()\n"
        "    metrics = Mount('/metrics', object())\n    app.routes.append(metrics)\n"
        "    app.mount('/static', object())\n\n    @app.get('/ok')\n    async def ok():\n"
        "        return None\n\n    return app\n"
    )
    surface = _package(tmp_path, "m", {"__init__.py": init})
    assert surface.route("GET", "/metrics/x").method == "MOUNT"
    assert surface.route("GET", "/static").path == "/static"
    assert surface.route("GET", "/staticx") is None
    assert [s.kind for s in surface.route("GET", "/ok").responses] == ["empty"]


# -- the command ------------------------------------------------------------------------------


def test_routes_command(tmp_path: Path) -> None:
    from driftcheck.cli import main

    runner = CliRunner()
    text = runner.invoke(main, ["routes", str(HOST / "2.0")])
    assert text.exit_code == 0, text.output
    assert "only if  args.enable_cache_admin  [--enable-cache-admin]" in text.output
    assert "request  GenerateRequest (required: model, prompt, extra=allow)" in text.output
    assert "--disable-docs / --no-disable-docs" in text.output
    data = runner.invoke(main, ["routes", str(HOST / "2.0"), "--format", "json", "--path", "/v1"])
    assert data.exit_code == 0
    parsed = json.loads(data.output)
    assert {r["path"] for r in parsed["routes"]} == {
        "/v1/chat",
        "/v1/embed",
        "/v1/generations",
        "/v1/tokenize",
    }
    bad = runner.invoke(main, ["routes", str(tmp_path / "missing")])
    assert bad.exit_code == 2 and "Traceback" not in bad.output


DEPRECATION_TEXTS = [
    # near-misses first: "deprecated" about something else, or not yet
    ("Whether to allow deprecated quantization methods.", False),
    ("Enable deprecated Prometheus metrics that have been hidden since 0.9.", False),
    ("Replaced by --x, and will be deprecated when PCP is fully supported.", False),
    ("Number of tokens per batch.", False),
    ("[DEPRECATED] Disable logging requests.", True),
    ("(Deprecated) Maximum size of extra vocabulary.", True),
    ("Priority of IR ops. Deprecated: vLLM IR is being removed.", True),
    ("This option is deprecated in favor of --y.", True),
    ("Deprecated and will be removed in v0.12.", True),
]


@pytest.mark.parametrize(("text", "deprecated"), DEPRECATION_TEXTS)
def test_what_says_a_flag_is_deprecated(text: str, deprecated: bool) -> None:
    from driftcheck.http.flags_syntax import says_deprecated

    assert says_deprecated(text) is deprecated


def test_the_surface_is_a_snapshot_fact() -> None:
    """Read once per release: the tree's fact store keeps it as plain JSON, and a later process
    (a fresh HostAPI over the same store) rebuilds it from there without reading source."""
    from driftcheck.host.api import HostAPI
    from driftcheck.sources.specs import parse_spec
    from driftcheck.sources.trees import open_tree

    store: dict[str, object] = {}
    computed: list[str] = []

    def with_store(tree):
        def fact(key, compute):
            if key not in store:
                computed.append(key)
                store[key] = json.loads(json.dumps(compute()))
            return store[key]

        tree.fact = fact
        return tree

    spec = parse_spec(str(HOST / "2.0"), default_name="webhost")
    first = http_surface(HostAPI(tree=with_store(open_tree(spec)), name="webhost", version="2.0"))
    tree = with_store(open_tree(spec))
    read = tree.read_text

    def no_source(rel: str) -> str:
        if rel.endswith(".py"):
            pytest.fail(f"read {rel} again")
        return read(rel)

    tree.read_text = no_source  # type: ignore[method-assign]
    second = http_surface(HostAPI(tree=tree, name="webhost", version="2.0"))
    assert [k for k in computed if k.startswith("http-surface")] == [computed[0]]
    assert second == first and second.route("POST", "/v1/generations") is not None


def test_a_router_passed_to_a_function_that_registers_on_it(tmp_path: Path) -> None:
    """``register_x_routes(router)`` under a guard: its routes carry the guard; the router's
    own routes do not."""
    pkg = tmp_path / "r"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "envs.py").write_text("R_DEV = False\n")
    (pkg / "extra.py").write_text(
        "def register_dev_routes(r):\n    @r.post('/dev')\n    async def dev():\n"
        "        return {'ok': True}\n"
    )
    (pkg / "server.py").write_text(
        "from fastapi import APIRouter, FastAPI\nfrom r import envs\n\nrouter = APIRouter()\n\n\n"
        "@router.get('/plain')\nasync def plain():\n    return None\n\n\n"
        "def build_app(args):\n    app = FastAPI()\n    if envs.R_DEV:\n"
        "        from r.extra import register_dev_routes\n\n        register_dev_routes(router)\n"
        "    app.include_router(router)\n    return app\n"
    )
    surface = _surface(tmp_path, "r")
    assert surface.route("GET", "/plain").condition is None
    dev = surface.route("POST", "/dev")
    assert dev is not None and dev.condition == "envs.R_DEV" and dev.env == ("R_DEV",)
    assert [s.keys for s in dev.responses] == [("ok",)]


_BY_NAME = """
from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

router = APIRouter()


class Base(BaseModel):
    model_config = ConfigDict(populate_by_name=True)


class Inherits(Base):
    top_k: int = Field(-1, alias="k")


class Overrides(Base):
    model_config = {"populate_by_name": False}
    top_k: int = Field(-1, alias="k")


class Legacy(BaseModel):
    class Config:
        allow_population_by_field_name = True

    top_k: int = Field(-1, alias="k")


class Plain(BaseModel):
    top_k: int = Field(-1, alias="k")


@router.post("/inherits")
async def inherits(req: Inherits): ...


@router.post("/overrides")
async def overrides(req: Overrides): ...


@router.post("/legacy")
async def legacy(req: Legacy): ...


@router.post("/plain")
async def plain(req: Plain): ...
"""


def test_a_model_that_takes_names_too_accepts_both_keys(tmp_path: Path) -> None:
    init = (
        "from fastapi import FastAPI\nfrom p.api import router\n\napp = FastAPI()\n"
        "app.include_router(router)\n"
    )
    surface = _package(tmp_path, "p", {"__init__.py": init, "api.py": _BY_NAME})
    keys = {
        path: set(surface.model(surface.route("POST", path).request).accepted())
        for path in ("/inherits", "/overrides", "/legacy", "/plain")
    }
    assert keys == {
        "/inherits": {"k", "top_k"},
        "/overrides": {"k"},
        "/legacy": {"k", "top_k"},
        "/plain": {"k"},
    }


# -- definitions parsed alone -----------------------------------------------------------------

HOSTCODE_MODULE = '''\
"""Top-level statements of every shape the index records."""
import os; LIMIT = 3
if os.environ.get("A"):
    @staticmethod
    def guarded(x):
        return x
else: FALLBACK = {
"multi": "line",
    }
try:
    class Config:
        \"\"\"Docs.\"\"\"
        size: int = 1
        def read(self):
            return """
text at column zero
"""
        async def fetch(self): ...
except ImportError:
    Config = None
class Config:  # the name bound again: this one counts
    def read(self, other):
        return other
async def main(args): await main(args)
x = y = Config()
'''


def test_definitions_parsed_alone_equal_the_modules_own(tmp_path: Path) -> None:
    """Each top-level definition (and a class's method) the index hands out is the statement a
    whole-module parse gives, with the same lines and columns, parsed once."""
    import ast

    from driftcheck.host.load import load_host
    from driftcheck.http.hostcode import HostCode, top_level
    from driftcheck.sources.specs import parse_spec

    pkg = tmp_path / "h"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "m.py").write_text(HOSTCODE_MODULE)
    code = HostCode(load_host(parse_spec(str(tmp_path), default_name="h")))
    whole: dict[str, ast.AST] = {}
    for stmt in top_level(ast.parse(HOSTCODE_MODULE).body):
        for target in getattr(stmt, "targets", []) + [getattr(stmt, "target", None)]:
            if isinstance(target, ast.Name):
                whole[target.id] = stmt
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            whole[stmt.name] = stmt
    defs = code.defs("h.m")
    assert sorted(defs) == sorted(whole)
    for name, stmt in whole.items():
        alone = defs[name]
        assert ast.dump(alone, include_attributes=True) == ast.dump(stmt, include_attributes=True)
        assert defs[name] is alone  # kept: the readers see one node per definition
    assert code.imports("h.m") == {"os": ("os", None)}
    method = code.resolve("h.m", "Config.read")
    assert method is not None and not isinstance(method, str)
    assert method.kind == "FunctionDef" and [a.arg for a in method.node.args.args] == [
        "self",
        "other",
    ]
    assert code.resolve_class("h.m", ast.Name("Config")) is not None
    assert code.method(code.resolve_class("h.m", ast.Name("Config")), "fetch") is None
