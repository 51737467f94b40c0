"""The client side: the package's files (:mod:`.package`), a first pass over all of them
(:mod:`.index`), receiver inference (:mod:`.types`, :mod:`.bindings`), and the uses of the host
(:mod:`.uses`), cached per client and host release (:mod:`.cache`)."""
