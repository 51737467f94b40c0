"""The HTTP checks' declarations, kept apart from their code: the checks are lazy (each loads on
the first use of its kind), so a scan of a client that never talks to the host's server loads
none of them or the host's HTTP-surface reader, yet the registry knows their ids."""

from __future__ import annotations

from driftcheck.checks.declaration import Check, CheckId
from driftcheck.kinds import FixSafety, Kind, Severity, Witness

HTTP_ROUTE_REMOVED = CheckId(
    "http-route-removed", Kind.HTTP_ROUTE, Severity.ERROR, Witness.WORKLOAD
)
HTTP_ROUTE_FLAG = CheckId(
    "http-route-flag",
    Kind.HTTP_ROUTE,
    Severity.ERROR,
    Witness.WORKLOAD,
    fixes=(FixSafety.SAFE, FixSafety.UNSAFE, FixSafety.MANUAL),
    codemods=("add-launch-flag",),
)
HTTP_REQUEST_FIELD = CheckId(
    "http-request-field",
    Kind.HTTP_REQUEST,
    Severity.ERROR,
    Witness.WORKLOAD,
    fixes=(FixSafety.SAFE,),
    codemods=("rename-payload-key",),
)
HTTP_RESPONSE_FIELD = CheckId(
    "http-response-field", Kind.HTTP_RESPONSE, Severity.ERROR, Witness.WORKLOAD
)
HTTP_CLI_FLAG = CheckId(
    "http-cli-flag",
    Kind.CLI_FLAG,
    Severity.ERROR,
    Witness.WORKLOAD,
    fixes=(FixSafety.SAFE, FixSafety.UNSAFE, FixSafety.MANUAL),
    codemods=("rename-launch-flag",),
)

_REQUEST = frozenset({"http-request"})

#: The HTTP checks, in the order they run (routes, request bodies, response reads, flags).
HTTP_CHECKS: tuple[Check, ...] = (
    Check(
        "driftcheck.checks.http_routes",
        (HTTP_ROUTE_REMOVED, HTTP_ROUTE_FLAG),
        lazy=True,
        loads_on=_REQUEST,
    ),
    Check("driftcheck.checks.http_request", (HTTP_REQUEST_FIELD,), lazy=True, loads_on=_REQUEST),
    Check(
        "driftcheck.checks.http_response",
        (HTTP_RESPONSE_FIELD,),
        lazy=True,
        loads_on=frozenset({"http-read"}),
    ),
    Check(
        "driftcheck.checks.http_flags",
        (HTTP_CLI_FLAG,),
        lazy=True,
        loads_on=frozenset({"launch"}),
    ),
)
