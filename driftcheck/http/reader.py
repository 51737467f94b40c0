"""Reads a host's HTTP surface from its source (routes, body models, CLI flags)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from driftcheck.http.surface import HttpSurface

if TYPE_CHECKING:
    from driftcheck.host.api import HostAPI


def read_surface(api: HostAPI) -> HttpSurface:
    """Routes, their body models and the server's flags of one host release."""
    return HttpSurface()
