"""The client's HTTP uses, read statically: URLs, payload keys, response reads, the OpenAI SDK
data, and the command lines that start the host's server."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from driftcheck.client.gate_reader import GateReader
from driftcheck.client.http.calls import HttpCollector, Wrapper
from driftcheck.client.http.openai_sdk import openai_sdk, parse_sdk
from driftcheck.client.http.reads import ReadFinder
from driftcheck.client.http.urls import path_matches, url_path
from driftcheck.client.http.use import HttpUse
from driftcheck.client.index import ClientIndex, parse_module
from driftcheck.pipeline import scan

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
OAIHOST = FIXTURES / "hosts" / "webhost-client-tests"


def _uses(
    code: str, scripts: frozenset[str] = frozenset(), roots: set[str] | None = None
) -> list[HttpUse]:
    info = parse_module("client.mod", "client/mod.py", textwrap.dedent(code))
    index = ClientIndex()
    index.add_module(info)
    roots = roots or {"host"}
    reader = GateReader(index, roots, {"host"})
    wrappers: dict[str, Wrapper] = {}
    for _ in range(3):
        c = HttpCollector(info, index, reader, roots, wrappers, scripts=scripts)
        c.run()
        if not set(c.found_wrappers) - set(wrappers):
            break
        wrappers.update(c.found_wrappers)
    finder = ReadFinder(info, index, c.parents, c.node_gates)
    out = list(c.uses)
    for use, call, func, value in c.calls:
        if value is not None:
            out += finder.reads(use, call, func, value)
    return out


def _url(expr: str, prelude: str = "") -> tuple[str | None, bool]:
    info = parse_module("m", "m.py", f"{prelude}\nURL = {expr}\n")
    ClientIndex().add_module(info)
    value = info.tree.body[-1].value  # type: ignore[attr-defined]
    got = url_path(value, None, info)
    return got.path, got.foreign


@pytest.mark.parametrize(
    ("expr", "path", "foreign"),
    [
        ('"/v1/x"', "/v1/x", False),
        ('"http://localhost:8000/v1/x?y=1"', "/v1/x", False),
        ('f"{base}/v1/x"', "/v1/x", False),
        ("f\"{base.rstrip('/')}/v1/models/{name}\"", "/v1/models/{}", False),
        ('base_url + "/v1/x"', "/v1/x", False),
        ('base + "/v1/" + name', "/v1/{}", False),
        ('urljoin(base, "/v1/x")', "/v1/x", False),
        ("BASE + PATH", "/v1/p", False),
        ('f"http://{host}:{port}/v1/x"', "/v1/x", False),
        ('"https://api.github.com/repos/a/b"', None, True),
        ('f"{base}{path}"', None, False),
        ("make_url()", None, False),
    ],
)
def test_url_paths(expr: str, path: str | None, foreign: bool):
    prelude = 'from urllib.parse import urljoin\nBASE = "http://127.0.0.1:8000"\nPATH = "/v1/p"'
    assert _url(expr, prelude) == (path, foreign)


def test_path_templates_match_route_parameters():
    assert path_matches("/v1/models/{}", "/v1/models/{model_name}")
    assert path_matches("/v1/models/abc", "/v1/models/{model_name}")
    assert path_matches("/files/a/b", "/files/{path:path}")
    assert not path_matches("/v1/models", "/v1/models/{model_name}")
    assert not path_matches("/v1/model/x", "/v1/models/{model_name}")


def test_payload_keys_follow_the_dict():
    (use,) = _uses(
        """
        import httpx

        def go(base, tools):
            body = {"a": 1, **{"b": 2}}
            body["c"] = 3
            body.update(d=4)
            body.pop("a")
            if tools:
                body["tools"] = tools
            return httpx.post(f"{base}/v1/x", json=body)
        """
    )
    keys = [(op.op, op.key) for op in use.payload]
    assert keys == [("+", "a"), ("+", "b"), ("+", "c"), ("+", "d"), ("-", "a"), ("+", "tools")]
    assert use.payload_complete and use.symbol == "POST /v1/x"


def test_a_payload_from_elsewhere_is_incomplete():
    (use,) = _uses(
        """
        import requests

        def go(base, body):
            return requests.put(base + "/v1/x", json=dict(body))
        """
    )
    assert use.http_method == "PUT" and not use.payload_complete


def test_clients_methods_and_generic_requests():
    uses = _uses(
        """
        import aiohttp
        import httpx
        import requests

        SESSION = requests.Session()

        async def go(base):
            async with aiohttp.ClientSession() as s:
                await s.get(f"{base}/health")
            with httpx.Client() as c:
                c.request("DELETE", f"{base}/v1/x/1")
            SESSION.patch(f"{base}/v1/y", json={})
            other.post(f"{base}/v1/z")
        """
    )
    assert [u.symbol for u in uses] == ["GET /health", "DELETE /v1/x/1", "PATCH /v1/y"]
    assert [u.api for u in uses] == ["aiohttp", "httpx", "requests"]


def test_a_wrapper_whose_url_is_a_parameter_makes_its_callers_requests():
    uses = _uses(
        """
        import httpx

        _client = None

        def _post(url, *, json, timeout):
            return httpx.Client().post(url, json=json, timeout=timeout)

        def render(endpoint, messages):
            url = f"{endpoint}/v1/render"
            resp = _post(url, json={"messages": messages}, timeout=3)
            data = resp.json()
            if "token_ids" not in data:
                raise ValueError(data)
            return data["token_ids"]
        """
    )
    request, *reads = uses
    assert request.symbol == "POST /v1/render" and [k.key for k in request.payload] == ["messages"]
    assert {(r.field, r.optional, r.line) for r in reads} == {
        (("token_ids",), False, 13),  # the membership test raises when it is missing
        (("token_ids",), False, 15),
    }


def test_reads_with_defaults_are_optional_unless_the_client_raises():
    uses = _uses(
        """
        import httpx

        def go(base):
            data = httpx.get(f"{base}/v1/x").json()
            a = data.get("a")
            b = data.get("b")
            if b is None:
                raise KeyError("b")
            return data["c"]["d"], a, b
        """
    )
    reads = {r.field: r.optional for r in uses if r.kind == "http-read"}
    assert reads == {("a",): True, ("b",): False, ("c", "d"): False}


def test_openai_calls_map_to_routes_with_body_keys_and_result_reads():
    uses = _uses(
        """
        import asyncio
        import openai
        from openai.types import Completion

        async def go(client: openai.AsyncClient, ids):
            coro = client.completions.create(
                model="m", prompt=ids, extra_body={"return_token_ids": True}, timeout=3
            )
            res = await asyncio.wait_for(coro, timeout=3)
            return pick(res)

        def pick(res):
            if isinstance(res, Completion):
                ids = getattr(res.choices[0], "prompt_token_ids", None)
            else:
                ids = res.prompt_token_ids
            if not hasattr(res, "kv_transfer_params"):
                raise ValueError
            return ids
        """
    )
    request = uses[0]
    assert request.symbol == "POST /v1/completions" and request.api == "openai completions.create"
    assert [k.key for k in request.payload] == ["model", "prompt", "return_token_ids"]
    reads = {r.field: (r.optional, r.narrow and r.narrow[1]) for r in uses[1:]}
    assert reads == {
        ("choices", "[]", "prompt_token_ids"): (True, True),
        ("prompt_token_ids",): (False, False),
        ("kv_transfer_params",): (False, None),
    }
    assert request.returns and request.returns[0].startswith("openai.types")


def test_the_sdk_data_is_well_formed():
    sdk = openai_sdk()
    assert {"extra_body", "extra_headers", "extra_query", "timeout"} <= sdk.own_parameters
    assert sdk.body_parameter in sdk.own_parameters and sdk.default_prefix == "/v1"
    assert "openai.OpenAI" in sdk.clients and "openai.AsyncOpenAI" in sdk.clients
    for call, m in sdk.methods.items():
        assert m.call == call and m.method in ("GET", "POST", "DELETE")
        assert m.path.startswith("/") and m.returns, call
        assert all(r.startswith("openai.types.") for r in m.returns), call
        assert all(f"{{{p}}}" in m.path for p in m.path_parameters), call
    with pytest.raises(ValueError):
        parse_sdk('[[method]]\ncall = "x.create"\nmethod = "POST"\n')
    with pytest.raises(ValueError):
        parse_sdk('[[method]]\ncall = "x"\nmethod = "POST"\npath = "x"\n')


def test_an_sdk_client_built_for_another_machine_is_not_the_hosts():
    uses = _uses(
        """
        import openai

        def judge(prompt):
            client = openai.OpenAI(base_url="https://api.example.com/v1")
            return client.chat.completions.create(model="m", messages=[])

        def local(prompt, port):
            client = openai.OpenAI(base_url=f"http://localhost:{port}/v1")
            return client.chat.completions.create(model="m", messages=[])
        """
    )
    assert [(u.kind, u.scope) for u in uses] == [("http-request", "client.mod.local")]


def test_clients_kept_on_self():
    uses = _uses(
        """
        import openai
        import requests

        class Loader:
            def __init__(self, endpoint):
                self.client: openai.OpenAI | None = None
                self.session = requests.Session()
                self.endpoint = endpoint

            def setup(self):
                self.client = openai.OpenAI(base_url=self.endpoint)
                model_id = self.client.models.list().data[0].id
                self.session.post(f"{self.endpoint}/v1/x", json={"a": 1})
                return model_id
        """
    )
    assert [u.symbol for u in uses if u.kind == "http-request"] == ["GET /v1/models", "POST /v1/x"]
    assert [u.field for u in uses if u.kind == "http-read"] == [("data", "[]", "id")]


def test_a_non_openai_object_with_the_same_chain_is_not_a_request():
    assert (
        _uses(
            """
        def go(db):
            return db.completions.create(model="m")
        """
        )
        == []
    )


def test_launch_commands_come_from_the_hosts_console_scripts():
    uses = _uses(
        """
        import shlex
        import subprocess
        import sys

        def start(model, extra):
            cmd = ["/usr/bin/oaihost", "serve", model, "--port", "8000"]
            cmd += ["--a=1"]
            cmd.append("--b")
            cmd.extend(extra)
            subprocess.Popen(cmd)
            subprocess.run(shlex.split(f"oaihost serve {model} --c {model}"))
            subprocess.Popen([sys.executable, "-m", "host.entry", "--d"])
            subprocess.Popen(["other", "serve", "--e"])
            subprocess.Popen([sys.executable, "-m", "pip", "--f"])
        """,
        scripts=frozenset({"oaihost"}),
    )
    launches = [u for u in uses if u.kind == "launch"]
    assert [[name for name, _ in u.flags] for u in launches] == [
        ["--port", "--a", "--b"],
        ["--c"],
        ["--d"],
    ]
    assert [(u.argv_open, u.argv_list) for u in launches] == [
        (True, True),
        (False, False),
        (False, True),
    ]


def test_console_scripts_are_read_from_the_distribution():
    from driftcheck.client.http.prefilter import console_scripts
    from driftcheck.host.load import load_host
    from driftcheck.sources.specs import parse_spec

    assert console_scripts(load_host(parse_spec(str(OAIHOST / "2.0")))) == ("oaihost",)
    assert console_scripts(load_host(parse_spec(str(FIXTURES / "hosts" / "webhost" / "2.0")))) == ()


def test_files_that_never_name_the_host_are_read_when_they_talk_http(tmp_path: Path):
    pkg = tmp_path / "quiet" / "quiet"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "calls.py").write_text(
        "import httpx\n\n\ndef go(base):\n    return httpx.post(f'{base}/v1/completions', json={'prompt': [1]})\n"
    )
    (pkg / "other.py").write_text("def nothing():\n    return 1\n")
    result = scan(
        str(tmp_path / "quiet"), str(OAIHOST / "2.0"), baseline=str(OAIHOST / "1.0"), host="oaihost"
    )
    assert [u.symbol for u in result.uses if u.kind == "http-request"] == ["POST /v1/completions"]
    assert "quiet/calls.py" in result.client_lines and "quiet/other.py" not in result.client_lines


def _wrapper_url(expr: str) -> tuple[str | None, tuple[str | None, ...]]:
    """What a URL expression in ``def f(self, path, name)`` says: the parameter it ends in
    (a wrapper's path) and what comes before it."""
    code = f"from urllib.parse import urljoin\ndef f(self, path, name):\n    return {expr}\n"
    info = parse_module("m", "m.py", code)
    index = ClientIndex()
    index.add_module(info)
    func = index.functions["m.f"]
    value = info.tree.body[1].body[0].value  # type: ignore[attr-defined]
    got = url_path(value, func, info)
    return got.param, got.head


@pytest.mark.parametrize(
    ("expr", "param", "head"),
    [
        ("path", "path", ()),
        ("self.base + path", "path", (None,)),
        ('f"{self.base}/v1{path}"', "path", (None, "/v1")),
        ('f"{self.base}/{path}"', "path", (None, "/")),
        ("urljoin(self.base, path)", "path", (None,)),
        # near misses: a parameter that is one segment of a literal path, another machine
        ('f"{self.base}/v1/models/{name}"', None, ()),
        ('"https://api.example.com" + path', None, ()),
    ],
)
def test_a_url_that_ends_in_a_parameter_makes_a_wrapper(expr, param, head):
    assert _wrapper_url(expr) == (param, head)


def test_a_method_wrapper_binds_its_callers_path_body_and_reads():
    uses = _uses(
        """
        import json
        import requests

        class C:
            def _post(self, path, payload):
                r = requests.post(self.base + path, data=json.dumps(payload))
                r.raise_for_status()
                return r.json()

            def go(self, p):
                out = self._post("/v1/x", {"prompt": p, "opts": {"n": 1}})
                return out["choices"]
        """
    )
    request = next(u for u in uses if u.kind == "http-request")
    assert request.symbol == "POST /v1/x"
    assert [op.key for op in request.payload] == ["prompt", "opts"]
    assert [(p, op.key) for p, op in request.nested] == [(("opts",), "n")]
    assert [u.field for u in uses if u.kind == "http-read"] == [("choices",)]


def test_launch_tails_and_dict_key_flags():
    (tail, keyed) = _uses(
        """
        import subprocess

        def a(model, extra=None):
            return subprocess.run(["vllm", "serve", model, "--x"] + list(extra or []))

        def b(model):
            opts = {"max_model_len": 8, "enforce_eager": True}
            cmd = ["vllm", "serve", model]
            for k, v in opts.items():
                cmd += [f"--{k.replace('_', '-')}", str(v)]
            return subprocess.run(cmd)
        """,
        scripts=frozenset({"vllm"}),
    )
    assert [f for f, _ in tail.flags] == ["--x"]
    assert tail.argv_open and tail.argv_tails == ("extra",)
    assert [f for f, _ in keyed.flags] == ["--max-model-len", "--enforce-eager"]
    assert not keyed.argv_open and len(keyed.keyed_flags) == 2


def test_a_list_of_names_tested_against_is_no_launch():
    assert not _uses(
        """
        def pick(config):
            if config.rollout.name in ["vllm"]:
                return 1
        """,
        scripts=frozenset({"vllm"}),
    )
