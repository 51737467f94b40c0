"""What differs between the Python versions driftcheck supports."""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, as a package
    import tomli as tomllib

__all__ = ["tomllib"]
