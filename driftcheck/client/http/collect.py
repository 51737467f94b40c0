"""The pipeline's entry to the client's HTTP uses: which files are read for them, the wrappers
found across the client, and the requests, reads and launches of every module."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from driftcheck.client.gate_reader import GateReader
from driftcheck.client.http.calls import HttpCollector, Wrapper
from driftcheck.client.http.prefilter import console_scripts, script_strings, talks_alone
from driftcheck.client.http.reads import ReadFinder
from driftcheck.client.http.use import HttpUse
from driftcheck.client.index import ClientIndex
from driftcheck.client.texts import text_of, unpack

if TYPE_CHECKING:
    from driftcheck.client.package import Client
    from driftcheck.host.api import HostAPI

_ROUNDS = 3


def http_uses(
    client: Client, index: ClientIndex, reader: GateReader | None, roots: set[str], api: HostAPI
) -> list[HttpUse]:
    """Every HTTP request, response read and server launch of the client, in file order.

    A client function that sends a request to a URL it takes as a parameter is a wrapper: its
    callers' literal URLs are the requests (found in rounds, a wrapper of a wrapper too), and
    what the callers read of its return value are the reads of the response or body it returns.
    """
    scripts = frozenset(console_scripts(api))
    quoted = script_strings(scripts)
    modules = list(client.modules.values())
    wrappers: dict[str, Wrapper] = {}
    collectors: list[HttpCollector] = []
    # what each file's text says is read once; only the wrappers' names change per round, and
    # they are looked for in the texts as kept (UTF-8 bytes are searched for the names' bytes:
    # decoded, transformers' texts were 82 MB more at the scan's peak)
    kept = [client.texts.kept(m.file) if m.file in client.texts else "" for m in modules]
    alone = [talks_alone(text_of(text), scripts, quoted) for text in kept]
    for _ in range(_ROUNDS):
        names = {q.rsplit(".", 1)[-1] for q in wrappers}
        spelled = {name: name.encode() for name in names}
        chosen = [
            m
            for m, text, talks in zip(modules, kept, alone, strict=True)
            if talks or (names and _names_any(unpack(text), names, spelled))
        ]
        collectors = []
        found: dict[str, Wrapper] = {}
        for info in chosen:
            collector = HttpCollector(info, index, reader, roots, wrappers, scripts=scripts)
            try:
                collector.run()
            except RecursionError:
                continue
            except Exception as exc:  # one file driftcheck trips on never stops the scan
                if os.environ.get("DRIFTCHECK_DEBUG", "") not in ("", "0"):
                    raise
                where = f"{type(exc).__name__}: {exc}"[:200]
                client.skipped.append(
                    (info.file, f"driftcheck could not read its HTTP uses ({where})")
                )
                continue
            collectors.append(collector)
            found.update(collector.found_wrappers)
        if not set(found) - set(wrappers):
            break
        wrappers.update(found)
    out: list[HttpUse] = []
    for collector in collectors:
        out += collector.uses
        finder = ReadFinder(collector.module, index, collector.parents, collector.node_gates)
        for use, call, func, value in collector.calls:
            if value is not None:
                out += finder.reads(use, call, func, value)
    return out


def _names_any(text: str | bytes, names: set[str], spelled: dict[str, bytes]) -> bool:
    """Whether a text (a string, or UTF-8 bytes searched for each name's bytes) holds one of
    the names."""
    if isinstance(text, str):
        return any(n in text for n in names)
    return any(spelled[n] in text for n in names)
