"""The client's uses of the host (stage 3's entry for the pipeline and the timeline): the
client indexed repo-wide, its receivers typed with the rules' bindings and the served model,
every use collected with its gate, the HTTP uses where a file can talk to the host's server,
and the gates of the modules and functions the client imports only under conditions; kept in
the uses cache."""

from __future__ import annotations

import functools
import gc
import os
import re
from collections import ChainMap
from collections.abc import Mapping

from driftcheck.client.bindings import apply_bindings
from driftcheck.client.gate_reader import GateReader
from driftcheck.client.gating import assignment_gates
from driftcheck.client.http.prefilter import any_may_talk, promote_http_files
from driftcheck.client.index import ClientIndex, ModuleInfo, parse_module
from driftcheck.client.lines import words_of
from driftcheck.client.package import Client, parse_client
from driftcheck.client.reach import dead_modules, function_gates, module_gates, unread_sites
from driftcheck.client.types import TypeInferrer
from driftcheck.client.uses import Use, UseCollector
from driftcheck.gates import Gate, all_of
from driftcheck.host.api import HostAPI
from driftcheck.host.class_hooks import class_hooks, is_host_hook
from driftcheck.host.served_model import ServedModel
from driftcheck.rules.ruleset import RuleSet


def collect_uses(
    client: Client,
    types_api: HostAPI,
    roots: set[str],
    rules: RuleSet,
    served: ServedModel | None = None,
) -> list[Use]:
    """The client's uses of the host, from the uses cache when the same client files were
    analysed against the same host release, rules and served model before."""
    from driftcheck.client.cache import load_uses, save_uses, uses_key

    promote_http_files(client)
    _promote_hook_files(client, types_api)
    digest = rules.digest + (served.digest() if served is not None else "")
    key = uses_key(client.key_texts(), types_api, roots, digest)
    client.uses_key = key
    cached = load_uses(key)
    loaded = len(client.skipped)  # skipped while reading: not the analysis's to keep
    if cached is not None:
        uses, skipped, client.mixed, client.own_names = cached
        client.skipped.extend(skipped)
        return uses
    # Each module is frozen out of the cyclic GC once indexed: the trees and the index are
    # built to last until the uses are collected, and every full collection walked all of them
    # again (13 of transformers' 15 s of GC). Nothing of theirs is cyclic garbage (no walker
    # holds itself, see ``names.Walker``), so dropping them frees them without a collection.
    # A caller that froze objects of its own keeps them frozen: then nothing is frozen here.
    freeze = gc.get_freeze_count() == 0
    try:
        index = _parsed_and_indexed(client, freeze)
        uses = _collect_uses(client, index, types_api, roots, rules, served)
        client.mixed, client.own_names = client.mixed_methods(), client.names()
    finally:
        if freeze:
            gc.unfreeze()
    client.index = None  # the syntax trees are not needed past this point: free them
    client.modules.clear()
    save_uses(key, uses, client.skipped[loaded:], client.mixed, client.own_names)
    return uses


def _parsed_and_indexed(client: Client, freeze: bool = False) -> ClientIndex:
    """The client's files parsed and indexed repo-wide.

    Each module is indexed as soon as it is parsed: the index's walk shares the line numbers
    of its nodes, and the parser's own numbers it frees are reused by the next file's tree
    instead of being freed only once every tree is built (136 MB of transformers' peak). Where
    two files give one module name, the later one replaces the first before any is indexed.
    With ``freeze``, everything alive is frozen out of the cyclic GC after each module."""
    index = ClientIndex()
    client.index = index
    deep: list[tuple[str, str]] = []

    def add(info: ModuleInfo) -> None:
        client.lines.note_statements(info.file, info.tree)
        try:
            index.add_module(info)
        except RecursionError:
            deep.append((info.file, "too deeply nested to analyse"))
            del client.modules[info.name]
        if freeze:
            gc.freeze()

    names = [client.tree.module_name(rel) for rel in client.texts]
    if len(set(names)) == len(names):
        parse_client(client, then=add)
    else:
        parse_client(client)
        for info in list(client.modules.values()):
            add(info)
    client.skipped.extend(deep)  # after the files that do not parse, as when indexed after
    return index


