"""What each actor does, written against stores and `send` callables: no dramatiq import here.

Actors (crawlsched.actors) only parse their message, call one of these, and wire `send` to the
next actor; tests and the benchmarks can call these directly.
"""
