"""The client's HTTP uses of the host's server: requests, what it reads from the responses, and
the command lines that start the server (read with ``ast``, never imported).

Requests are calls of ``httpx`` / ``requests`` / ``aiohttp`` (module functions and methods of
their client objects) whose URL ends in a literal path (:mod:`driftcheck.client.http.urls`),
calls of the OpenAI SDK's resource methods (:mod:`driftcheck.client.http.openai_sdk`), and calls of
the client's own wrappers around either (a function whose URL is a parameter). Their ``json=``
payloads follow the dict dataflow of :mod:`driftcheck.client.kwargs`; reads of their results are
in :mod:`driftcheck.client.http.reads`; launch commands in :mod:`driftcheck.client.http.launch`. Every
use carries the gates of the code it is in, like the client's other uses.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import cast

from driftcheck.client.gate_reader import GateReader
from driftcheck.client.gating import GatedWalker
from driftcheck.client.http.launch import LaunchFinder
from driftcheck.client.http.openai_sdk import SdkData, SdkMethod, openai_sdk
from driftcheck.client.http.urls import UrlPath, url_path
from driftcheck.client.http.use import HttpUse
from driftcheck.client.index import ClientIndex, FunctionInfo, ModuleInfo, first_param
from driftcheck.client.kwargs import KwargsFlow
from driftcheck.gates import Gate, all_of
from driftcheck.host.signature import KeyOp

Span = tuple[int, int, int, int]

#: HTTP client libraries: module functions and client classes (their methods take the same
#: arguments). Knowledge about these libraries' public APIs, not about any server.
LIBRARY_FUNCTIONS = {
    f"{lib}.{m}": lib
    for lib in ("httpx", "requests")
    for m in ("get", "post", "put", "patch", "delete", "head", "options", "request", "stream")
}
LIBRARY_CLASSES = {
    "httpx.Client": "httpx",
    "httpx.AsyncClient": "httpx",
    "requests.Session": "requests",
    "requests.sessions.Session": "requests",
    "aiohttp.ClientSession": "aiohttp",
}
VERBS = frozenset({"get", "post", "put", "patch", "delete", "head", "options"})
#: Methods taking the HTTP method first, then the URL.
GENERIC = frozenset({"request", "stream"})
#: Markers of a file that may talk HTTP or start a server (the files read beyond those naming
#: the host).
#: A wrapper's ``json_param`` when it hands its ``**kwargs`` to the library call.
_KWARGS = "**"
#: Modules whose ``dumps`` writes JSON text.
_JSON = frozenset({"json", "orjson", "ujson", "simplejson"})
FILE_MARKERS = re.compile(r"\b(httpx|requests|aiohttp|openai|subprocess|shlex)\b")


@dataclass(frozen=True)
class Wrapper:
    """A client function that sends a request to a URL (or a path) it takes as a parameter.

    Attributes:
        json_param: The parameter that is the body; ``**`` where the function hands its
            ``**kwargs`` to the library call (its callers' ``json=`` is the body).
        head: What the function puts before the parameter (:attr:`UrlPath.head`).
        returns: What it returns of the request: ``response``, ``body`` (``r.json()``), or
            None (something else: its callers' reads are not the response's).
    """

    method: str
    url_param: str
    json_param: str | None
    api: str
    head: tuple[str | None, ...] = ()
    returns: str | None = "response"


@dataclass
class Request:
    """A request found at a call, before it becomes a use."""

    method: str
    url: ast.expr | None
    payload: ast.expr | None
    api: str
    sdk: SdkMethod | None = None
    openai_body: tuple[ast.keyword, ...] = ()
    #: The call sends a body whose keys cannot be read (a form, a string, ``**kwargs``).
    opaque: bool = False
    #: What the call's value is: ``response``, ``body`` or ``sdk`` (None: not the request's).
    returns: str | None = "response"
    head: tuple[str | None, ...] = ()


class HttpCollector(LaunchFinder, KwargsFlow, GatedWalker):
    """Collects the HTTP requests of one client module (reads and launches follow from them)."""

    def __init__(
        self,
        module: ModuleInfo,
        index: ClientIndex,
        reader: GateReader | None,
        roots: set[str],
        wrappers: dict[str, Wrapper],
        sdk: SdkData | None = None,
        scripts: frozenset[str] = frozenset(),
    ) -> None:
        super().__init__(reader)
        self.scripts = scripts
        self.module = module
        self.source = module.source
        self.index = index
        self.roots = roots
        self.wrappers = wrappers
        self.sdk = sdk or openai_sdk()
        self.func_stack: list[FunctionInfo] = []
        self.uses: list = []
        #: ``id()`` of a node -> the gate it runs under (for reads found after the walk).
        self.node_gates: dict[int, Gate] = {}
        #: Requests whose URL is a parameter of their function: wrapper candidates.
        self.found_wrappers: dict[str, Wrapper] = {}
        #: Each request use with the call node it came from and what the call's value is
        #: (``response``, ``body``, ``sdk``; None: not the request's).
        self.calls: list[tuple[HttpUse, ast.Call, FunctionInfo | None, str | None]] = []

    @property
    def func(self) -> FunctionInfo | None:
        return self.func_stack[-1] if self.func_stack else None

    def run(self) -> list[HttpUse]:
        """Walk the module; its requests in source order."""
        self.walk(self.module.tree)
        return self.uses

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        info = self.index.function_of_node.get(node)
        if info is not None:
            self.func_stack.append(info)

    def leave_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.pop_tails(node)
        if self.func_stack and self.func_stack[-1].node is node:
            self.func_stack.pop()

    visit_AsyncFunctionDef = visit_FunctionDef
    leave_AsyncFunctionDef = leave_FunctionDef

    def visit_Assign(self, node: ast.Assign) -> None:
        self.track_assign(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        self.track_delete(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self._note_gate(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        self._note_gate(node)

    def _note_gate(self, node: ast.AST) -> None:
        if self.gates:
            gate = all_of(list(self.gates))
            if gate is not None:
                self.node_gates[id(node)] = gate

    def visit_Call(self, node: ast.Call) -> None:
        self._note_gate(node)
        self.track_method(node)
        self.track_argv_call(node)
        request = self._request(node)
        if request is None:
            return
        self._record(node, request)

    # -- recognising requests --------------------------------------------------------------
    def _request(self, node: ast.Call) -> Request | None:
        func = node.func
        for name in self.module.qualified(func):
            lib = LIBRARY_FUNCTIONS.get(name)
            if lib is not None:
                return self._body(node, _library_call(node, name.rsplit(".", 1)[1], lib))
            wrapper = self.wrappers.get(name)
            if wrapper is not None:
                return self._wrapper_call(node, name, wrapper)
        if not isinstance(func, ast.Attribute):
            return None
        method = self._own_method(func)
        if method is not None and method in self.wrappers:
            return self._wrapper_call(node, method, self.wrappers[method])
        chain: list[str] = []
        links: list[ast.Attribute] = []
        base: ast.expr = func
        while isinstance(base, ast.Attribute):
            chain.insert(0, base.attr)
            links.insert(0, base)
            base = base.value
        lib = self.client_kind(func.value)
        if lib is not None and lib != "openai":
            return self._body(node, _library_call(node, func.attr, lib))
        for k in range(
            len(chain) - 1
        ):  # ``client.chat.completions.create``, ``self.c.models.list``
            sdk_method = self.sdk.methods.get(".".join(chain[k:]))
            receiver = links[k].value
            if sdk_method is None or self.client_kind(receiver) != "openai":
                continue
            if self._foreign_base(receiver):
                return None
            body = tuple(
                kw
                for kw in node.keywords
                if kw.arg is not None
                and kw.arg not in self.sdk.own_parameters
                and kw.arg not in sdk_method.path_parameters
            )
            extra = next(
                (kw.value for kw in node.keywords if kw.arg == self.sdk.body_parameter), None
            )
            return Request(
                method=sdk_method.method,
                url=None,
                payload=extra,
                api=f"openai {sdk_method.call}",
                sdk=sdk_method,
                openai_body=body,
                returns="sdk",
            )
        return None

    def _own_method(self, func: ast.Attribute) -> str | None:
        """The client method ``self.m`` / ``cls.m`` names in a method of a client class: the
        qualname of the first class in its client bases that defines it."""
        here = self.func
        if not (isinstance(func.value, ast.Name) and here is not None and here.class_name):
            return None
        if func.value.id != first_param(here.node):
            return None
        todo, seen = [here.class_name], set()
        while todo:
            name = todo.pop(0)
            cls = self.index.classes.get(name)
            if cls is None or name in seen:
                continue
            seen.add(name)
            found = cls.methods.get(func.attr)
            if found is not None:
                return found.qualname
            todo += cls.bases
        return None

    def _body(self, node: ast.Call, request: Request | None) -> Request | None:
        """A library request's JSON body: ``json=``, or ``data=`` / ``content=`` given
        ``json.dumps(body)`` (``.encode()`` too), itself or through a name assigned once. A
        ``data=`` dict is a form, no JSON body."""
        if request is None or request.payload is not None:
            return request
        for k in node.keywords:
            if k.arg in ("data", "content"):
                request.payload = self._dumped(k.value)
                request.opaque = request.payload is None
            elif k.arg is None:
                request.opaque = True
        return request

    def _dumped(self, value: ast.expr) -> ast.expr | None:
        """``body`` of ``json.dumps(body)`` (or ``json.dumps(body).encode(...)``)."""
        if isinstance(value, ast.Name) and self.func is not None:
            values = self.func.locals.get(value.id, [])
            value = values[0] if len(values) == 1 else value
        if (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr == "encode"
        ):
            value = value.func.value
        if not (isinstance(value, ast.Call) and len(value.args) >= 1):
            return None
        names = self.module.qualified(value.func)
        if any(n.rsplit(".", 1)[-1] == "dumps" and n.split(".")[0] in _JSON for n in names):
            return value.args[0]
        return None

    def _wrapper_call(self, node: ast.Call, name: str, wrapper: Wrapper) -> Request | None:
        target = self.index.functions.get(name)
        if target is None:
            return None
        bound = _bind(node, target.node)
        url = bound.get(wrapper.url_param)
        payload = bound.get(wrapper.json_param) if wrapper.json_param else None
        opaque = False
        if wrapper.json_param == _KWARGS:  # the call's own keywords reach the library call
            body = self._body(node, Request("", None, bound.get("json"), ""))
            payload = body.payload if body is not None else None
            opaque = body is not None and body.opaque
        return Request(
            wrapper.method,
            url,
            payload,
            wrapper.api,
            opaque=opaque,
            returns=wrapper.returns,
            head=wrapper.head,
        )

    def client_kind(self, expr: ast.expr, depth: int = 0) -> str | None:
        """The library of the client object ``expr`` is (``httpx``, ``openai``, ...)."""
        if depth > 3:
            return None
        values: list[ast.expr] = []
        if isinstance(expr, ast.Call):
            values = [expr]
        elif isinstance(expr, ast.Name):
            func = self.func
            param = func.params.get(expr.id) if func is not None else None
            if param is not None:
                values.append(param)
            if func is not None:
                values += func.locals.get(expr.id, [])
            values += self.module.globals.get(expr.id, [])
        elif (
            isinstance(expr, ast.Attribute)
            and isinstance(expr.value, ast.Name)
            and self.func is not None
            and self.func.class_name
        ):
            cls = self.index.classes.get(self.func.class_name)
            values = [v for v, _ in cls.attrs.get(expr.attr, [])] if cls else []
        for value in values:
            kind = self._kind_of_value(value, depth)
            if kind is not None:
                return kind
        return None

    def _foreign_base(self, expr: ast.expr) -> bool:
        """Was the SDK client built with a literal ``base_url`` naming another machine
        (``OpenAI(base_url="https://api.example.com/v1")``)?"""
        values: list[ast.expr] = [expr] if isinstance(expr, ast.Call) else []
        if isinstance(expr, ast.Name):
            func = self.func
            values += func.locals.get(expr.id, []) if func is not None else []
            values += self.module.globals.get(expr.id, [])
        for value in values:
            if isinstance(value, ast.Await):
                value = value.value
            if not isinstance(value, ast.Call):
                continue
            if not any(n in self.sdk.clients for n in self.module.qualified(value.func)):
                continue
            url = next((k.value for k in value.keywords if k.arg == "base_url"), None)
            if url is not None and url_path(url, self.func, self.module).foreign:
                return True
        return False

    def _kind_of_value(self, value: ast.expr, depth: int) -> str | None:
        if isinstance(value, ast.Await):
            value = value.value
        if isinstance(value, ast.Call):
            value = value.func
            if isinstance(value, ast.Attribute):  # ``self._get_session()``: its annotation
                method = self.index.functions.get(self._own_method(value) or "")
                returns = method.node.returns if method is not None else None
                if returns is not None:
                    value = returns
        for node in ast.walk(value):
            if not isinstance(node, (ast.Name, ast.Attribute)):
                continue
            for name in self.module.qualified(node):
                if name in LIBRARY_CLASSES:
                    return LIBRARY_CLASSES[name]
                if name in self.sdk.clients:
                    return "openai"
        if isinstance(value, ast.Name) and value.id != "__unknown__" and depth < 3:
            return self.client_kind(value, depth + 1)
        return None

    # -- recording -------------------------------------------------------------------------
    def _record(self, node: ast.Call, request: Request) -> None:
        if request.sdk is not None:
            path: UrlPath = UrlPath(path=self.sdk.default_prefix + request.sdk.path)
        elif request.url is not None:
            path = url_path(request.url, self.func, self.module, request.head)
        else:
            return
        if path.param is not None and self.func is not None:
            json_param = _param_name(request.payload, self.func)
            if request.payload is None and _passes_kwargs(node, self.func.node):
                json_param = _KWARGS  # ``session.post(url, **kwargs)``: the caller's json=
            self.found_wrappers[self.func.qualname] = Wrapper(
                request.method,
                path.param,
                json_param,
                request.api,
                path.head,
                _returned(self.func.node, node, request.returns),
            )
            return
        if path.path is None or path.foreign:
            return
        ops: list[KeyOp] = [
            # The body's keywords are named ones (``**`` spreads are kept apart).
            KeyOp("+", cast(str, k.arg), self._gate(), self.source.span(k))
            for k in request.openai_body
        ]
        nested = [n for k in request.openai_body for n in self._inner(cast(str, k.arg), k.value)]
        complete = not request.opaque
        if request.payload is not None:
            d = self._value(request.payload)
            if d is None:
                complete = False
            else:
                ops += d.ops
                nested += d.inner
                complete = d.complete
        if request.sdk is not None and any(k.arg is None for k in node.keywords):
            complete = False
        line, column = self.source.start(node)
        end_line, end_column = self.source.end(node)
        use = HttpUse(
            kind="http-request",
            file=self.module.file,
            line=line,
            column=column + 1,
            end_line=end_line,
            end_column=end_column + 1,
            symbol=f"{request.method} {path.path}",
            scope=self.func.qualname if self.func else self.module.name,
            order=len(self.uses),
            gate=all_of(list(self.gates)),
            http_method=request.method,
            path=path.path,
            api=request.api,
            payload=tuple(ops),
            payload_complete=complete,
            nested=tuple(nested),
            returns=request.sdk.returns if request.sdk is not None else (),
        )
        self.uses.append(use)
        self.calls.append((use, node, self.func, request.returns))


def _library_call(node: ast.Call, verb: str, lib: str) -> Request | None:
    """A request through an HTTP library's function or client method."""
    args = list(node.args)
    kw = {k.arg: k.value for k in node.keywords if k.arg is not None}
    if verb in GENERIC:
        method_arg = args.pop(0) if args else kw.get("method")
        if not (isinstance(method_arg, ast.Constant) and isinstance(method_arg.value, str)):
            return None
        method = method_arg.value.upper()
    elif verb in VERBS:
        method = verb.upper()
    else:
        return None
    url = args[0] if args else kw.get("url", kw.get("str_or_url"))
    return Request(method, url, kw.get("json"), lib)


def _bind(call: ast.Call, func: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.expr]:
    """The call's arguments by the function's parameter names (``self`` skipped for methods
    called off an object)."""
    a = func.args
    names = [p.arg for p in (*a.posonlyargs, *a.args)]
    if names and names[0] in ("self", "cls") and isinstance(call.func, ast.Attribute):
        names = names[1:]
    out: dict[str, ast.expr] = {}
    for name, arg in zip(names, call.args, strict=False):
        if isinstance(arg, ast.Starred):
            break
        out[name] = arg
    for k in call.keywords:
        if k.arg is not None:
            out[k.arg] = k.value
    return out


def _passes_kwargs(call: ast.Call, func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Does ``call`` hand on its function's ``**kwargs`` whole?"""
    kwarg = func.args.kwarg
    return kwarg is not None and any(
        k.arg is None and isinstance(k.value, ast.Name) and k.value.id == kwarg.arg
        for k in call.keywords
    )


def _returned(
    func: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call, value: str | None
) -> str | None:
    """What a wrapper returns of the request ``call`` whose value is ``value`` (``response``
    or ``body``): the call's value itself (kept in a name, ``async with ... as r``, awaited),
    or ``.json()`` of a response. None where a return gives anything else."""
    if value not in ("response", "body"):
        return None
    kinds: dict[str, str] = {}  # local name -> what it holds

    def kind_of(expr: ast.expr | None) -> str | None:
        while isinstance(expr, ast.Await):
            expr = expr.value
        if expr is call:
            return value
        if isinstance(expr, ast.Name):
            return kinds.get(expr.id)
        if (
            isinstance(expr, ast.Call)
            and isinstance(expr.func, ast.Attribute)
            and expr.func.attr == "json"
            and kind_of(expr.func.value) == "response"
        ):
            return "body"
        return None

    returns: list[ast.Return] = []
    for node in _own_nodes(func):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and (k := kind_of(node.value)) is not None:
                kinds[target.id] = k
        elif isinstance(node, ast.withitem) and isinstance(node.optional_vars, ast.Name):
            if (k := kind_of(node.context_expr)) is not None:
                kinds[node.optional_vars.id] = k
        elif isinstance(node, ast.Return):
            returns.append(node)
    got = {kind_of(r.value) for r in returns}
    return got.pop() if len(got) == 1 else None


def _own_nodes(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.AST]:
    """The nodes of a function's body in source order, leaving out nested functions."""
    out: list[ast.AST] = []
    todo: list[ast.AST] = list(reversed(func.body))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        out.append(node)
        todo += reversed(list(ast.iter_child_nodes(node)))
    return out


def _param_name(expr: ast.expr | None, func: FunctionInfo) -> str | None:
    if isinstance(expr, ast.Name) and expr.id in func.params and expr.id not in func.locals:
        return expr.id
    return None