def _collect_uses(
    client: Client,
    index: ClientIndex,
    types_api: HostAPI,
    roots: set[str],
    rules: RuleSet,
    served: ServedModel | None,
) -> list[Use]:
    """Collect every use of the host, file by file, with the client indexed repo-wide."""
    bindings = rules.bindings(types_api.name)
    if served is not None:
        bindings.attributes.update(served.attributes)
    _promote_importers(client, index, TypeInferrer(index, types_api, bindings))
    types = TypeInferrer(index, types_api, bindings)
    apply_bindings(index, types)
    dists = {types_api.name, types_api.name.removesuffix("-cpu")}
    gates = GateReader(index, roots, dists)
    for info in client.modules.values():
        types.value_gates.update(assignment_gates(info, gates))
    uses: list[Use] = []
    sites: list = []
    refs: list = []
    for info in client.modules.values():
        collector = UseCollector(info, index, types, roots, gates)
        try:
            uses.extend(collector.run())
            sites.extend(collector.import_sites)
            refs.extend(collector.function_refs)
        except RecursionError:
            client.skipped.append((info.file, "too deeply nested to analyse"))
        except Exception as exc:  # one file driftcheck trips on never stops the scan
            if os.environ.get("DRIFTCHECK_DEBUG", "") not in ("", "0"):
                raise
            where = f"{type(exc).__name__}: {exc}"[:200]
            client.skipped.append((info.file, f"driftcheck could not analyse it ({where})"))
    if any_may_talk(client, types_api):  # the HTTP readers load only for a client that talks
        from driftcheck.client.http.collect import http_uses

        uses.extend(http_uses(client, index, gates, roots, types_api))
    unread = (
        (client.tree.module_name(rel), rel.endswith("__init__.py"), text)
        for rel, text in client.unread.items()
    )
    imported = [*sites, *unread_sites(unread)]
    reach = module_gates(imported, set(client.modules))
    plain = {
        name
        for name, info in index.functions.items()
        if info.class_name is None
        and not info.node.decorator_list
        and "." not in name[len(info.module.name) + 1 :]
    }
    called = function_gates(refs, {target for target, _, _ in imported}, plain)
    files = {name: info.file for name, info in client.modules.items()}
    dead = dead_modules(imported, files, lambda: _named_texts(client))
    for use in uses:
        module = client.tree.module_name(use.file)
        extra = [reach.get(module), _function_gate(called, use.scope)]
        if any(g is not None for g in extra):
            use.gate = all_of([g for g in (use.gate, *extra) if g is not None])
        use.dead = dead.get(module, "")
    return uses


def _promote_importers(client: Client, index: ClientIndex, types: TypeInferrer) -> None:
    """Parse the client's files that do not name the host but may import an instance of a host
    class another module builds (``from app.state import ENGINE``; ``state.ENGINE.step()``):
    those that name such a module-level name are indexed with the others."""
    # the module-level names some file holds as a word (one pass over each text): a name no
    # file holds is never inferred; the files' words are not kept (for transformers' 1,476
    # files, a set of words each was 110 MB at the scan's peak)
    names = {_utf8(name) for module in index.modules.values() for name in module.globals}
    candidates: list[str] = []
    spelt: set[bytes] = set()
    for rel, text in client.unread.items():
        if "import" in text:
            candidates.append(rel)
            spelt |= names.intersection(words_of(text))
    named = {name.decode("utf-8", "surrogatepass") for name in spelt}
    wanted: dict[str, set[str]] = {}  # a module-level name -> the last parts of its modules
    for module in list(index.modules.values()):
        for name, values in module.globals.items():
            if name not in named:
                continue
            if any(types.host_class(types.infer(v, None, module)) is not None for v in values):
                wanted.setdefault(name, set()).add(module.name.rsplit(".", 1)[-1])
    if not wanted:
        return
    for rel in candidates:
        text = client.unread[rel]
        # the words first (one pass over the text), the two forms only for names it holds
        words = words_of(text)
        present = {name for name in wanted if _utf8(name) in words}
        if not any(_names_it(text, name, frozenset(wanted[name])) for name in sorted(present)):
            continue
        try:
            info = parse_module(client.tree.module_name(rel), rel, text, client.unread.kept(rel))
            index.add_module(info)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # a file the host never reaches otherwise: left unread
        client.unread.move(rel, client.texts)
        client.lines.add(rel, client.texts.kept(rel))
        client.lines.note_statements(rel, info.tree)
        client.modules[info.name] = info


