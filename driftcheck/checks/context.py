"""What every check sees: the baseline and target host APIs and the client's uses."""

from __future__ import annotations

from dataclasses import dataclass, field

from driftcheck.client.uses import Use
from driftcheck.findings import Evidence
from driftcheck.host.api import UNKNOWN, Found, HostAPI, Lookup


@dataclass
class CheckContext:
    """Baseline (optional) and target host, plus all uses for cross-use conditions."""

    target: HostAPI
    baseline: HostAPI | None = None
    uses: list[Use] = field(default_factory=list)
    reported: set[tuple[str, str]] = field(default_factory=set)
    #: Host class path -> method names client classes mixed into it define.
    mixed_methods: dict[str, set[str]] = field(default_factory=dict)
    #: Dotted names of the client's own modules and classes.
    client_names: set[str] = field(default_factory=set)

    def lookup(self, api: HostAPI, use: Use) -> Lookup:
        """What ``use`` reaches in ``api``: Found, None (certainly absent) or UNKNOWN."""
        if use.receiver and use.member:
            cls = api.resolve(use.receiver)
            if not isinstance(cls, Found):
                return UNKNOWN
            got = api.class_member(cls, use.member)
            if got is UNKNOWN and api is self.target and self.baseline is not None:
                # An external base (e.g. torch.nn.Module) makes absence undecidable in general;
                # a member the host itself defined at baseline and no longer defines is gone.
                bcls = self.baseline.resolve(use.receiver)
                if isinstance(bcls, Found) and self.baseline.defined_in_host_mro(bcls, use.member):
                    return api.defined_in_host_mro(cls, use.member)
            return got
        return api.resolve(use.symbol)

    def evidence(self, api: HostAPI, found: Lookup, note: str = "") -> Evidence | None:
        """Evidence for a found host object in one version."""
        if not isinstance(found, Found):
            return None
        return Evidence(version=api.version, file=found.file, line=found.line, note=note)

    def once(self, file: str, key: str) -> bool:
        """True the first time a (file, key) pair is reported; later reports are dropped."""
        if (file, key) in self.reported:
            return False
        self.reported.add((file, key))
        return True
