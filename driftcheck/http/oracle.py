"""Runtime oracle for the static HTTP-surface reader (run by a HOST's own interpreter).

    python oracle.py --builder MODULE:FUNCTION --parser MODULE:FUNCTION [--parser ...]
                     [--env NAME]... [--set DEST]...

Builds the host's real app the way its server does (the command line's defaults from the
host's own parser, then the app builder), without starting a server or loading a model, and
prints its routes as JSON: method, path, endpoint, and each request body model's fields. ``--env``
sets an environment variable to ``1`` before anything of the host is imported; ``--set`` sets an
argument to ``True``; a builder parameter annotated with a tuple of ``Literal`` strings (the
tasks a model supports) gets every one of them. Standard library only, plus the host's own
imports; driftcheck's analyzer never imports this module.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import sys
import typing


def main(argv: list[str] | None = None) -> int:
    opts = _options(argv)
    for name in opts.env:
        os.environ[name] = "1"
    out: dict = {"routes": [], "notes": []}
    try:
        args, parser = _args(opts.parser, out["notes"])
        out["flags"] = _flags(parser)
        for dest in opts.set:
            setattr(args, dest, True)
        app = _build(opts.builder, args, out["notes"])
        out["routes"] = _routes(getattr(app, "routes", []), "")
    except BaseException as exc:  # the report must come back whatever the host does
        out["error"] = f"{type(exc).__name__}: {exc}"
    sys.stdout.write("\n@@ORACLE@@" + json.dumps(out) + "\n")
    return 0


def _options(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--builder", required=True)
    p.add_argument("--parser", action="append", default=[])
    p.add_argument("--env", action="append", default=[])
    p.add_argument("--set", action="append", default=[])
    return p.parse_args(argv)


def _load(target: str) -> typing.Any:
    module, _, name = target.partition(":")
    obj: typing.Any = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _args(parsers: list[str], notes: list[str]) -> tuple[argparse.Namespace, typing.Any]:
    """The server's defaults, from the first of the host's parser functions that works."""
    for target in parsers:
        try:
            func = _load(target)
            params = [
                p
                for p in inspect.signature(func).parameters.values()
                if p.default is inspect.Parameter.empty
            ]
            if not params:
                parser = func()
            elif len(params) == 1:
                cls = _hints(func).get(params[0].name, argparse.ArgumentParser)
                if not isinstance(cls, type):
                    cls = argparse.ArgumentParser
                parser = func(cls())
            else:
                continue
            parser = parser if hasattr(parser, "parse_args") else None
            if parser is None:
                continue
            notes.append(f"args from {target}")
            return parser.parse_args([]), parser
        except BaseException as exc:
            notes.append(f"{target}: {type(exc).__name__}: {exc}")
    raise RuntimeError("no parser function of the host gave the server's arguments")


def _flags(parser: typing.Any) -> list[dict]:
    """The parser's options: their strings, dest and whether argparse marks them deprecated."""
    out: list[dict] = []
    for action in getattr(parser, "_actions", []):
        if action.option_strings:
            out.append(
                {
                    "options": list(action.option_strings),
                    "dest": action.dest,
                    "deprecated": bool(getattr(action, "deprecated", False)),
                }
            )
    return out


def _hints(func: typing.Any) -> dict:
    try:
        return typing.get_type_hints(func)
    except Exception:
        return {}


def _build(target: str, args: argparse.Namespace, notes: list[str]) -> typing.Any:
    builder = _load(target)
    hints = _hints(builder)
    kwargs: dict[str, typing.Any] = {}
    for name, param in list(inspect.signature(builder).parameters.items())[1:]:
        literals = _literals(hints.get(name))
        if literals:
            kwargs[name] = tuple(literals)
            notes.append(f"{name}={tuple(literals)}")
        elif param.default is inspect.Parameter.empty:
            kwargs[name] = None
    return builder(args, **kwargs)


def _literals(hint: typing.Any) -> list[str]:
    """Every string of the ``Literal`` types inside an annotation (``tuple[Task, ...] | None``)."""
    if hint is None:
        return []
    if typing.get_origin(hint) is typing.Literal:
        return [a for a in typing.get_args(hint) if isinstance(a, str)]
    out: list[str] = []
    for arg in typing.get_args(hint):
        for value in _literals(arg):
            if value not in out:
                out.append(value)
    return out


def _routes(routes: list, prefix: str) -> list[dict]:
    """Every route, included routers opened (FastAPI versions that keep an included router
    as one entry hold it as ``original_router`` with the include's prefix)."""
    out: list[dict] = []
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            context = getattr(route, "include_context", None)
            out.extend(_routes(inner.routes, prefix + (getattr(context, "prefix", "") or "")))
        else:
            out.append(_route(route, prefix))
    return out


def _route(route: typing.Any, prefix: str) -> dict:
    endpoint = getattr(route, "endpoint", None)
    methods = sorted(getattr(route, "methods", None) or [])
    kind = type(route).__name__
    if not methods and "WebSocket" in kind:
        methods = ["WEBSOCKET"]
    row: dict[str, typing.Any] = {
        "kind": kind,
        "path": prefix + getattr(route, "path", ""),
        "methods": methods,
        "endpoint": _qualname(endpoint),
        "body": [],
    }
    dependant = getattr(route, "dependant", None)
    for param in getattr(dependant, "body_params", None) or []:
        hint = getattr(param, "type_", None)
        info = getattr(param, "field_info", None)
        hint = getattr(info, "annotation", None) or hint
        for model in _models(hint):
            row["body"].append({"model": _qualname(model), "fields": _fields(model)})
    return row


def _models(hint: typing.Any) -> list[type]:
    if isinstance(hint, type) and hasattr(hint, "model_fields"):
        return [hint]
    out: list[type] = []
    for arg in typing.get_args(hint):
        out.extend(m for m in _models(arg) if m not in out)
    return out


def _fields(model: type) -> dict[str, bool]:
    """Key -> required, for every key a pydantic model's fields are filled by: the wire name
    (the alias), and the field's own name where the model's settings take it too."""
    out: dict[str, bool] = {}
    config = getattr(model, "model_config", {}) or {}
    by_name = bool(config.get("populate_by_name") or config.get("validate_by_name"))
    for name, info in getattr(model, "model_fields", {}).items():
        alias = getattr(info, "alias", None) or getattr(info, "validation_alias", None)
        wire = alias if isinstance(alias, str) else name
        out[wire] = bool(info.is_required())
        if by_name:
            out.setdefault(name, bool(info.is_required()))
    return out


def _qualname(obj: typing.Any) -> str:
    if obj is None:
        return ""
    module = getattr(obj, "__module__", "") or ""
    return f"{module}.{getattr(obj, '__qualname__', getattr(obj, '__name__', ''))}"


if __name__ == "__main__":
    sys.exit(main())
