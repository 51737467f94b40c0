"""The ecosystem matrix: every client of a list against every release of a host, kept in a
SQLite database (``driftcheck matrix run``) and read back as reports (``driftcheck matrix
report``)."""
