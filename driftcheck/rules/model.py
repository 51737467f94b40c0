"""Rule files: host knowledge as data, one TOML file per rule (``rules/<host>/<rule-id>.toml``).

A *drift rule* matches client uses of a host symbol (subclasses included) on target versions in
its range, under conditions (``keyword_present``, ``keyword_absent``, ``keyword_value``,
``result_used``,
``not_followed_by``, ``default_changed``, ``declared``: a declaration in a class the symbol
builds, ``optional-without-default`` or ``unannotated``), and reports a finding with a message, references,
severity and a fix. A *binding rule* (``kind = "binding"``) tells receiver inference what plain
code does not show: a keyword whose dotted-path value names a client class the host mixes into one
of its classes, attributes whose runtime type the host's annotations do not give, and methods that
dispatch a method name given as a string to another class.

Every rule carries ``[[cases]]`` (valid / invalid code, and the code after its fix), run by one
generic test against the host versions in its ``[test]`` table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from driftcheck.compat import tomllib
from driftcheck.errors import UsageError
from driftcheck.findings import Fix
from driftcheck.kinds import FixSafety, Kind, Severity, Witness

CONDITIONS = (
    "keyword_present",
    "keyword_absent",
    "keyword_value",
    "result_used",
    "result_indexed",
    "not_followed_by",
    "requires_call",
    "default_changed",
    "served_in",
    "mined",
    "declared",
)
USE_KINDS = ("call", "attribute", "import", "declaration", "any")


class RuleError(UsageError):
    """A rule file that does not follow the schema."""


@dataclass(frozen=True)
class RuleCase:
    """One example: ``valid`` code (no finding) or ``invalid`` code (one finding, maybe fixed)."""

    kind: str
    code: str
    fixed: str | None = None
    note: str = ""
    #: The served model the case is scanned with (``scan --model``; None: the default).
    model: str | None = None


@dataclass(frozen=True)
class Rule:
    """One rule file, validated."""

    id: str
    host: str
    versions: SpecifierSet
    kind: str
    path: Path
    severity: str = "error"
    message: str = ""
    references: tuple[str, ...] = ()
    match: dict = field(default_factory=dict)
    conditions: dict = field(default_factory=dict)
    fix: Fix | None = None
    binding: dict = field(default_factory=dict)
    test: dict = field(default_factory=dict)
    cases: tuple[RuleCase, ...] = ()
    #: ``[witness]``: how ``--verify`` shows the drift at run time (``check`` and its
    #: parameters); empty: the default witness of the rule's kind.
    witness: tuple[tuple[str, str], ...] = ()
    #: The rule file's text (what a cache key of the rule set is made from).
    source: str = field(default="", compare=False, repr=False)

    def applies_to(self, host: str, version: str) -> bool:
        """True for this host on a target version in the rule's range."""
        if norm_host(host) != norm_host(self.host):
            return False
        try:
            return Version(version) in self.versions
        except InvalidVersion:
            return False


def norm_host(name: str) -> str:
    return name.lower().replace("_", "-").split("-cpu")[0]


