"""Every built-in check, in the order the pipeline runs them: the one list the registry,
``driftcheck rules``, the SARIF rule descriptors and the docs' check table are derived from.

A new check is one module with its :class:`~driftcheck.checks.declaration.Check` and one line
here (a test fails on a check module that is not listed).
"""

from __future__ import annotations

from driftcheck.checks import (
    attribute_missing,
    call_signature,
    class_declarations,
    default_change,
    deprecated,
    host_migration,
    http,
    implementation_swap,
    missing_symbol,
    override_signature,
    positional,
    protocol,
    return_semantics,
    rule_match,
    served_model,
    stale_patch,
    string_ref,
)
from driftcheck.checks.declaration import Check

CHECKS: tuple[Check, ...] = (
    missing_symbol.CHECK,
    stale_patch.CHECK,
    attribute_missing.CHECK,
    served_model.CHECK,
    call_signature.CHECK,
    positional.CHECK,
    default_change.CHECK,
    host_migration.CHECK,
    return_semantics.CHECK,
    string_ref.CHECK,
    override_signature.CHECK,
    class_declarations.CHECK,
    deprecated.CHECK,
    implementation_swap.CHECK,
    *http.HTTP_CHECKS,  # routes, request bodies, response reads, launch flags (loaded on first use)
    protocol.CHECK,
    rule_match.CHECK,
)
