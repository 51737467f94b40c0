"""The registry of codemods, one per fix kind, each driven by the finding and the rule's fix
parameters (they live in calls.py, keywords.py, moves.py and renames.py).

* ``follow-up-call``: ``x = recv.m(a)`` → ``recv.m(a)`` then ``x = recv.s(None)`` (also a bare
  call, a ``return`` and an ``if`` test).
* ``rename-import``: move an imported name to the module that now holds it (``from`` and
  ``import x as y`` statements, where they stand); a name read off a module is pointed at a
  name already imported from its new home.
* ``rename-attribute``: ``recv.old(...)`` → ``recv.new(...)``.
* ``add-keyword``: pass a keyword with a value the rule supplies (``{arg:NAME}`` stands for the
  code passed as keyword ``NAME`` at that call).
* ``remove-keyword`` / ``rename-keyword``: drop or rename a keyword the host no longer takes.
* ``positional-to-keyword``: pass shifted positional arguments by keyword.
* ``unwrap-result``: ``r = f(...)[0]`` → ``r = f(...)``, also through one variable.
* ``accept-kwargs``: add ``**kwargs`` to a function that stands in for a host method.
* ``keyword-to-call``: ``x = f(k=v)`` -> ``x = f()`` then a call that hands ``v`` to where the
  host reads it now (``{result}``: ``x``, ``{value}``: ``v``).
* ``add-launch-flag`` / ``rename-launch-flag`` / ``rename-payload-key``: the server's command
  line and request bodies (``fixes/http.py``).
"""

from __future__ import annotations

from collections.abc import Callable

from driftcheck.findings import Finding
from driftcheck.fixes.calls import follow_up_call, unwrap_result
from driftcheck.fixes.http import add_launch_flag, rename_launch_flag, rename_payload_key
from driftcheck.fixes.keywords import (
    accept_kwargs,
    add_keyword,
    positional_to_keyword,
    remove_keyword,
    rename_keyword,
)
from driftcheck.fixes.moves import keyword_to_call
from driftcheck.fixes.renames import rename_attribute, rename_import

Codemod = Callable[[str, list[Finding]], str]

CODEMODS: dict[str, Codemod] = {
    "follow-up-call": follow_up_call,
    "rename-import": rename_import,
    "rename-attribute": rename_attribute,
    "add-keyword": add_keyword,
    "remove-keyword": remove_keyword,
    "rename-keyword": rename_keyword,
    "positional-to-keyword": positional_to_keyword,
    "unwrap-result": unwrap_result,
    "accept-kwargs": accept_kwargs,
    "keyword-to-call": keyword_to_call,
    "add-launch-flag": add_launch_flag,
    "rename-launch-flag": rename_launch_flag,
    "rename-payload-key": rename_payload_key,
}
