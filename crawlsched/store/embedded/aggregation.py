"""How the embedded store answers an aggregation: a leading `$match` read like `find` (indexed
candidates), cheaper `$sort`, `$group` tallies counted in place, and a result that streams."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from mongomock import aggregate as mongomock_aggregate
from mongomock import helpers
from mongomock.collection import Collection
from mongomock.command_cursor import CommandCursor

from crawlsched.store.embedded.copying import copy_fields, make_aware, reader_copy
from crawlsched.store.embedded.projections import inclusion_fields
from crawlsched.store.embedded.reshaping import plain_projection
from crawlsched.store.embedded.stages import (
    FAST_STAGES,
    count_group,
    plain_count_group,
    plain_sort,
    single_stage,
    sort_documents,
    streams,
)

# How many documents a streaming aggregation copies and carries through its stages at a time.
STREAM_CHUNK = 500


class StreamingAggregation(Collection):
    """Mixed into `IndexedCollection` (which gives `_iter_documents`, its indexed matches)."""

    def aggregate(self, pipeline: Any, session: Any = None, **kwargs: Any) -> CommandCursor:
        """mongomock's aggregation, with a leading `$match` answered like `find` (indexed
        candidates) and cheaper `$sort`, `$lookup` and `$unwind`.

        When the stages after the leading `$match` and `$sort`s all work one document at a
        time, the result streams: the matching documents are sorted as references (nothing
        copied), then copied and carried through the rest `STREAM_CHUNK` at a time, as the
        cursor is read. So a planning sweep holds one reference per due job, not a copy.
        """
        stages = list(pipeline) if isinstance(pipeline, list | tuple) else None
        if session or not stages or not all(single_stage(s) for s in stages):
            return super().aggregate(pipeline, session=session, **kwargs)
        first = stages[0]
        if "$match" not in first or not isinstance(first["$match"], Mapping):
            if "$group" in first and plain_count_group(first["$group"]):
                counted = count_group(self._iter_documents({}), first["$group"])
                if counted is not None:
                    return CommandCursor(self._run_stages(counted, stages[1:]))
            return CommandCursor(self._run_stages(list(self.find()), stages))
        # References, not copies; the filter's dates made naive as `find` makes them.
        spec = helpers.patch_datetime_awareness_in_document(first["$match"])
        matched = list(self._iter_documents(spec))
        rest = stages[1:]
        while rest and "$sort" in rest[0] and plain_sort(rest[0]["$sort"]):
            matched = sort_documents(matched, self.database, rest[0]["$sort"])
            rest = rest[1:]
        if rest and "$group" in rest[0] and plain_count_group(rest[0]["$group"]):
            # A tally by fields (states, outcomes, depths): counted on the documents in place.
            counted = count_group(matched, rest[0]["$group"])
            if counted is not None:
                return CommandCursor(self._run_stages(counted, rest[1:]))
        if not all(streams(stage) for stage in rest):
            return CommandCursor(self._run_stages([self._read_copy(d) for d in matched], rest))
        keep = None
        if rest and "$project" in rest[0] and plain_projection(rest[0]["$project"]):
            keep, rest = inclusion_fields(rest[0]["$project"]), rest[1:]
        return CommandCursor(self._stream(matched, keep, rest))

    def _read_copy(self, document: dict, keep: set[str] | None = None) -> dict:
        """The document as the aggregation reads it: whole, or the fields of a leading
        inclusion `$project` (in the document's order, as mongomock's `$project`)."""
        copied = reader_copy(document) if keep is None else copy_fields(document, keep)
        return make_aware(copied) if self.codec_options.tz_aware else copied

    def _stream(self, matched: list[dict], keep: set[str] | None, stages: list[dict]) -> Iterator:
        for start in range(0, len(matched), STREAM_CHUNK):
            chunk = [self._read_copy(d, keep) for d in matched[start : start + STREAM_CHUNK]]
            yield from self._run_stages(chunk, stages)

    def _run_stages(self, docs: list[dict], stages: list[dict]) -> list[dict]:
        for stage in stages:
            ((operator, options),) = stage.items()
            fast = FAST_STAGES.get(operator)
            if fast is not None and fast[0](options):
                docs = fast[1](docs, self.database, options)
            else:
                cursor = mongomock_aggregate.process_pipeline(docs, self.database, [stage], None)
                docs = list(cursor)
        return docs
