"""What the client-side readers know about the ``openai`` SDK, read from ``openai.toml`` (data
about the library, kept apart from the code that uses it)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from driftcheck.compat import tomllib


@dataclass(frozen=True)
class SdkMethod:
    """One resource method of the SDK and the route it calls.

    Attributes:
        call: The attribute chain off a client object (``chat.completions.create``).
        method: The HTTP method.
        path: The path relative to the client's base URL (``{name}`` for path parameters).
        returns: The SDK classes of what it returns (for ``isinstance`` narrowing).
        paged: It returns a page of items; what the client reads is an item.
        path_parameters: Arguments that fill the path, not the body.
        form: Sent as form fields (the body model is the same).
    """

    call: str
    method: str
    path: str
    returns: tuple[str, ...] = ()
    paged: bool = False
    path_parameters: tuple[str, ...] = ()
    form: bool = False


@dataclass(frozen=True)
class SdkData:
    """The SDK's client classes, its own parameters and its methods."""

    default_prefix: str
    clients: frozenset[str]
    own_parameters: frozenset[str]
    body_parameter: str
    stream_parameter: str
    methods: dict[str, SdkMethod]


def parse_sdk(text: str) -> SdkData:
    """The SDK data of one TOML document.

    Raises:
        ValueError: A method without ``call``, ``method`` or ``path``, or a path that does not
            start with ``/``.
    """
    raw = tomllib.loads(text)
    methods: dict[str, SdkMethod] = {}
    for entry in raw.get("method", []):
        try:
            m = SdkMethod(
                call=str(entry["call"]),
                method=str(entry["method"]).upper(),
                path=str(entry["path"]),
                returns=tuple(entry.get("returns", ())),
                paged=bool(entry.get("paged", False)),
                path_parameters=tuple(entry.get("path_parameters", ())),
                form=bool(entry.get("form", False)),
            )
        except KeyError as exc:
            raise ValueError(f"openai method entry without {exc}: {entry}") from None
        if not m.path.startswith("/"):
            raise ValueError(f"{m.call}: path {m.path!r} does not start with '/'")
        methods[m.call] = m
    return SdkData(
        default_prefix=str(raw.get("default_prefix", "")).rstrip("/"),
        clients=frozenset(raw.get("clients", ())),
        own_parameters=frozenset(raw.get("own_parameters", ())),
        body_parameter=str(raw.get("body_parameter", "")),
        stream_parameter=str(raw.get("stream_parameter", "")),
        methods=methods,
    )


@lru_cache(maxsize=1)
def openai_sdk() -> SdkData:
    """The built-in data (``driftcheck/client/http/openai.toml``)."""
    text = (
        resources.files("driftcheck.client.http")
        .joinpath("openai.toml")
        .read_text(encoding="utf-8")
    )
    return parse_sdk(text)
