"""One use of the host's server by the client, as data (cached with the client's analysis)."""

from __future__ import annotations

from dataclasses import dataclass

from driftcheck.client.use import Use
from driftcheck.gates import Gate, Side
from driftcheck.host.signature import KeyOp

Span = tuple[int, int, int, int]


@dataclass
class HttpUse(Use):
    """A use of the host's server: a request (``http-request``), a read of its response
    (``http-read``) or a command line that starts it (``launch``).

    Attributes:
        http_method: ``POST``, ``GET``, ...
        path: The route path the client addresses (``{}`` for a non-literal segment).
        api: How it is sent (``httpx``, ``openai chat.completions.create``, ...).
        payload: The JSON body's keys (dict dataflow, each under its gate).
        payload_complete: Every key of the body is known.
        nested: The keys of the body's nested objects, each with the keys above it (``"[]"``
            for a list's items): ``{"stream_options": {"include_usage": True}}``.
        field: For reads: the path read in the response (``("choices", "[]", "x")``).
        optional: For reads: the client copes with its absence (a default).
        returns: For OpenAI calls: the SDK classes of the result (``isinstance`` narrowing).
        narrow: For reads: the SDK classes an ``isinstance`` test narrows the result to, and
            whether the read runs where the test holds.
        flags: For launches: the flags passed, with their spans (``flag_gates``: the gate
            each is added under, as ``cmd += [...]`` in an ``if`` on the host's version).
        argv_open: For launches: the command has parts that are not literal.
        argv_tails: For launches: those parts, as written (``extra_args``), for a finding
            that holds unless they pass a flag.
        keyed_flags: For launches: where the flags built from a dict's keys are written (the
            key, ``{"max_model_len": n}`` for ``--max-model-len``): no flag literal to rename.
        argv_list: For launches: the command is a list literal a fix can append to.
    """

    http_method: str = ""
    path: str = ""
    api: str = ""
    payload: tuple[KeyOp, ...] = ()
    payload_complete: bool = True
    nested: tuple[tuple[tuple[str, ...], KeyOp], ...] = ()
    field: tuple[str, ...] = ()
    optional: bool = False
    returns: tuple[str, ...] = ()
    narrow: tuple[tuple[str, ...], bool] | None = None
    flags: tuple[tuple[str, Span], ...] = ()
    #: For launches: the gate each flag is added under (None: wherever the command runs).
    flag_gates: tuple[Gate | None, ...] = ()
    argv_open: bool = False
    argv_tails: tuple[str, ...] = ()
    keyed_flags: tuple[Span, ...] = ()
    argv_list: bool = False

    def flags_on(self, on: Side) -> list[tuple[str, Span]]:
        """The flags the command passes on one host release (a flag added under a gate that
        does not hold there is not passed; one whose gate cannot be decided is)."""
        gates = self.flag_gates or (None,) * len(self.flags)
        return [
            f
            for f, g in zip(self.flags, gates, strict=False)
            if g is None or g.holds(on) is not False
        ]
