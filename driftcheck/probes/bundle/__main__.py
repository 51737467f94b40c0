"""``python3 -m driftcheck.probes.bundle DIR [probe options]``, run with driftcheck's wheel on
``PYTHONPATH`` on a machine that has no driftcheck yet: install the bundle in ``DIR`` offline
(standard library only until then), then hand over to the driftcheck it installed, as
``driftcheck probe --from-bundle DIR [probe options]``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from driftcheck.probes.bundle.install import default_root, install_bundle
from driftcheck.probes.bundle.pieces import BundleError, read_manifest

USAGE = "usage: python3 -m driftcheck.probes.bundle DIR [driftcheck probe options]"


def _option(argv: list[str], name: str) -> str | None:
    """The value of ``--name X`` or ``--name=X`` among ``argv``."""
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def main(argv: list[str] | None = None) -> int:
    """Install, then replace this process with the installed driftcheck's probe."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0].startswith("-"):
        print(USAGE, file=sys.stderr)
        return 2
    folder, rest = Path(args[0]).resolve(), args[1:]
    try:
        manifest = read_manifest(folder)
        given = _option(rest, "--bundle-env")
        root = Path(given) if given else default_root(manifest)
        installed = install_bundle(
            folder,
            root,
            python=_option(rest, "--env") or sys.executable,
            progress=lambda m: print(m, file=sys.stderr, flush=True),
        )
    except BundleError as exc:
        print(f"driftcheck probe --from-bundle: {exc}", file=sys.stderr)
        return 2
    if given is None:
        rest += ["--bundle-env", str(installed.root)]
    exe = installed.python.parent / "driftcheck"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    os.execve(str(exe), [str(exe), "probe", "--from-bundle", str(folder), *rest], env)
    return 0  # not reached: execve replaces this process


if __name__ == "__main__":
    sys.exit(main())
