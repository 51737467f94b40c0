"""The words a finding is told in: kinds of drift, severities, fix safety, witnesses.

Each is a ``str`` enum, so JSON, SARIF and text output show the same strings as before, and a
string read back from a report or a rule file compares equal to its member.
"""

from __future__ import annotations

from enum import Enum


class Word(str, Enum):
    """A ``str`` enum that prints as its value on every Python (3.12 changed ``format()``)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class Kind(Word):
    """Kind of drift: the ``kind`` of every finding, of a check's or a rule's."""

    MISSING_SYMBOL = "missing-symbol"
    MOVED_SYMBOL = "moved-symbol"
    CALL_SIGNATURE = "call-signature"
    RETURN_SEMANTICS = "return-semantics"
    CALL_PROTOCOL = "call-protocol"
    ATTRIBUTE_MISSING = "attribute-missing"
    OVERRIDE_SIGNATURE = "override-signature"
    STRING_REF = "string-ref"
    BEHAVIOUR_CHANGE = "behaviour-change"
    DEPRECATED = "deprecated"
    SERVED_MODEL = "served-model"
    HTTP_ROUTE = "http-route"
    HTTP_REQUEST = "http-request"
    HTTP_RESPONSE = "http-response"
    CLI_FLAG = "cli-flag"
    CLASS_DECLARATION = "class-declaration"


#: What each kind means (``--disable KIND`` drops every finding of it).
KIND_MEANING: dict[Kind, str] = {
    Kind.MISSING_SYMBOL: "a host name the client reaches is gone from the target",
    Kind.MOVED_SYMBOL: "a host name the client reaches now lives elsewhere",
    Kind.CALL_SIGNATURE: "a call that bound at baseline no longer binds",
    Kind.RETURN_SEMANTICS: "a used result whose return gained None, became None or changed shape",
    Kind.CALL_PROTOCOL: "a host method that gained a mandatory follow-up call",
    Kind.ATTRIBUTE_MISSING: "an attribute read off a typed host receiver is gone",
    Kind.OVERRIDE_SIGNATURE: (
        "a client stand-in for a host method no longer accepts what the host passes"
    ),
    Kind.STRING_REF: "host code named in a string is gone",
    Kind.BEHAVIOUR_CHANGE: (
        "the code runs, but does something else (defaults, implementation swaps)"
    ),
    Kind.DEPRECATED: "a host API the client uses now warns that it is deprecated",
    Kind.SERVED_MODEL: "the class the served model's config selects lacks what the client reaches",
    Kind.HTTP_ROUTE: "an HTTP route the client calls is gone, moved, or registered only under a flag",
    Kind.HTTP_REQUEST: "a request body field the client sends is gone, renamed, or newly required",
    Kind.HTTP_RESPONSE: "a response field the client reads is no longer sent",
    Kind.CLI_FLAG: "a server flag the client's launch command passes is gone, renamed or deprecated",
    Kind.CLASS_DECLARATION: (
        "a hook or magic attribute a client class declares that the host now rejects, warns"
        " about, or never looks up"
    ),
}


class Severity(Word):
    """How bad a finding is, least first (``--fail-on`` and the exit code order them)."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


class FixSafety(Word):
    """A fix a codemod applies as is (``safe``), only with ``--unsafe-fixes`` (``unsafe``), or a
    guideline for a person (``manual``)."""

    SAFE = "safe"
    UNSAFE = "unsafe"
    MANUAL = "manual"


class Witness(Word):
    """What ``--verify``'s witness program does to show a finding on the real host.

    All of them import host modules and read attributes (a module ``__getattr__`` runs); only
    ``warns`` runs more: the import in a fresh interpreter, so that import-time code runs again
    under a warnings recorder. None calls or constructs host objects: binding a call's arguments
    to the host's runtime signature is what a call or a dataclass/pydantic/msgspec construction
    checks first, and the rest is the workload's to show (``driftcheck probe``).
    """

    RESOLVE = "resolve"
    BIND = "bind"
    POSITIONS = "positions"
    MEMBER = "member"
    DEFAULT = "default"
    PARAMS = "params"
    WARNS = "warns"
    WORKLOAD = "workload"


#: What each witness does.
WITNESS_DOES: dict[Witness, str] = {
    Witness.RESOLVE: "import the module and read the attribute chain the client reads",
    Witness.BIND: "bind the call's arguments to inspect.signature() of what it calls",
    Witness.POSITIONS: "bind the positional arguments and name the parameter each lands on",
    Witness.MEMBER: "look the member up on the receiver's class (MRO, fields, annotations, slots)",
    Witness.DEFAULT: "read the default of a field or parameter",
    Witness.PARAMS: "read the runtime signature of the host method a client function stands in for",
    Witness.WARNS: "import or read the name in a fresh interpreter, recording the warnings raised",
    Witness.WORKLOAD: "nothing: only the real workload shows it (driftcheck probe)",
}

#: The witness of each kind (a rule can declare another in ``[witness]``; a check declares its
#: own per id).
KIND_WITNESS: dict[Kind, Witness] = {
    Kind.MISSING_SYMBOL: Witness.RESOLVE,
    Kind.MOVED_SYMBOL: Witness.RESOLVE,
    Kind.STRING_REF: Witness.RESOLVE,
    Kind.CALL_SIGNATURE: Witness.BIND,
    Kind.ATTRIBUTE_MISSING: Witness.MEMBER,
    Kind.OVERRIDE_SIGNATURE: Witness.PARAMS,
    Kind.DEPRECATED: Witness.WARNS,
    Kind.RETURN_SEMANTICS: Witness.WORKLOAD,
    Kind.CALL_PROTOCOL: Witness.WORKLOAD,
    Kind.BEHAVIOUR_CHANGE: Witness.WORKLOAD,
    Kind.SERVED_MODEL: Witness.WORKLOAD,
    Kind.HTTP_ROUTE: Witness.WORKLOAD,
    Kind.HTTP_REQUEST: Witness.WORKLOAD,
    Kind.HTTP_RESPONSE: Witness.WORKLOAD,
    Kind.CLI_FLAG: Witness.WORKLOAD,
    Kind.CLASS_DECLARATION: Witness.WORKLOAD,
}
