"""Resource pools (accounts, Selenium node slots) and their leases.

Shape of dramatiq's rate_limits: the logic (`pools.py`) talks to an interface (`backend.py`)
implemented by backends (`backends/`). Every resource has at most one holder; a node with room
for k browsers is k slots. A lease has a TTL: once it has expired the resource is free again,
whether or not its holder ever released it.
"""
