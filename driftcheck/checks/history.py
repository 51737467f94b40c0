"""What the baseline already said about something the target no longer has.

A host usually deprecates before it removes: the baseline's warning ("The frame.append method
is deprecated ... Use pandas.concat instead.") names the replacement that the removal itself
no longer mentions. Checks quote it in the removal's message.
"""

from __future__ import annotations

from driftcheck.checks.context import runs
from driftcheck.host.api import Found, HostAPI, Lookup
from driftcheck.host.declared import class_notes, module_notes
from driftcheck.host.param_notes import function_notes, parameter_notes
from driftcheck.host.served import DEPRECATED, Served


def warned_before(api: HostAPI | None, found: Lookup) -> str:
    """The baseline's deprecation message for ``found`` ("" when it gave none)."""
    if api is None:
        return ""
    if isinstance(found, Served):
        return found.message if found.status == DEPRECATED else ""
    if not isinstance(found, Found):
        return ""
    if found.kind == "function" or "property" in getattr(found.obj, "labels", ()):
        notes = function_notes(api, found)
    elif found.kind == "class":
        notes = class_notes(api, found)
        init = api.defined_in_host_mro(found, "__init__")
        if not notes and init is not None and init.kind == "function":
            notes = function_notes(api, init)
    elif found.kind == "module":
        notes = module_notes(api, found.path)  # it warned when imported
    else:
        notes = []
    return notes[0] if notes else ""


def keyword_warned_before(api: HostAPI | None, found: Lookup, keyword: str) -> tuple[str, str]:
    """The baseline's deprecation of one keyword of a function: (message, replacement)."""
    if api is None or not isinstance(found, Found):
        return "", ""
    body = runs(api, found)
    if body is None:
        return "", ""
    for note in parameter_notes(api, body):
        if note.param == keyword:
            return note.message, note.replacement or ""
    return "", ""


def quoted(version: str, message: str) -> str:
    """``; 1.5.3 already warned: ...`` (empty without a message)."""
    return f"; {version} already warned: {message[:240]}" if message else ""
