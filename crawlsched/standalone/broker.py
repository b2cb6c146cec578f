"""The standalone server's in-process broker: dramatiq's StubBroker, whose messages survive a
clean stop.

dramatiq's stub consumer drops what a stopping worker hands back (prefetched messages, and
delayed ones waiting for their time). This one puts them back on their queue, so that after
`Worker.stop()` every message not yet processed is in `broker.queues`, where `pending()` reads
them for the data directory and `restore()` puts them back on the next start.
"""

from __future__ import annotations

from collections.abc import Iterable
from queue import Empty

from dramatiq.broker import MessageProxy
from dramatiq.brokers.stub import StubBroker, _StubConsumer


class _ReturningConsumer(_StubConsumer):
    def requeue(self, messages: Iterable[MessageProxy]) -> None:
        for message in messages:
            self.queue.put(message._message.encode())
            self.queue.task_done()  # the get that handed it out is over
            self.prefetch_semaphore.release()


class InProcessBroker(StubBroker):
    def consume(self, queue_name: str, prefetch: int = 1, timeout: int = 100):
        consumer = super().consume(queue_name, prefetch, timeout)
        consumer.__class__ = _ReturningConsumer
        return consumer

    def pending(self) -> list[tuple[str, bytes]]:
        """Every message still on a queue (delay queues included), taken off it: call this
        only once the worker has stopped."""
        taken = []
        for name, queue in self.queues.items():
            while True:
                try:
                    data = queue.get_nowait()
                except Empty:
                    break
                queue.task_done()
                taken.append((name, data))
        return taken

    def restore(self, messages: Iterable[tuple[str, bytes]]) -> int:
        """Put saved messages back on their queues (unknown queues are skipped)."""
        restored = 0
        for name, data in messages:
            if name in self.queues:
                self.queues[name].put(data)
                restored += 1
        return restored
