"""Served workloads: a client that talks to ``vllm serve`` over HTTP, described as data.

A served workload (:class:`ServedWorkload`) names how the server is started (an argv template
for ``vllm serve``, built the way the client's own launcher builds it, and the layers it asks
for, as expressions in ``L``, the model's number of decoder layers), the client's own functions
that talk to it (:class:`Step`: ``module:function``, called once per sample with values the
probe provides or an earlier step returned), the tiny dataset (a handful of chats) and what is
validated (the hidden-states file each sample names, its tensor and token-id keys).

The built-in ones ship as package data (``served_workloads/*.toml``); a client declares its own
under ``[tool.driftcheck.probe.served]`` in its ``pyproject.toml`` (the same keys). A built-in one
applies to a client whose source holds every module its steps call: nothing here knows a
package by name.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any, Literal

from driftcheck.errors import UsageError

LayerIndex = Literal["after", "output"]
#: The values the served driver provides to every step (``$name`` in a step's arguments).
PROVIDED = ("url", "openai_client", "model", "messages")
#: The placeholders of the server's argv template.
SERVER_FIELDS = ("model", "layer_ids", "storage")
#: How a workload that names no ``[server] command`` starts its server: the target
#: environment's ``vllm`` console script, else its interpreter with ``-m`` this module.
DEFAULT_COMMAND = ("vllm",)
DEFAULT_MODULE = "vllm.entrypoints.cli.main"


@dataclass(frozen=True)
class Step:
    """One call of the client's own code per sample."""

    stage: str
    call: str  # module:function
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    returns: tuple[str, ...] = ()
    #: Called only for a sample where this path exists (``"${states_file}.lock"``).
    if_exists: str = ""

    @property
    def module(self) -> str:
        return self.call.partition(":")[0]

    def to_dict(self) -> dict:
        return {
            "stage": self.stage,
            "call": self.call,
            "args": list(self.args),
            "kwargs": dict(self.kwargs),
            "returns": list(self.returns),
            "if_exists": self.if_exists,
        }


@dataclass(frozen=True)
class ServedWorkload:
    """A client workload against ``vllm serve``."""

    name: str
    description: str
    server_argv: tuple[str, ...]
    layer_ids: tuple[str, ...]  # expressions in L
    layer_index: LayerIndex
    steps: tuple[Step, ...]
    validate: dict
    dataset: tuple[dict, ...]
    #: The server's command: a console script of the target environment, then its words.
    command: tuple[str, ...] = DEFAULT_COMMAND
    #: Where the environment has no such script: ``python -m`` this module instead ("": none).
    module: str = DEFAULT_MODULE

    @property
    def entry(self) -> str:
        """The first client function it calls (what the report names as the workload)."""
        return self.steps[0].call

    @property
    def modules(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.module for s in self.steps))

    @property
    def checks(self) -> list[tuple[str, str]]:
        """The stages a run of it passes through, in order (the report's rows)."""
        return [
            ("server-start", "the server starts on a free loopback port and answers /health"),
            ("import", "the client's functions import, from the client copy"),
            *((s.stage, f"{s.call}, once per sample") for s in self.steps),
            ("states-file", "every sample's file: the launch's layers, its token ids the client's"),
            (
                "hidden-states",
                "one tensor per requested layer, shape (tokens, hidden size), finite",
            ),
            ("reference", "tiny model: cosine per token and layer against transformers"),
        ]

    def layers_for(self, num_layers: int) -> list[int]:
        """The layer ids the launch asks for, for a model of ``num_layers`` decoder layers."""
        return [_layer_expr(e, num_layers) for e in self.layer_ids]

    def command_head(self, python: Path) -> list[str]:
        """The server command's first words for the environment of ``python``: its console
        script (beside the interpreter) where it is installed, else ``python -m`` the module."""
        script = python.parent / self.command[0]
        if script.exists() or not self.module:
            return [str(script), *self.command[1:]]
        return [str(python), "-m", self.module, *self.command[1:]]

    def server_args(
        self, model: str, layer_ids: list[int], storage: str, extra: Sequence[str] = ()
    ) -> list[str]:
        """The server's arguments (after :meth:`command_head`), placeholders filled, then ``extra`` (the probe's own: host, port, a fix's flag)."""
        values = {"model": model, "layer_ids": json.dumps(layer_ids), "storage": storage}
        return [Template(a).substitute(values) for a in self.server_argv] + list(extra)

    def spec(self) -> dict:
        """What the served driver needs of it (JSON)."""
        return {
            "steps": [s.to_dict() for s in self.steps],
            "validate": dict(self.validate),
            "dataset": [dict(d) for d in self.dataset],
            "layer_index": self.layer_index,
        }


_LAYER_NODES = (ast.Expression, ast.BinOp, ast.Add, ast.Sub, ast.FloorDiv, ast.Mult)


def _layer_expr(text: str, num_layers: int) -> int:
    """``"L // 2"`` for ``L = num_layers``: integers, ``L``, ``+ - * //`` only."""
    tree = ast.parse(text, mode="eval")
    for node in ast.walk(tree):
        ok = isinstance(node, _LAYER_NODES) or (
            isinstance(node, ast.Constant) and isinstance(node.value, int)
        )
        ok = ok or (isinstance(node, ast.Name) and node.id == "L") or isinstance(node, ast.Load)
        if not ok:
            raise UsageError(f"layer id {text!r}: only integers, L, +, -, * and // are allowed")
    code = compile(tree, "<layer id>", "eval")
    return int(eval(code, {"__builtins__": {}}, {"L": num_layers}))  # noqa: S307


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise UsageError(f"{where}: expected a string or a list of strings")


