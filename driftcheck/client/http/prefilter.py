"""Which client files could talk to the host's server, decided from their text alone.

The scan asks this before it loads any of the HTTP readers: a client none of whose files imports
an HTTP client or a way to start processes, runs ``python -m`` or starts a string with one of the
host's console scripts has no HTTP uses, and the scan imports nothing of ``driftcheck.http``
beyond this module.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from driftcheck.compat import tomllib

if TYPE_CHECKING:
    from driftcheck.client.package import Client
    from driftcheck.host.api import HostAPI

#: A file that imports an HTTP client, the OpenAI SDK or a way to start a process: it may talk
#: to the host's server without ever naming the host.
IMPORTS = re.compile(
    r"^[ \t]*(?:import|from)[ \t]+(?:httpx|requests|aiohttp|openai|subprocess|shlex)\b", re.M
)


def talks_alone(text: str, scripts: frozenset[str], quoted: re.Pattern[str] | None) -> bool:
    """Can the file send a request or start the server by its text alone? (It imports an HTTP
    client or a way to start processes, starts a string with one of the host's console scripts
    (``"vllm serve ..."``, ``["vllm", ...]``: a file that only imports the host does not), or
    runs ``python -m``: ``os.execvp(sys.executable, [sys.executable, "-m", ...])``.) A file
    that names one of the client's wrappers may too: the caller asks that per round of them.
    ``quoted`` is :func:`script_strings` of ``scripts``, searched for only in a text that holds
    one of them."""
    return bool(
        imports_talker(text)
        or '"-m"' in text
        or "'-m'" in text
        or (
            quoted is not None
            and any(s in text for s in scripts)
            and quoted.search(text) is not None
        )
    )


def imports_talker(text: str) -> bool:
    """Does the file import an HTTP client or a way to start processes (:data:`IMPORTS`)? The
    modules' names are looked for first: a plain substring test skips most files, where the
    pattern tried every line."""
    return any(m in text for m in _TALKERS) and IMPORTS.search(text) is not None


#: The modules :data:`IMPORTS` names.
_TALKERS = ("httpx", "requests", "aiohttp", "openai", "subprocess", "shlex")


def script_strings(scripts: frozenset[str]) -> re.Pattern[str] | None:
    """A string literal that starts with one of ``scripts`` as a word (found by its quote: a
    prefix such as ``f"`` changes no answer to whether a text holds one, and leading with it
    made the search try every character)."""
    if not scripts:
        return None
    names = "|".join(re.escape(s) for s in sorted(scripts))
    return re.compile(rf"""["'](?:{names})(?=["'\s])""")


def promote_http_files(client: Client) -> None:
    """Move the client's files that do not name the host but import an HTTP client (or start
    processes) into the analysed ones: they are parsed and their lines kept for reports."""
    for rel in list(client.unread):
        if imports_talker(client.unread[rel]):
            client.unread.move(rel, client.texts)
            client.lines.add(rel, client.texts.kept(rel))


def any_may_talk(client: Client, api: HostAPI) -> bool:
    """Could any analysed file of the client talk to the host's server?"""
    scripts = frozenset(console_scripts(api))
    quoted = script_strings(scripts)
    return any(talks_alone(text, scripts, quoted) for text in client.texts.values())


def console_scripts(api: HostAPI) -> tuple[str, ...]:
    """The console scripts the host's distribution declares (a snapshot fact)."""
    return tuple(api.fact("console-scripts:1", lambda: list(_read_scripts(api))))


def _read_scripts(api: HostAPI) -> list[str]:
    import configparser

    tree = api.tree
    try:
        files = tree.files()
    except (OSError, AttributeError):
        return []
    names: list[str] = []
    for rel in files:
        if rel.count("/") == 1 and rel.endswith(
            (".dist-info/entry_points.txt", ".egg-info/entry_points.txt")
        ):
            parser = configparser.ConfigParser(interpolation=None)
            try:
                parser.read_string(tree.read_text(rel))
            except (configparser.Error, OSError, UnicodeDecodeError, ValueError):
                continue
            if parser.has_section("console_scripts"):
                names += list(parser["console_scripts"])
        elif rel == "pyproject.toml":
            try:
                data = tomllib.loads(tree.read_text(rel))
            except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError, ValueError):
                continue
            names += list(data.get("project", {}).get("scripts", {}))
    return sorted(set(names))
