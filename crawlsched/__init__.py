"""crawlsched: a distributed crawl-job scheduler (dramatiq over RabbitMQ, MongoDB of record)."""

__version__ = "0.1.0"
