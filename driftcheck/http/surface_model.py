"""The data model of a host's HTTP surface (re-exported by :mod:`driftcheck.http.surface`).

Everything here is a frozen dataclass with ``to_json`` / ``from_json`` (plain dicts), so the
surface is kept in the host snapshot and printed by ``driftcheck routes --format json``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ModelField:
    """One field of a request/response body model."""

    name: str
    required: bool
    type: str | None = None
    default: str | None = None
    #: The name on the wire when it differs (``Field(alias=...)``).
    alias: str | None = None
    #: Qualname of a nested body model when the type names one (``list[X]``, ``X | None``).
    model: str | None = None
    file: str = ""
    line: int = 0

    @property
    def wire_name(self) -> str:
        """The key a client sends or reads."""
        return self.alias or self.name

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "required": self.required,
            "type": self.type,
            "default": self.default,
            "alias": self.alias,
            "model": self.model,
            "file": self.file,
            "line": self.line,
        }

    @classmethod
    def from_json(cls, d: dict) -> ModelField:
        return cls(
            name=d["name"],
            required=bool(d["required"]),
            type=d.get("type"),
            default=d.get("default"),
            alias=d.get("alias"),
            model=d.get("model"),
            file=d.get("file", ""),
            line=int(d.get("line", 0)),
        )


@dataclass(frozen=True)
class BodyModel:
    """A pydantic model used as a request or response body (fields through its bases)."""

    qualname: str
    file: str
    line: int
    fields: dict[str, ModelField] = field(default_factory=dict)
    #: ``"forbid"`` | ``"allow"`` | ``"ignore"``; None when unknown.
    extra: str | None = None
    bases: tuple[str, ...] = ()
    #: For a type alias of a union of models (``X: TypeAlias = A | B``): the members. Its
    #: ``fields`` are every member's (required only where all members require them).
    alternatives: tuple[str, ...] = ()
    #: The model takes a field with an alias by its name too (pydantic 2's
    #: ``populate_by_name`` / ``validate_by_name``, pydantic 1's
    #: ``allow_population_by_field_name``).
    by_name: bool = False

    def accepted(self) -> dict[str, ModelField]:
        """The keys a request body may fill each field by: its wire name, and its own name
        where the model takes it too (:attr:`by_name`)."""
        out = {f.wire_name: f for f in self.fields.values()}
        if self.by_name:
            for f in self.fields.values():
                out.setdefault(f.name, f)
        return out

    def field_named(self, key: str) -> ModelField | None:
        """The field a wire key names (its alias or its name)."""
        for f in self.fields.values():
            if f.wire_name == key:
                return f
        return self.fields.get(key)

    def to_json(self) -> dict:
        return {
            "qualname": self.qualname,
            "file": self.file,
            "line": self.line,
            "fields": {k: f.to_json() for k, f in self.fields.items()},
            "extra": self.extra,
            "bases": list(self.bases),
            "alternatives": list(self.alternatives),
            "by_name": self.by_name,
        }

    @classmethod
    def from_json(cls, d: dict) -> BodyModel:
        return cls(
            qualname=d["qualname"],
            file=d.get("file", ""),
            line=int(d.get("line", 0)),
            fields={k: ModelField.from_json(v) for k, v in d.get("fields", {}).items()},
            extra=d.get("extra"),
            bases=tuple(d.get("bases", ())),
            alternatives=tuple(d.get("alternatives", ())),
            by_name=bool(d.get("by_name", False)),
        )


@dataclass(frozen=True)
class ResponseShape:
    """One shape a route's handler can return."""

    #: ``"model"`` | ``"keys"`` | ``"empty"`` | ``"stream"`` | ``"unknown"``.
    kind: str
    model: str | None = None
    #: The keys of a dict literal body (kind ``"keys"``).
    keys: tuple[str, ...] = ()
    file: str = ""
    line: int = 0
    #: Sent with an error status (a status code that is not a literal 2xx, or a model the
    #: route declares under a 4xx/5xx status): not what a successful call returns.
    error: bool = False

    def to_json(self) -> dict:
        return {
            "kind": self.kind,
            "model": self.model,
            "keys": list(self.keys),
            "file": self.file,
            "line": self.line,
            "error": self.error,
        }

    @classmethod
    def from_json(cls, d: dict) -> ResponseShape:
        return cls(
            kind=d["kind"],
            model=d.get("model"),
            keys=tuple(d.get("keys", ())),
            file=d.get("file", ""),
            line=int(d.get("line", 0)),
            error=bool(d.get("error", False)),
        )


