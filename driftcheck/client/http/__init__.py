"""The client's HTTP uses of the host's server (requests, response reads, launch commands), read
with ``ast`` like the client's other uses: :mod:`.use` (``HttpUse``), :mod:`.calls`, :mod:`.urls`,
:mod:`.reads`, :mod:`.openai_sdk` (+ ``openai.toml``), :mod:`.launch`, :mod:`.collect` (the
collector's entry) and :mod:`.prefilter` (which files could talk to the server)."""
