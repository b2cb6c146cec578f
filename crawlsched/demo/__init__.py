"""`crawlsched demo`: the whole system in one process on the embedded store and broker."""
