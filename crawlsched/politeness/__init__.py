"""Politeness for the whole cluster: one clock per host (`pacer`), robots.txt read once per
site for everyone (`robots`). Below the runtime: it imports no flow, no actor."""
