"""The clock, played by a test (`with Ticks():`), for worker groups started without one."""

from __future__ import annotations

import threading


class Ticks:
    """The clock, played by the test: a `tick` every `period_s` while the block runs (the
    ticker reclaims expired dispatches and asks for the passes of runs with work to redo)."""

    def __init__(self, period_s: float = 0.5) -> None:
        self.period_s = period_s
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from crawlsched.actors.ticker import tick

        while not self._halt.wait(self.period_s):
            tick.send()

    def __enter__(self) -> Ticks:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._halt.set()
        self._thread.join(10)
