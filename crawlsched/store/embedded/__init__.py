"""Indexes for the embedded store, so that its cost per job stays flat as collections grow.

mongomock answers every query, update and unique-index check by scanning the whole collection:
an update of one job by `_id` costs O(N), and a sweep that claims N jobs in batches costs
O(N²). A real server uses indexes. This module gives mongomock the same shape of cost without
touching what it computes:

- **Candidates, then mongomock's own filter.** When a query's top level names `_id` or another
  field by equality or `$in`, only the documents that index finds are handed to mongomock's
  `filter_applies`; the result is exactly what the full scan would return (in insertion
  order), only cheaper. Any other query scans, as before.
- **Kept current by the write hook.** mongomock calls `_ensure_uniques(doc)` after every insert
  and every update that changed a document, before it is visible to anyone else (each operation
  holds the client's lock, see `client.py`). That call refreshes this document's entries.
  Deleted documents are dropped when a lookup finds them gone.
- **Unique indexes** are checked through the same entries instead of a scan per write, and
  not at all when an update left the index's key of that document exactly as it was (a claim
  or an outcome changes `state` and `dispatch_id`, never `(media_name_id, target, task)`).
- **Aggregations** read their leading `$match` through the same candidates and copy only the
  documents it keeps (mongomock copies the whole collection first); `$lookup` asks the
  foreign collection once per distinct local value within a stage instead of once per
  document; `$lookup` and `$unwind` copy documents with a copier for BSON-shaped data (dicts,
  lists, immutable scalars) instead of `copy.deepcopy`. A `$group` that tallies documents by
  top-level fields (`{_id: "$state", n: {$sum: 1}}`, a run's pages per depth and state) counts
  the matched documents in place, copying none, when every grouped value is a string or an
  integer (`stages.count_group`; its groups in mongomock's order). Every other stage is
  mongomock's own.

- **Sorted pages.** A `find` sorted on one top-level field with a limit walks that field's
  ordered index (`ordered`: ids by sort key, ties in insertion order, as mongomock's stable
  sort leaves them) and tests the filter only until the page is full, instead of testing,
  keying and heap-selecting every document (a page of the newest 100 of 100,000 runs). An
  equality index with few candidates is read instead; a value the index cannot order (a NaN, a
  sub-document) sends the query back to the full sort while that document is there.

- **Fast paths with mongomock's answers.** Filters are compiled once per command
  (`matching`), `$set`/`$unset` of top-level fields are applied directly (`updates`), readers get
  one copy per document (`copying`), and inclusion `$project` and field-path `$addFields` run
  without mongomock's expression parser (`reshaping`). Each answers only where its answer is
  mongomock's and hands every other case to mongomock.

- **TTL indexes** expire documents in a sweep (`ttl`), with `now` passed in, instead of
  mongomock's scan of the whole collection on every read.

Field indexes are built on first use, one scan each. Values that cannot be hashed (lists,
sub-documents) go to an "always a candidate" bucket, which keeps array matching correct.
"""

from __future__ import annotations

import copy
from typing import Any

import mongomock
from mongomock import aggregate as mongomock_aggregate
from mongomock import store as mongomock_store

from crawlsched.store.embedded.collection import IndexedCollection
from crawlsched.store.embedded.copying import copy_document, patch_datetimes

__all__ = ["IndexedCollection", "copy_document", "install"]


class _CopyModule:
    """What mongomock's modules see as `copy`: the same, with `copy_document` as deepcopy (an
    update snapshots every document it touches, `$group` copies its input)."""

    copy = staticmethod(copy.copy)

    @staticmethod
    def deepcopy(value: Any, memo: Any = None) -> Any:
        return copy_document(value) if memo is None else copy.deepcopy(value, memo)


def _no_read_expiry(store: Any) -> None:
    """mongomock's expiry on every read, turned off."""


_installed = False


def install() -> None:
    """Make every mongomock database of this process create indexed collections."""
    global _installed
    if not _installed:
        mongomock.database.Collection = IndexedCollection
        mongomock.helpers.patch_datetime_awareness_in_document = patch_datetimes
        mongomock.collection.copy = _CopyModule
        mongomock_aggregate.copy = _CopyModule
        # Documents expire only in `ttl.sweep_expired` (see there why not on every read).
        mongomock_store.CollectionStore._remove_expired_documents = _no_read_expiry
        _installed = True
