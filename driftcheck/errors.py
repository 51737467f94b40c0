"""Errors that end a run with one clear line and exit code 2."""

from __future__ import annotations


class DriftcheckError(Exception):
    """A problem the user can act on; printed as one line, exit code 2."""

    exit_code = 2


class UsageError(DriftcheckError):
    """Bad command-line input or configuration."""


class FetchError(DriftcheckError):
    """A release could not be fetched (unknown package or version, no network)."""


class SourceError(DriftcheckError):
    """A source tree could not be read (corrupt archive, missing distribution)."""
