"""The one error hierarchy. Lookups subclass LookupError; bad data subclasses ValueError."""

from __future__ import annotations


class CrawlschedError(Exception):
    """Base of every error crawlsched raises on purpose."""


class ReferenceDataError(CrawlschedError, ValueError):
    """The reference file (models, media, tasks) is malformed."""


class BadJobDocument(CrawlschedError, ValueError):
    """A job document cannot be planned; `reason` says why in words an operator can act on."""

    def __init__(self, job_id: object, reason: str) -> None:
        super().__init__(f"job {job_id}: {reason}")
        self.job_id = job_id
        self.reason = reason


class BadJobInput(CrawlschedError, ValueError):
    """A job given on the command line or in an import file is invalid."""


class UnknownMedia(CrawlschedError, LookupError):
    def __init__(self, media_name: str, known: list[str] | None = None) -> None:
        hint = f"; known: {', '.join(known)}" if known else ""
        super().__init__(f"unknown media {media_name!r}{hint}")
        self.media_name = media_name


class UnknownDriver(CrawlschedError, LookupError):
    def __init__(self, driver_class: str, known: list[str]) -> None:
        super().__init__(f"no crawl driver named {driver_class!r}; known: {', '.join(known)}")
        self.driver_class = driver_class


class RunNotFound(CrawlschedError, LookupError):
    def __init__(self, run_id: str) -> None:
        super().__init__(f"no run with id {run_id!r}")
        self.run_id = run_id


class JobNotFound(CrawlschedError, LookupError):
    def __init__(self, job_id: str, collection: str) -> None:
        super().__init__(f"no job {job_id!r} in {collection}")
        self.job_id = job_id
        self.collection = collection


class SecretKeyMissing(CrawlschedError, ValueError):
    """Secrets (accounts, webhook and notice URLs) are encrypted at rest and no key was set."""

    def __init__(self) -> None:
        super().__init__(
            "CRAWLSCHED_SECRET_KEY is not set: account secrets, webhook and notice URLs are "
            "encrypted at rest. "
            "Create a key with `crawlsched accounts keygen` and set it on every CLI and worker"
        )


class SecretKeyInvalid(CrawlschedError, ValueError):
    """The configured key is malformed, or is not the key the stored secrets were written with."""


class AccountNotFound(CrawlschedError, LookupError):
    def __init__(self, media_name: str, username: str) -> None:
        super().__init__(f"no account {username!r} for media {media_name!r}")
        self.media_name = media_name
        self.username = username


class ProxyNotFound(CrawlschedError, LookupError):
    def __init__(self, name: str) -> None:
        super().__init__(f"no proxy {name!r} (see `crawlsched proxies list`)")
        self.name = name


class ProxyGroupNotFound(CrawlschedError, LookupError):
    def __init__(self, group: str) -> None:
        super().__init__(f"no proxy is in group {group!r} (see `crawlsched proxies list`)")
        self.group = group


class NodeNotFound(CrawlschedError, LookupError):
    def __init__(self, url: str) -> None:
        super().__init__(f"no Selenium node {url!r} (see `crawlsched nodes list`)")
        self.url = url


class NodeUnreachable(CrawlschedError, LookupError):
    """A Selenium node's /status could not be read (down, refused, or an HTTP error): no node
    was found at that URL (404, exit 2)."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"Selenium node {url} unreachable: {reason}")
        self.url = url
        self.reason = reason


class ScheduleNotFound(CrawlschedError, LookupError):
    def __init__(self, schedule_id: str) -> None:
        super().__init__(f"no schedule {schedule_id!r} (see `crawlsched schedules list`)")
        self.schedule_id = schedule_id


class ScheduleStateError(CrawlschedError, ValueError):
    """The operation does not apply to the schedule in its state (e.g. updating a deleted one)."""

    def __init__(self, schedule_id: str, state: str, operation: str) -> None:
        super().__init__(f"schedule {schedule_id!r} is {state}: cannot {operation} it")
        self.schedule_id = schedule_id
        self.state = state


class ScheduleExists(CrawlschedError, ValueError):
    def __init__(self, schedule_id: str) -> None:
        super().__init__(f"schedule {schedule_id!r} exists already (use `schedules update`)")
        self.schedule_id = schedule_id


class Conflict(CrawlschedError, ValueError):
    """What the store holds refuses the request as it is: a name taken, a token already
    revoked, a job being crawled, collections holding documents (409, exit 2)."""


class MediaExists(Conflict):
    """A new media's name or id is another media's."""


class ReportRejected(CrawlschedError, ValueError):
    """A report the store does not bear out (forged, foreign or early): dead-lettered."""

    def __init__(self, report_key: str, reason: str) -> None:
        super().__init__(f"report {report_key[:100]!r} rejected: {reason}")
        self.report_key = report_key
        self.reason = reason


class UnsafeTarget(CrawlschedError, ValueError):
    """A crawl target that must not be fetched (scheme, credentials, or a refused address)."""


class HostUnresolvable(UnsafeTarget):
    """A host name that resolves to no address: nothing to connect to, nothing to check."""


class ServiceUnreachable(CrawlschedError, ConnectionError):
    """MongoDB or RabbitMQ did not answer within the connect timeout: one line says what to do."""

    def __init__(self, service: str, url: str, hint: str, cause: str = "") -> None:
        why = f" ({cause[:120]})" if cause else ""
        super().__init__(f"{service} unreachable at {url}{why}: {hint}")
        self.service = service


class RunAlreadyEnded(CrawlschedError, ValueError):
    def __init__(self, run_id: str, state: str) -> None:
        super().__init__(f"run {run_id!r} has already ended ({state}): nothing to stop")
        self.run_id = run_id


class RunRefused(CrawlschedError, ValueError):
    """A run cannot take this command in the state it is in (pause an ended run, retry a run
    with nothing failed): the message says why."""


class WebhookFailed(CrawlschedError):
    """One webhook attempt failed; dramatiq retries the delivery with backoff."""

    def __init__(self, delivery_id: str, reason: str) -> None:
        super().__init__(f"webhook {delivery_id}: {reason}")
        self.delivery_id = delivery_id


class QueueDeclaredOtherwise(CrawlschedError):
    """RabbitMQ holds a queue of this name declared with other arguments (another queue type,
    say): it refuses to change a queue in place."""

    def __init__(self, queue: str, detail: str) -> None:
        super().__init__(
            f"RabbitMQ refused to declare queue {queue!r} ({detail[:200]}): it exists with other "
            "arguments, e.g. as another type than CRAWLSCHED_QUEUE_TYPE. Drain and delete it "
            "(rabbitmqctl delete_queue), or use a fresh virtual host."
        )
        self.queue = queue


class WriteOutcomeUnknown(CrawlschedError):
    """MongoDB took a write and never answered (the connection dropped, the operation timed out
    or was cancelled): some, all or none of it may be in the store."""

    def __init__(self, what: str, cause: BaseException, safe: str) -> None:
        text = str(cause).splitlines()[0][:200] if str(cause) else ""
        reason = f"{type(cause).__name__}: {text}" if text else type(cause).__name__
        super().__init__(
            f"MongoDB did not answer {what} ({reason}); whether it was written is unknown. {safe}"
        )
