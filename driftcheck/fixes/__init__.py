"""Fixes: libcst codemods per fix kind, patches, and in-place rewrites."""

from __future__ import annotations

from driftcheck.fixes.codemods import CODEMODS
from driftcheck.fixes.patches import FixPlan, apply_in_place, plan, write_patches
from driftcheck.fixes.run import make_patches

__all__ = ["CODEMODS", "FixPlan", "apply_in_place", "make_patches", "plan", "write_patches"]
