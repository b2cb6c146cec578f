"""Lease backends: MongoDB (production) and memory (tests of the pool rules)."""