def parse_served(table: dict, label: str) -> ServedWorkload:
    """A served workload from its table (a built-in file's, or ``[tool.driftcheck.probe.served]``).

    Raises:
        UsageError: A key is missing or of the wrong kind (one line, naming it).
    """
    server = table.get("server")
    if not isinstance(server, dict) or "argv" not in server:
        raise UsageError(f"{label}: a served workload needs [server] argv = [...]")
    argv = _strings(server["argv"], f"{label}: server.argv")
    for arg in argv:
        try:
            names = {m.group("named") or m.group("braced") for m in Template.pattern.finditer(arg)}
        except (AttributeError, IndexError):
            names = set()
        unknown = sorted(n for n in names - {None} if n not in SERVER_FIELDS)
        if unknown:
            fields = ", ".join(f"${n}" for n in SERVER_FIELDS)
            raise UsageError(f"{label}: server.argv uses ${unknown[0]} (known: {fields})")
    command = _strings(server.get("command", list(DEFAULT_COMMAND)), f"{label}: server.command")
    if not command or not re.fullmatch(r"[\w.+-]+", command[0]):
        raise UsageError(f"{label}: server.command starts with a console script's name")
    module = server.get("module", DEFAULT_MODULE if "command" not in server else "")
    if not isinstance(module, str) or (module and not re.fullmatch(r"[\w.]+", module)):
        raise UsageError(f"{label}: server.module is a module name ('a.b.c')")
    layer_ids = _strings(server.get("layer-ids", []), f"{label}: server.layer-ids")
    for expr in layer_ids:
        try:
            _layer_expr(expr, 8)
        except SyntaxError:
            raise UsageError(f"{label}: layer id {expr!r} is not an expression in L") from None
    index = server.get("layer-index", "after")
    if index not in ("after", "output"):
        raise UsageError(f"{label}: server.layer-index is 'after' or 'output', not {index!r}")
    steps: list[Step] = []
    known = set(PROVIDED)
    for n, raw in enumerate(table.get("steps") or [], start=1):
        where = f"{label}: steps[{n}]"
        if not isinstance(raw, dict) or not re.fullmatch(r"[\w.]+:\w+", str(raw.get("call", ""))):
            raise UsageError(f"{where} needs call = 'module:function'")
        used = _references(raw.get("args", [])) | _references(raw.get("kwargs", {}))
        for name in used | _references(raw.get("if-exists", "")):
            if name not in known:
                raise UsageError(f"{where} uses ${name}, which nothing before it provides")
        returns = _strings(raw.get("returns", []), f"{where}.returns") if raw.get("returns") else ()
        known |= set(returns)
        steps.append(
            Step(
                stage=str(raw.get("stage") or f"step-{n}"),
                call=raw["call"],
                args=tuple(raw.get("args", [])),
                kwargs=dict(raw.get("kwargs", {})),
                returns=returns,
                if_exists=str(raw.get("if-exists", "")),
            )
        )
    if not steps:
        raise UsageError(f"{label}: a served workload needs at least one [[steps]] call")
    validate = table.get("validate") or {}
    if not isinstance(validate, dict) or not isinstance(validate.get("file"), str):
        raise UsageError(f"{label}: [validate] needs file = '$name' (the hidden-states file)")
    for key in ("file", "token-ids"):
        for name in _references(validate.get(key, "")):
            if name not in known:
                raise UsageError(f"{label}: validate.{key} uses ${name}, which no step returns")
    dataset = tuple(d for d in table.get("dataset") or [] if isinstance(d, dict))
    if not dataset or not all(isinstance(d.get("messages"), list) for d in dataset):
        raise UsageError(f"{label}: a served workload needs [[dataset]] entries with messages")
    return ServedWorkload(
        name=str(table.get("name") or label),
        description=str(table.get("description") or steps[0].call),
        server_argv=argv,
        layer_ids=layer_ids,
        layer_index=index,
        steps=tuple(steps),
        validate=dict(validate),
        dataset=dataset,
        command=command,
        module=module,
    )


def _references(value: Any) -> set[str]:
    """The ``$name`` values inside a step's arguments (``"${name}.lock"``: a string made of one)."""
    if isinstance(value, str):
        if re.fullmatch(r"\$\w+", value):
            return {value[1:]}
        return set(re.findall(r"\$\{(\w+)\}", value))
    if isinstance(value, list):
        return set().union(*(_references(v) for v in value)) if value else set()
    if isinstance(value, dict):
        return set().union(*(_references(v) for v in value.values())) if value else set()
    return set()


def builtin_served() -> list[ServedWorkload]:
    """The served workloads shipped with driftcheck (``served_workloads/*.toml``)."""
    from driftcheck.compat import tomllib

    out = []
    folder = resources.files("driftcheck.probes") / "served_workloads"
    for item in sorted(folder.iterdir(), key=lambda p: p.name):
        if item.name.endswith(".toml"):
            data = tomllib.loads(item.read_text(encoding="utf-8"))
            out.append(parse_served(data, item.name.removesuffix(".toml")))
    return out


def applies(workload: ServedWorkload, has_module: Any) -> bool:
    """Whether the client's source holds every module the workload's steps call."""
    return all(has_module(m) for m in workload.modules)
