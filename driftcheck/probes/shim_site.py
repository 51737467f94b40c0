"""driftcheck probe shim: corrects lines of the host's modules as they are imported.

Copied as ``sitecustomize.py`` into a folder on the server's ``PYTHONPATH`` (so every process the
server spawns runs it too), next to ``driftcheck_source_shims.json``: module name -> list of
``[old, new]`` or ``[old, new, after]`` replacements. A module is compiled from its own file with
the first ``old`` (after the first ``after``, where given) replaced (tracebacks keep its file and
lines); a replacement whose ``old`` is not there is skipped.
Runs under the target's interpreter and imports nothing from driftcheck.
"""

import importlib.machinery
import json
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
try:
    with open(os.path.join(_HERE, "driftcheck_source_shims.json")) as _f:
        _SHIMS = json.load(_f)
except (OSError, ValueError):
    _SHIMS = {}


class _ShimLoader(importlib.machinery.SourceFileLoader):
    def get_code(self, fullname):  # noqa: ANN001, ANN201
        source = self.get_data(self.path).decode("utf-8")
        for old, new, *after in _SHIMS.get(fullname, []):
            start = source.find(after[0]) if after else 0
            at = source.find(old, start) if start >= 0 else -1
            if at >= 0:
                source = source[:at] + new + source[at + len(old) :]
        return compile(source, self.path, "exec", dont_inherit=True)


class _ShimFinder:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):  # noqa: ANN001, ANN206
        if fullname not in _SHIMS:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not str(spec.origin or "").endswith(".py"):
            return spec
        spec.loader = _ShimLoader(fullname, spec.origin)
        return spec


if _SHIMS:
    sys.meta_path.insert(0, _ShimFinder)
