"""Which pages a batch found it keeps to crawl itself (the frontier's side of `put`).

A page found of a host this process holds and paces is best crawled by the batch that found
it: handed to its run it would be planned, batched, queued for any thread (most often one of
another process, which would ask for the host) and granted the host again. The rule is
`planning/frontier_rules.keep`; this module knows what the rule needs: which found pages are
new to the batch (`fresh`), which hosts the process keeps and at what delay, and whether the
batch may still take pages in (its age, its parts, its run neither stopped nor paused).

Used by the batch's loop thread only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping

from crawlsched.crawl.progress import Crawled
from crawlsched.messages import BatchMessage
from crawlsched.planning import frontier_rules
from crawlsched.politeness.pacer import ClusterHostPacer
from crawlsched.store.children import child_id

Entry = tuple[str, str, str]  # (child id, URL, host key)


class Keeper:
    def __init__(
        self,
        pacer: ClusterHostPacer,
        keeping: bool,
        time_limit_at: float,
        keep_until: float,
        may_take_in: Callable[[], bool],
    ) -> None:
        self._pacer = pacer
        self.keeping = keeping  # the batch may keep pages at all (no account, no browser...)
        self._time_limit_at = time_limit_at  # monotonic: the batch's time limit
        self._keep_until = keep_until  # monotonic: it keeps nothing past this
        self._may_take_in = may_take_in  # its run is neither stopped nor paused
        # (task, URL) found -> its entry: worked out once per batch
        self._located: dict[tuple[str, str], Entry] = {}
        self._met: set[str] = set()  # child ids found by the parts handed over

    def fresh(self, message: BatchMessage, crawled: Crawled) -> dict[str, Entry]:
        """The pages found in this part that no earlier part of the batch found, by child id;
        the host key "" for a page of another task or one no request could go to."""
        fresh: dict[str, Entry] = {}
        for found in crawled.found:
            d = found.discovery
            entry = self._located.get((d.task, d.url))
            if entry is None:
                cid, host = child_id(message.run_id, d.task, d.url), ""
                if d.task == message.task:
                    with contextlib.suppress(ValueError, OSError):  # (no request can go)
                        host = self._pacer.key_of(d.url)
                entry = self._located[(d.task, d.url)] = (cid, d.url, host)
            if entry[0] not in self._met:
                fresh.setdefault(entry[0], entry)
        return fresh

    def keepable(
        self,
        message: BatchMessage,
        crawled: Crawled,
        ahead: Mapping[str, int],
        parts: int,
        now: float,
    ) -> list[Entry]:
        """The pages found in this part the batch would crawl itself (`frontier_rules.keep`),
        with `ahead` the pages of each host it holds already and `parts` handed over so far."""
        if not self.keeping or now >= self._keep_until or parts + 1 >= frontier_rules.MAX_PARTS:
            return []
        if not self._may_take_in():
            return []  # what it found waits in the run, with the run
        fresh = list(self.fresh(message, crawled).values())
        hosts = {host for _, _, host in fresh if host}
        held = {host: self._pacer.delay_of(host) for host in hosts if self._pacer.keeps(host)}
        return frontier_rules.keep(fresh, held, ahead, self._time_limit_at - now)

    def met(self, message: BatchMessage, crawled: Crawled) -> None:
        """The part is handed over: what it found is known to the run now."""
        self._met.update(self.fresh(message, crawled))
