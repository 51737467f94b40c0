"""The uses cache: a client's analysed uses, keyed by everything they depend on.

The key covers the client files' contents, the host release used for receiver inference (name,
version and snapshot identity), the rules (binding rules shape inference) and driftcheck's own
version and code (:func:`driftcheck.cache.code_digest`: its sources and data files), so any
change to one of them is a miss. Entries are pickles in the user's own cache
folder; an unreadable entry is a miss.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from collections.abc import Mapping
from dataclasses import fields
from importlib import metadata

from driftcheck.cache import cache_root, code_digest, code_suffix
from driftcheck.client.texts import Kept, utf8_of
from driftcheck.client.use import Use
from driftcheck.host.api import HostAPI


def _own_version() -> str:
    try:
        return metadata.version("driftcheck")
    except metadata.PackageNotFoundError:
        return "0"


def uses_key(texts: Mapping[str, Kept], api: HostAPI, roots: set[str], rules_digest: str) -> str:
    """Cache key of a client analysis (``rules_digest``: the rule set's, binding rules shape
    receiver inference)."""
    h = hashlib.sha256()
    h.update(_own_version().encode())
    h.update(code_digest().encode())
    h.update(rules_digest.encode())
    h.update(f"{api.name}\0{api.version}\0{getattr(api.tree, 'path', api.tree.label)}".encode())
    h.update("\0".join(sorted(roots)).encode())
    for rel in sorted(texts):
        h.update(rel.encode())
        text = texts[rel]  # a kept text: its UTF-8 bytes, or the string
        h.update(hashlib.sha256(utf8_of(text)).digest())
    return h.hexdigest()


def _path(key: str) -> str:
    return str(cache_root() / "uses" / f"{key}{code_suffix()}")


def load_uses(key: str) -> tuple[list[Use], list, dict, set] | None:
    """A cached analysis, or None."""
    try:
        with open(_path(key), "rb") as f:
            data = pickle.load(f)
            chunks = -(-data["uses"]["count"] // _CHUNK)
            columns = [
                [v for _ in range(chunks) for v in pickle.load(f)] for _ in data["uses"]["fields"]
            ]
        data["uses"]["columns"] = columns
        return _from_columns(data["uses"]), data["skipped"], data["mixed"], data["names"]
    except (
        OSError,
        EOFError,
        pickle.UnpicklingError,
        KeyError,
        TypeError,
        AttributeError,
        ValueError,
    ):
        return None


#: How many values of a column one pickle holds.
_CHUNK = 8192
#: The fields of a :class:`Use`, in the order its constructor takes them.
_FIELDS = tuple(f.name for f in fields(Use))


def _split(uses: list[Use]) -> tuple[list[Use], list[tuple[int, Use]]]:
    """The plain ``Use`` records (stored as one list per field) and the others, with their
    places.

    Pickled one by one, each slotted record's state is a dict of its 27 fields that the
    pickler's memo keeps until the end of the dump, and the unpickler's until the end of the
    load: 200 MB for transformers' 167,000 uses, at the scan's peak. Columns hold no
    per-record container."""
    plain = [u for u in uses if type(u) is Use]
    others = [(i, u) for i, u in enumerate(uses) if type(u) is not Use]
    return plain, others


def _from_columns(data: dict) -> list[Use]:
    """The uses :func:`save_uses` stored, in their order."""
    if data["fields"] != _FIELDS:
        raise ValueError("the uses were stored with other fields")
    uses = [Use(*values) for values in zip(*data["columns"], strict=True)]
    for i, use in data["others"]:
        uses.insert(i, use)
    return uses


def save_uses(key: str, uses: list[Use], skipped: list, mixed: dict, names: set) -> None:
    """Store an analysis (atomically); failures are ignored (a cache is an optimisation)."""
    path = _path(key)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.part"
        plain, others = _split(uses)
        data = {
            "uses": {"fields": _FIELDS, "others": others, "count": len(plain)},
            "skipped": list(skipped),
            "mixed": mixed,
            "names": names,
        }
        with open(tmp, "wb") as f:
            pickle.dump(data, f, protocol=pickle.HIGHEST_PROTOCOL)
            # Each column in pickles of at most ``_CHUNK`` values, each built and written
            # alone: one pickle of every column held them all at once with the pickler's memo
            # of every object they hold (70 MB of transformers' peak, which comes while its
            # uses are stored), and one pickle a column still held a column's (25 MB).
            for name in _FIELDS:
                for at in range(0, len(plain), _CHUNK):
                    chunk = [getattr(u, name) for u in plain[at : at + _CHUNK]]
                    pickle.dump(chunk, f, pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except (OSError, pickle.PicklingError, TypeError):
        pass


def findings_key(uses: str | None, target: HostAPI, baseline: HostAPI | None) -> str | None:
    """Key of a check run: only when every input is immutable (release snapshots)."""
    trees = [target.tree] + ([baseline.tree] if baseline is not None else [])
    if uses is None or not all(hasattr(t, "fact") for t in trees):
        return None
    h = hashlib.sha256(uses.encode())
    for t in trees:
        h.update(str(getattr(t, "path", "")).encode())
    h.update(b"\0" if baseline is None else b"\1")
    return h.hexdigest()


def _findings_path(key: str) -> str:
    return str(cache_root() / "findings" / f"{key}{code_suffix()}")


def load_findings(key: str) -> object | None:
    """A cached check run (its findings and what it could not decide), or None."""
    try:
        with open(_findings_path(key), "rb") as f:
            return pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, TypeError, ValueError):
        return None


def save_findings(key: str, findings: object) -> None:
    """Store a check run (atomically); failures are ignored."""
    path = _findings_path(key)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.part"
        with open(tmp, "wb") as f:
            pickle.dump(findings, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except (OSError, pickle.PicklingError, TypeError):
        pass
