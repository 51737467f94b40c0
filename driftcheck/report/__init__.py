"""Report formats: text (rich), json, sarif (SARIF 2.1.0) and github (workflow commands).

Each is ``render(result, out, *, triage=None)``; ``triage`` is the accepted-drift split
(:class:`driftcheck.accepted.Triage`) when the scan used an accepted-drift file.
"""

from __future__ import annotations

from collections.abc import Callable

from driftcheck.report import github, json_report, sarif, text

FORMATS: dict[str, Callable] = {
    "text": text.render,
    "json": json_report.render,
    "sarif": sarif.render,
    "github": github.render,
}

__all__ = ["FORMATS"]
