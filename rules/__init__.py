"""driftcheck's built-in rules, one TOML file per rule under ``<host>/``.

This folder ships inside the package as ``driftcheck.rules.builtin`` (see ``pyproject.toml``),
and driftcheck reads it with :mod:`importlib.resources`; this file makes it a package.
"""
