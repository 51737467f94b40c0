"""Rules: host knowledge as data, one TOML file per rule (``rules/<host>/<rule-id>.toml``).

:mod:`~driftcheck.rules.model` reads and validates one file, :mod:`~driftcheck.rules.ruleset`
gathers the built-in rules and a user's folders into the :class:`RuleSet` a run is given;
the check :mod:`~driftcheck.checks.rule_match` matches drift rules against the client's uses.
"""

from driftcheck.rules.model import Rule, RuleCase, RuleError, load_rule, rule_problems
from driftcheck.rules.ruleset import Bindings, RuleSet, RulesMissing, builtin_rules, load_rules

__all__ = [
    "Bindings",
    "Rule",
    "RuleCase",
    "RuleError",
    "RuleSet",
    "RulesMissing",
    "builtin_rules",
    "load_rule",
    "load_rules",
    "rule_problems",
]