def load_rule(path: Path) -> Rule:
    """Read and validate one rule file (raises :class:`RuleError` naming the file)."""
    try:
        source = path.read_text(encoding="utf-8")
        data = tomllib.loads(source)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise RuleError(f"{path}: {exc}") from None

    def need(key: str, kind: type) -> object:
        if key not in data:
            raise RuleError(f"{path}: missing key {key!r}")
        if not isinstance(data[key], kind):
            raise RuleError(f"{path}: {key!r} must be a {kind.__name__}")
        return data[key]

    rule_id = need("id", str)
    if rule_id != path.stem:
        raise RuleError(f"{path}: id {rule_id!r} differs from the file name {path.stem!r}")
    kind = str(need("kind", str))
    if kind != "binding" and kind not in list(Kind):
        raise RuleError(f"{path}: unknown kind {kind!r}")
    try:
        versions = SpecifierSet(str(need("versions", str)))
    except InvalidSpecifier as exc:
        raise RuleError(f"{path}: bad versions: {exc}") from None
    known = {"id", "host", "versions", "kind", "severity", "message", "references", "match"}
    known |= {"conditions", "fix", "binding", "test", "cases", "description", "witness"}
    unknown = set(data) - known
    if unknown:
        raise RuleError(f"{path}: unknown key(s) {', '.join(sorted(unknown))}")
    severity = data.get("severity", "error")
    if severity not in list(Severity):
        raise RuleError(f"{path}: unknown severity {severity!r}")
    conditions = data.get("conditions", {})
    bad = set(conditions) - set(CONDITIONS)
    if bad:
        raise RuleError(f"{path}: unknown condition(s) {', '.join(sorted(bad))}")
    values = conditions.get("keyword_value", {})
    if not isinstance(values, dict) or not all(
        isinstance(v, str) or (isinstance(v, list) and v and all(isinstance(x, str) for x in v))
        for v in values.values()
    ):
        raise RuleError(
            f"{path}: keyword_value must be a table of keyword = literal (or a list of them), "
            'e.g. keyword_value = { copy = ["False", "0"] }'
        )
    match = data.get("match", {})
    if kind != "binding":
        if not isinstance(match.get("symbol"), str):
            raise RuleError(f"{path}: [match] needs a 'symbol'")
        if match.get("use", "any") not in USE_KINDS:
            raise RuleError(f"{path}: [match] use must be one of {', '.join(USE_KINDS)}")
        need("message", str)
    served = data.get("binding", {}).get("served_model")
    if served is not None and not (
        isinstance(served, dict)
        and all(isinstance(served.get(k), str) for k in ("holder", "registry", "package"))
    ):
        raise RuleError(f"{path}: [binding.served_model] needs holder, registry and package")
    fix = None
    if "fix" in data:
        f = data["fix"]
        if f.get("safety") not in list(FixSafety):
            raise RuleError(f"{path}: [fix] safety must be one of {', '.join(FixSafety)}")
        fix = Fix(
            safety=FixSafety(f["safety"]),
            description=str(f.get("description", "")),
            codemod=f.get("codemod"),
            params=tuple(sorted((str(k), str(v)) for k, v in (f.get("params") or {}).items())),
        )
    witness = data.get("witness", {})
    if not isinstance(witness, dict) or (witness and witness.get("check") not in list(Witness)):
        raise RuleError(f"{path}: [witness] check must be one of {', '.join(Witness)}")
    if not witness and isinstance(conditions.get("default_changed"), str):
        # The rule's own premise is what a witness can show: the default on both releases.
        witness = {"check": "default", "field": conditions["default_changed"]}
    cases = []
    for i, c in enumerate(data.get("cases", [])):
        if c.get("kind") not in ("valid", "invalid") or not isinstance(c.get("code"), str):
            raise RuleError(f"{path}: case {i + 1} needs kind = valid|invalid and code")
        model = c.get("model")
        if model is not None and not isinstance(model, str):
            raise RuleError(f"{path}: case {i + 1}: model must be a string")
        cases.append(RuleCase(c["kind"], c["code"], c.get("fixed"), c.get("note", ""), model))
    return Rule(
        id=rule_id,
        host=str(need("host", str)),
        versions=versions,
        kind=kind,
        path=path,
        severity=severity,
        message=str(data.get("message", "")),
        references=tuple(data.get("references", [])),
        match=match,
        conditions=conditions,
        fix=fix,
        binding=data.get("binding", {}),
        test=data.get("test", {}),
        cases=tuple(cases),
        witness=tuple(sorted((str(k), str(v)) for k, v in witness.items())),
        source=source,
    )


def rule_problems(rule: Rule) -> list[str]:
    """What a rule lacks beyond its schema: an invalid case and a valid near-miss, a test host
    pair to run them against, and the expected code after the fix for fixable rules."""
    problems = []
    kinds = [c.kind for c in rule.cases]
    if "invalid" not in kinds:
        problems.append(f"{rule.id}: no invalid case")
    if "valid" not in kinds:
        problems.append(f"{rule.id}: no valid (near-miss) case")
    if not {"baseline", "target"} <= set(rule.test):
        problems.append(f"{rule.id}: [test] needs baseline and target versions")
    if rule.kind != "binding" and not rule.references:
        problems.append(f"{rule.id}: no references to the host change")
    if rule.fix is not None and rule.fix.safety != "manual":
        if not any(c.fixed for c in rule.cases if c.kind == "invalid"):
            problems.append(f"{rule.id}: fixable rule without the expected code after the fix")
    return problems
