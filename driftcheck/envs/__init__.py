"""The managed environments that host releases run in, shared by the probe and the witnesses:
an environment as the rest of driftcheck sees it (:mod:`.environment`), building a managed one
(:mod:`.managed`, also the CI's builder: ``python -m driftcheck.envs.managed VERSION...``), one
build step with progress (:mod:`.steps`) and the disk they take (:mod:`.disk`)."""
