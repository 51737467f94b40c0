"""Report formats: text (rich), json (and, later, sarif and github)."""

from __future__ import annotations

from collections.abc import Callable

from driftcheck.report import json_report, text

FORMATS: dict[str, Callable] = {"text": text.render, "json": json_report.render}

__all__ = ["FORMATS"]
