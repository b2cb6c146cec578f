"""Writes MongoDB never answered: a bulk write that raised on a broken connection, a
cancelled operation or a timeout may have been applied in part or in whole."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pymongo.errors

from crawlsched.errors import WriteOutcomeUnknown

UNANSWERED_WRITE_ERRORS = (
    pymongo.errors.AutoReconnect,
    pymongo.errors.ExecutionTimeout,
    pymongo.errors.WTimeoutError,
)


@contextmanager
def unanswered_writes(what: str, safe: str) -> Iterator[None]:
    """Around a bulk write: a write MongoDB never answered is one error saying its outcome is
    unknown and what is safe to do (`safe`), not "MongoDB unreachable" as if nothing left."""
    try:
        yield
    except pymongo.errors.ServerSelectionTimeoutError:
        raise  # no server to send it to: it never left (MongoDB unreachable)
    except UNANSWERED_WRITE_ERRORS as e:
        raise WriteOutcomeUnknown(what, e, safe) from None
