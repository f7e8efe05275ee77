"""Benchmarks: Figure 8 in process and the oracle's rates (:mod:`.figure8`), and Figure 8
with client processes (:mod:`.clients`), and Figure 8 the way §3.2 accounts for it: store
operations and the store's CPU per operation (:mod:`.store`)."""
from .figure8 import *  # noqa: F401,F403  (the old path percolator_ref.bench)