def _utf8(name: str) -> bytes:
    return name.encode("utf-8", "surrogatepass")  # as :func:`words_of` gives the words


#: A dunder a class body declares: a method (``def __get_validators__(``) or an attribute.
_DUNDER_DECLARED = re.compile(r"^[ \t]*(?:async[ \t]+)?(?:def[ \t]+)?(__\w+__)[ \t]*[(:=]", re.M)


def _promote_hook_files(client: Client, api: HostAPI) -> None:
    """Move the client's files that do not name the host but declare a hook the host looks up
    by string on any class it is given (fastapi's ``UploadFile.__get_validators__`` for
    pydantic, in a module that never imports it) into the analysed ones."""
    declared = {
        rel: names
        for rel, text in client.unread.items()
        if (names := {n for n in _DUNDER_DECLARED.findall(text) if is_host_hook(n)})
    }
    if not declared:
        return
    hooks = {n for n, treats in class_hooks(api, set().union(*declared.values())).items() if treats}
    for rel, names in declared.items():
        if names & hooks:
            client.unread.move(rel, client.texts)
            client.lines.add(rel, client.texts.kept(rel))


@functools.lru_cache(maxsize=4096)
def _imported_by_name(name: str) -> re.Pattern[str]:
    """``from m import (A,\n NAME)``: ``name`` imported by name."""
    return re.compile(
        rf"^[ \t]*from[ \t]+[.\w]+[ \t]+import[ \t]+(?:\([^)]*|[^\n]*)\b{re.escape(name)}\b",
        re.MULTILINE,
    )


@functools.lru_cache(maxsize=4096)
def _read_off(name: str) -> re.Pattern[str]:
    """``.NAME``, ``name`` read off something: a pattern with a literal head, which the regex
    engine finds fast (an alternation of the module names was tried at every character)."""
    return re.compile(rf"\.{re.escape(name)}\b")


def _names_it(text: str, name: str, modules: frozenset[str]) -> bool:
    """Does ``text`` import ``name`` by name, or read it off one of ``modules`` (``m.NAME``,
    ``m`` a whole word)?"""
    if _imported_by_name(name).search(text) is not None:
        return True
    if not all(_WHOLE_WORD.fullmatch(m) for m in modules):
        lasts = "|".join(sorted(re.escape(m) for m in modules))
        return re.search(rf"\b(?:{lasts})\.{re.escape(name)}\b", text) is not None
    for found in _read_off(name).finditer(text):
        end = start = found.start()
        while start and (text[start - 1].isalnum() or text[start - 1] == "_"):  # ``\w``
            start -= 1
        if text[start:end] in modules:
            return True
    return False


_WHOLE_WORD = re.compile(r"\w+")


#: Files that name modules to run (entry points, ``python -m``) besides the Python sources.
_PACKAGING = ("entry_points.txt", ".toml", ".cfg", ".ini", ".yaml", ".yml", ".json", ".sh", ".md")


def _named_texts(client: Client) -> Mapping[str, str]:
    """Every text of the client that may name one of its modules: its Python files, parsed or
    not, and its packaging, configuration and script files (each Python file's text decoded
    only when it is read)."""
    others: dict[str, str] = {}
    for rel in client.tree.files():
        if rel not in client.texts and rel not in client.unread and rel.endswith(_PACKAGING):
            try:
                others[rel] = client.tree.read_text(rel)
            except (OSError, UnicodeDecodeError, ValueError):
                continue
    return ChainMap(client.texts, client.unread, others)


def _function_gate(gates: dict[str, Gate], scope: str) -> Gate | None:
    """The gate of the module-level function a scope lies in (None: none)."""
    while scope:
        if scope in gates:
            return gates[scope]
        scope = scope.rpartition(".")[0]
    return None
