"""`crawlsched standalone`: the API, the clock and in-process workers in one process, on the
embedded store, with its data kept in a data directory across restarts."""
