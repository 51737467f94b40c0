"""Offline bundles for the probe: ``driftcheck probe --bundle DIR`` writes everything a machine
without index access needs to run a probe (the environment's wheels, driftcheck's own, the
client, its patches, the built-in models) as pieces of a chosen size with a manifest;
``driftcheck probe --from-bundle DIR`` checks the pieces, installs them with pip's
``--no-index`` and runs the probe there.

:mod:`.pieces` (the manifest, cutting and joining) and :mod:`.install` (the offline install) use
the standard library only: on the other machine they run from driftcheck's wheel before any of
its requirements is installed (``python3 -m driftcheck.probes.bundle DIR``, :mod:`.__main__`).
:mod:`.make` writes a bundle and :mod:`.wheels` makes the few wheels it builds itself.
"""
