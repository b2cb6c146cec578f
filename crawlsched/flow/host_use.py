"""A batch's hosts as its jobs use them up, for the pacer's early hand-back.

A batch tells the pacer which hosts its jobs will ask for (`ClusterHostPacer.expect`) and,
job by job, when one is done with its host (`settle`): a host no job of the process still
needs is given back at once and its waiters woken, instead of when the batch ends. With
batches spread over many hosts, a process would otherwise keep a host it no longer crawls for
as long as its batch crawls the others, while another process's jobs wait for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from crawlsched.politeness.pacer import ClusterHostPacer


class HostUse:
    def __init__(
        self,
        pacer: ClusterHostPacer,
        hosts: dict[int, str],
        released: Callable[[frozenset[str]], None] | None = None,
    ) -> None:
        self.pacer, self.hosts, self.released = pacer, hosts, released
        self._left = set(hosts)  # the jobs (by `id`) still expected to ask
        pacer.expect(hosts.values())

    def done(self, docs: Iterable[dict]) -> None:
        """These jobs will not ask for their host again in this batch."""
        for doc in docs:
            if id(doc) not in self._left:
                continue
            self._left.discard(id(doc))
            host = self.hosts[id(doc)]
            if self.pacer.settle(host) and self.released is not None:
                self.released(frozenset({host}))

    def again(self, docs: Iterable[dict]) -> None:
        """Jobs that will ask for their host after all: put aside and asked for once more
        (`batch_hosts.ask_again`), or taken over from another batch (`flow/take_over.py`;
        their hosts are in `hosts` already)."""
        back = [doc for doc in docs if id(doc) not in self._left]
        self._left.update(id(doc) for doc in back)
        self.pacer.expect(self.hosts[id(doc)] for doc in back)

    def close(self) -> None:
        """The batch ended: what it still expected is forgotten (its hosts go back with the
        batch's end, `ClusterHostPacer.give_back`)."""
        self.pacer.forget(self.hosts[key] for key in self._left)
        self._left.clear()
