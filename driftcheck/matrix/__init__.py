"""The ecosystem matrix: every client of a list against every release of a host, stored in a
SQLite database (``driftcheck matrix run``; docs/matrix.md) and read back as reports
(``driftcheck matrix report``; docs/matrix-report.md).

:func:`run_matrix` is the library's entry; the modules: ``clients`` (the clients file), ``plan``
(releases, clients and snapshots prepared once in the parent), ``tasks`` (one pair's scan in a
worker, the staleness key), ``pool`` and ``ray_runner`` (the back ends), ``store`` (the
database); ``results``, ``compare``, ``report`` and ``page`` (the reports).
"""

from driftcheck.matrix.runner import MatrixSummary, run_matrix

__all__ = ["MatrixSummary", "run_matrix"]
