"""`crawlsched clock`: the metronome, a process of its own (never through a server)."""

from __future__ import annotations

import signal
import threading

from crawlsched.settings import Settings


def run_clock_process(settings: Settings, interval: float | None, count: int) -> None:
    from crawlsched.brokers import setup_broker
    from crawlsched.flow.clocking import run_clock
    from crawlsched.logs import configure_logging, get_logger
    from crawlsched.services import check_broker, services_or_exit

    with services_or_exit(settings):
        broker = setup_broker(settings)
        check_broker(settings, getattr(broker, "parameters", None))
    from crawlsched.actors.ticker import tick

    configure_logging(settings.log_format, settings.log_level)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    period = interval or settings.clock_interval_s
    clock_metrics = None
    if settings.clock_metrics_address:
        from crawlsched.metrics.clock import serve_clock_metrics

        clock_metrics = serve_clock_metrics(settings, settings.clock_metrics_address)
    if settings.worker_heartbeat_file is not None:
        _beat_until(stop, settings.worker_heartbeat_file, settings.worker_heartbeat_s)
    get_logger(__name__).info(
        "clock_started", interval_s=period, metrics=settings.clock_metrics_address
    )
    with services_or_exit(settings):
        run_clock(
            tick.send,
            period_s=period,
            stop=stop,
            count=count,
            broker=broker,
            on_sent=clock_metrics.tick_sent if clock_metrics else None,
        )


def _beat_until(stop: threading.Event, base, every_s: float) -> None:
    """The clock's heartbeat (`crawlsched/liveness.py`), from a thread of its own until stopped:
    the process answers. That it sends ticks shows in its metrics and the NoTick alert."""
    from crawlsched.liveness import HeartbeatFile

    heartbeat = HeartbeatFile(base)

    def beat() -> None:
        while not stop.is_set():
            heartbeat.beat(taking_work=True)
            stop.wait(every_s)
        heartbeat.beat(taking_work=False)

    threading.Thread(target=beat, name="heartbeat", daemon=True).start()
