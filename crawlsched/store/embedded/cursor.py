"""WindowedCursor: mongomock's cursor, reading a limited find's window alone and each document
in O(1)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from mongomock.collection import Cursor

from crawlsched.store.embedded.copying import aware_copy, make_aware
from crawlsched.store.embedded.stages import sort_documents


class WindowedCursor(Cursor):
    """mongomock's cursor, reading its n-th document in O(1), and making the dates of the
    copies it reads timezone-aware in place, not in a second copy.

    mongomock's `__next__` slices the whole result list past `skip` for every document, so
    reading a result of N documents cost O(N²) (half a million references copied for 1,000).
    """

    def _compute_results(self, with_limit_and_skip: bool = False) -> list:
        if not self._results or self._factory_last_generated_results != self._factory:
            # The factory yields fresh copies (`_get_dataset`): they are ours to change.
            results = list(self._factory())
            if self.collection.codec_options.tz_aware:
                results = [make_aware(doc) for doc in results]
            self._factory_last_generated_results = self._factory
            self._results = results
        return super()._compute_results(with_limit_and_skip)

    def _window(self) -> list | None:
        """The documents a `limit`ed find returns, read alone: the matches are found and sorted
        as references and only the `skip + limit` the cursor returns are copied (mongomock
        copies every match before sorting: 10,000 copies for a page of 100). None when the
        cursor has no positive limit, or a sort this does not read."""
        if not self._limit or self._limit < 0 or self._results:
            return None
        key = (self._factory, self._skip, self._limit)
        cached = getattr(self, "_window_of", None)
        if cached is not None and cached[0] == key:
            return cached[1]
        sort = list(self._sort.items() if isinstance(self._sort, Mapping) else self._sort or ())
        if any(field.startswith("$") or not isinstance(d, int) for field, d in sort):
            return None  # `$natural`, text scores: mongomock's own code
        collection = self.collection
        wanted = self._skip + self._limit
        matched = None
        if len(sort) == 1:
            matched = collection._first_sorted(self._spec, *sort[0], wanted)
        if matched is None:
            matched = collection._iter_documents(self._spec)
            if sort:
                matched = sort_documents(list(matched), collection.database, dict(sort), wanted)
        window = list(itertools.islice(matched, wanted))[self._skip :]
        copier = aware_copy if collection.codec_options.tz_aware else None
        copies = list(map(collection._copier_of(self._projection, copier), window))
        self._window_of = (key, copies)
        return copies

    def __next__(self) -> Any:
        if self._skip < 0:
            return super().__next__()
        cached = getattr(self, "_window_of", None)  # `_window`'s answer, no key built
        if (
            cached is not None
            and cached[0][0] is self._factory
            and cached[0][1] == self._skip
            and cached[0][2] == self._limit
        ):
            window = cached[1]
        else:
            window = self._window()
        if window is not None:
            if self._emitted >= len(window):
                raise StopIteration
            self._emitted += 1
            return window[self._emitted - 1]
        results = self._compute_results()
        if self._limit and self._emitted >= abs(self._limit):
            raise StopIteration
        position = self._skip + self._emitted
        if position >= len(results):
            raise StopIteration
        self._emitted += 1
        return results[position]

    next = __next__

    def take(self, n: int) -> list:
        """The next `n` documents at most, as `n` calls of `next` would answer them: a locked
        read (`LockedCursor`) takes its chunk in one call, not one per document."""
        window = self._window() if self._skip >= 0 else None
        if window is None:
            return list(itertools.islice(self, n))
        chunk = window[self._emitted : self._emitted + n]
        self._emitted += len(chunk)
        return chunk
