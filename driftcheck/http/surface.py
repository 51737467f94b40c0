"""A host's HTTP surface: the data model (:mod:`~driftcheck.http.surface_model`) and
:func:`http_surface`, the snapshot fact that reads it from source (:mod:`~driftcheck.http.reader`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from driftcheck.http.surface_model import (
    BodyModel,
    CliFlag,
    HttpSurface,
    ModelField,
    ResponseShape,
    Route,
)

if TYPE_CHECKING:
    from driftcheck.host.api import HostAPI

__all__ = [
    "BodyModel",
    "CliFlag",
    "HttpSurface",
    "ModelField",
    "ResponseShape",
    "Route",
    "http_surface",
]

#: Bumped when what the reader extracts changes shape (keys the snapshot fact).
FORMAT = 3


def http_surface(api: HostAPI) -> HttpSurface:
    """The HTTP surface of one host release, read from its source (a snapshot fact).

    Args:
        api: The host release (``driftcheck.host.load.load_host``).
    """
    cache = api.__dict__.setdefault("_http_surface", {})
    if "surface" not in cache:
        from driftcheck.http.reader import read_surface

        raw = api.fact(f"http-surface:{FORMAT}", lambda: read_surface(api).to_json())
        cache["surface"] = HttpSurface.from_json(raw)
    return cache["surface"]
