"""A host's HTTP surface, read from source: routes, request and response bodies, server flags.

``surface`` holds the data model (frozen, JSON round-trip) and :func:`http_surface`, which reads it
for one host release and keeps it as a snapshot fact.
"""

from driftcheck.http.surface import (
    BodyModel,
    CliFlag,
    HttpSurface,
    ModelField,
    ResponseShape,
    Route,
    http_surface,
)

__all__ = [
    "BodyModel",
    "CliFlag",
    "HttpSurface",
    "ModelField",
    "ResponseShape",
    "Route",
    "http_surface",
]
