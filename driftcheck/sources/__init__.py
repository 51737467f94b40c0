"""Getting package sources, read but never imported: a spec as the user wrote it
(:mod:`.specs`), the releases an index offers (:mod:`.versions`), a release fetched into the
cache through pip (:mod:`.fetch`, with ranged reads of large wheels in :mod:`.ranged`), and the
files of a directory, an archive or an installed distribution (:mod:`.trees`)."""