@dataclass(frozen=True)
class Route:
    """One HTTP route: method, full path (prefixes applied), handler, bodies, condition.

    ``method`` is an HTTP method, ``"WEBSOCKET"``, or ``"MOUNT"`` (``app.mount(path, other_app)``:
    every path below it is served by an app the host does not describe further).
    """

    method: str
    path: str
    handler: str
    file: str
    line: int
    #: Qualname of the request body model, when the handler takes one.
    request: str | None = None
    responses: tuple[ResponseShape, ...] = ()
    #: Source text of the condition that registers the route (``"envs.VLLM_SERVER_DEV_MODE"``).
    condition: str | None = None
    #: CLI flags that make the condition true (``("--enable-x",)``).
    flags: tuple[str, ...] = ()
    #: Environment variables that do.
    env: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {
            "method": self.method,
            "path": self.path,
            "handler": self.handler,
            "file": self.file,
            "line": self.line,
            "request": self.request,
            "responses": [r.to_json() for r in self.responses],
            "condition": self.condition,
            "flags": list(self.flags),
            "env": list(self.env),
        }

    @classmethod
    def from_json(cls, d: dict) -> Route:
        return cls(
            method=d["method"],
            path=d["path"],
            handler=d.get("handler", ""),
            file=d.get("file", ""),
            line=int(d.get("line", 0)),
            request=d.get("request"),
            responses=tuple(ResponseShape.from_json(r) for r in d.get("responses", ())),
            condition=d.get("condition"),
            flags=tuple(d.get("flags", ())),
            env=tuple(d.get("env", ())),
        )


@dataclass(frozen=True)
class CliFlag:
    """One command-line flag of the host's server."""

    #: ``"--max-model-len"``.
    name: str
    dest: str
    type: str | None = None
    default: str | None = None
    aliases: tuple[str, ...] = ()
    #: The deprecation message (or ``"deprecated"`` when the host gives none).
    deprecated: str | None = None
    file: str = ""
    line: int = 0
    #: ``--no-<name>`` is accepted too (a boolean flag built with ``BooleanOptionalAction``).
    negatable: bool = False

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "dest": self.dest,
            "type": self.type,
            "default": self.default,
            "aliases": list(self.aliases),
            "deprecated": self.deprecated,
            "file": self.file,
            "line": self.line,
            "negatable": self.negatable,
        }

    @classmethod
    def from_json(cls, d: dict) -> CliFlag:
        return cls(
            name=d["name"],
            dest=d.get("dest", ""),
            type=d.get("type"),
            default=d.get("default"),
            aliases=tuple(d.get("aliases", ())),
            deprecated=d.get("deprecated"),
            file=d.get("file", ""),
            line=int(d.get("line", 0)),
            negatable=bool(d.get("negatable", False)),
        )


@dataclass(frozen=True)
class HttpSurface:
    """Everything a client can reach over the wire or on the server's command line."""

    routes: tuple[Route, ...] = ()
    models: dict[str, BodyModel] = field(default_factory=dict)
    flags: dict[str, CliFlag] = field(default_factory=dict)
    #: The function that builds the server's app (``module:function``), when one does.
    app: str | None = None
    #: Host functions that build the server's argument parser (``module:function``), fewest
    #: flags first (what a runtime oracle calls to get the server's default arguments).
    parsers: tuple[str, ...] = ()

    def route(self, method: str, path: str) -> Route | None:
        """The route for ``method`` and ``path`` (exact path; method case-insensitive)."""
        m = method.upper()
        found = next((r for r in self.routes if r.path == path and r.method == m), None)
        if found is None:  # an app mounted under a prefix serves every path below it
            found = next(
                (r for r in self.routes if r.method == "MOUNT" and _under(path, r.path)), None
            )
        return found

    def routes_for(self, path: str) -> list[Route]:
        """Every route on ``path`` (any method)."""
        return [r for r in self.routes if r.path == path]

    def model(self, qualname: str | None) -> BodyModel | None:
        """A body model by qualname."""
        return None if qualname is None else self.models.get(qualname)

    def flag(self, name: str) -> CliFlag | None:
        """The flag ``name`` names: its own name, an alias, or ``--no-x`` of a boolean flag.

        ``--x=value`` is matched on its name part; ``_`` and ``-`` are the same after ``--``.
        """
        name = name.split("=", 1)[0]
        if name in self.flags:
            return self.flags[name]
        norm = _normal(name)
        for f in self.flags.values():
            if _normal(f.name) == norm or norm in {_normal(a) for a in f.aliases}:
                return f
        if norm.startswith("--no-"):
            positive = "--" + norm[5:]
            for f in self.flags.values():
                if f.negatable and _normal(f.name) == positive:
                    return f
        return None

    def to_json(self) -> dict:
        return {
            "routes": [r.to_json() for r in self.routes],
            "models": {k: m.to_json() for k, m in self.models.items()},
            "flags": {k: f.to_json() for k, f in self.flags.items()},
            "app": self.app,
            "parsers": list(self.parsers),
        }

    @classmethod
    def from_json(cls, d: dict) -> HttpSurface:
        return cls(
            routes=tuple(Route.from_json(r) for r in d.get("routes", ())),
            models={k: BodyModel.from_json(m) for k, m in d.get("models", {}).items()},
            flags={k: CliFlag.from_json(f) for k, f in d.get("flags", {}).items()},
            app=d.get("app"),
            parsers=tuple(d.get("parsers", ())),
        )


def _under(path: str, prefix: str) -> bool:
    prefix = prefix.rstrip("/")
    return path == prefix or path.startswith(prefix + "/")


def _normal(flag: str) -> str:
    if flag.startswith("--"):
        return "--" + flag[2:].replace("_", "-")
    return flag
