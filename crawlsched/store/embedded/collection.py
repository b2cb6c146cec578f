"""IndexedCollection: mongomock's Collection with index lookups and streaming aggregations."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from mongomock import DuplicateKeyError, OperationFailure, helpers
from mongomock import aggregate as mongomock_aggregate
from mongomock.collection import Collection, Cursor
from mongomock.command_cursor import CommandCursor
from mongomock.filtering import filter_applies

from crawlsched.planning.retention import check_ttl_index
from crawlsched.store.embedded.copying import (
    aware_copy,
    aware_dict,
    copy_fields,
    make_aware,
    reader_copy,
    typed,
)
from crawlsched.store.embedded.indexes import SELECTIVE, StoreIndexes, equality_values, store_key
from crawlsched.store.embedded.matching import UNSURE, compile_filter
from crawlsched.store.embedded.reshaping import plain_projection
from crawlsched.store.embedded.stages import (
    FAST_STAGES,
    count_group,
    index_key,
    plain_count_group,
    plain_sort,
    single_stage,
    sort_documents,
    streams,
)
from crawlsched.store.embedded.updates import (
    apply_steps,
    check_encodable,
    restore,
    simple_steps,
    supported,
)
from crawlsched.store.embedded.upserts import new_document, upsert_steps

# A sorted find with a limit reads an equality index's candidates (and sorts them) when there
# are at most this many per document wanted, else walks the sort field's ordered index.
FEW_CANDIDATES = 8
# How many documents a streaming aggregation copies and carries through its stages at a time.
STREAM_CHUNK = 500


class _Cursor(Cursor):
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


class IndexedCollection(Collection):
    """mongomock's Collection with candidate lookups by `_id` and by equality fields."""

    @property
    def _indexes(self) -> StoreIndexes:
        store = self._store
        indexes = getattr(store, "_crawlsched_indexes", None)
        if indexes is None:
            indexes = StoreIndexes()
            store._crawlsched_indexes = indexes
        return indexes

    def _narrowest(self, filter: Mapping[str, Any]) -> set[Any] | None:
        """The smallest id set some top-level equality (or one inside `$and`) allows.

        Sizes are compared before any set is built: copying the ids of a common value (say
        every job whose `dispatch_id` is null) would cost as much as the scan it replaces.
        """
        best: tuple[int, Any] | None = None  # (size, how to build the set)
        for field, condition in filter.items():
            if field == "$and" and isinstance(condition, list):
                sets = [self._narrowest(c) for c in condition if isinstance(c, Mapping)]
                ids = min((s for s in sets if s is not None), key=len, default=None)
                option = None if ids is None else (len(ids), lambda ids=ids: ids)
            elif field == "$or" and isinstance(condition, list) and condition:
                # Narrowed only if every branch is: the union of the branches' sets.
                sets = [self._narrowest(c) if isinstance(c, Mapping) else None for c in condition]
                if any(s is None for s in sets):
                    continue
                union = set().union(*sets)
                option = (len(union), lambda union=union: union)
            else:
                plain = not field.startswith("$") and "." not in field
                values = equality_values(condition) if plain else None
                if values is None:
                    continue
                if field == "_id":
                    keys = {store_key(v) for v in values}
                    option = (len(keys), lambda keys=keys: keys)
                else:
                    index = self._indexes.field(field, self._store)
                    option = (index.estimate(values), lambda i=index, v=values: i.lookup(v))
            if option is not None and (best is None or option[0] < best[0]):
                best = option
        return None if best is None else best[1]()

    def _candidates(self, filter: Any) -> list[dict] | None:
        if not isinstance(filter, Mapping) or not filter or self._store.is_empty:
            return None
        store = self._store
        best = self._narrowest(filter)
        if best is None or len(best) > len(store) * SELECTIVE:
            return None
        indexes = self._indexes
        # The store's own dict: every operation already holds the client's lock (client.py),
        # so the store's reader lock per lookup is not needed. (TTL expiry is `ttl.py`'s.)
        documents = store._documents
        docs = []
        for doc_id in best:
            doc = documents.get(doc_id)
            if doc is not None:
                indexes.seen(doc_id)
                docs.append((indexes.order[doc_id], doc))
            else:
                indexes.forget(doc_id)  # deleted since it was filed
        docs.sort(key=lambda pair: pair[0])
        return [doc for _, doc in docs]

    def _iter_documents(self, filter: Any) -> Iterator[dict]:
        if self._store.is_empty:
            yield from super()._iter_documents(filter)  # validates the filter, finds nothing
            return
        candidates = self._candidates(filter)
        if candidates is None:
            candidates = list(self._store.documents)
        match = compile_filter(filter)
        for document in candidates:
            verdict = UNSURE if match is None else match(document)
            if verdict is UNSURE:
                verdict = filter_applies(filter, document)
            if verdict:
                yield document

    def _first_sorted(
        self, filter: Any, field: str, direction: int, wanted: int
    ) -> list[dict] | None:
        """The first `wanted` matches of `filter` sorted by one top-level field, read from
        that field's ordered index until enough have matched: in the order `sort_documents`
        gives (ties in insertion order), without a key or a test per document of the store.
        None (the caller sorts every match) when an equality index finds few candidates, or
        the field holds a value the index cannot order."""
        store = self._store
        if "." in field or field.startswith("$") or store.is_empty:
            return None
        if not isinstance(filter, Mapping) or filter.keys() & {"$where", "$text", "$expr"}:
            return None
        candidates = self._candidates(filter) if filter else None
        if candidates is not None and len(candidates) <= FEW_CANDIDATES * wanted:
            return None
        indexes = self._indexes
        index = indexes.sorted_by(field, index_key, store)
        documents = store._documents  # under the client's lock, as in `_candidates`
        for doc_id in index.unordered():
            if doc_id not in documents:
                indexes.forget(doc_id)  # deleted since it was filed
        ids = index.walk(descending=direction < 0)
        if ids is None:
            return None
        match = compile_filter(filter)
        found: list[dict] = []
        gone = []
        for doc_id in ids:
            document = documents.get(doc_id)
            if document is None:
                gone.append(doc_id)
                continue
            verdict = UNSURE if match is None else match(document)
            if verdict is UNSURE:
                verdict = filter_applies(filter, document)
            if verdict:
                found.append(document)
                if len(found) >= wanted:
                    break
        for doc_id in gone:
            indexes.forget(doc_id)
        return found

    def _written(self) -> None:
        """Count a write on the collection's store (the standalone server's snapshots skip
        collections whose count did not move). Counted before the write, so a snapshot that
        reads the count and then the documents never misses one."""
        store = self._store
        store.generation = getattr(store, "generation", 0) + 1

    def _delete(self, *args: Any, **kwargs: Any) -> Any:
        self._written()
        return super()._delete(*args, **kwargs)

    def _insert(self, data: Any, *args: Any, **kwargs: Any) -> Any:
        self._written()
        if isinstance(data, Mapping) and "_id" in data:
            # A document inserted again under an old id is checked afresh.
            self._indexes.forget_checked(store_key(data["_id"]))
        result = super()._insert(data, *args, **kwargs)
        if isinstance(data, Mapping):
            self._indexes.inserted(store_key(data["_id"]))
        return result

    def _ensure_uniques(self, new_data: dict, changed: list[str] | None = None) -> None:
        # Called by mongomock after every insert and every changing update of `new_data`, and
        # by `_update` below with the fields it changed (the only index entries to refresh).
        doc_id = store_key(new_data["_id"])
        # The standalone's snapshots re-encode only what was written since the last one
        # (`DataDir.snapshot`); they keep this set, and it exists only while they do.
        changed_ids = getattr(self._store, "changed_ids", None)
        if changed_ids is not None:
            changed_ids.add(doc_id)
        for name, index in self._store.indexes.items():
            if index.get("unique"):
                self._check_unique(name, index, new_data, doc_id)
        self._indexes.refresh(doc_id, new_data, changed)

    def _update(
        self,
        spec: Any,
        document: Any,
        upsert: bool = False,
        manipulate: bool = False,
        multi: bool = False,
        check_keys: bool = False,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """mongomock's update, applied directly when it only changes top-level fields in the
        ways `updates` computes exactly as mongomock does (checked on every matched document
        before any is changed), or upserts one document by plain equality (`upserts`);
        anything else is mongomock's own."""
        self._written()
        steps = inserting = None
        if not any(kwargs.values()) and isinstance(spec, Mapping):
            document = helpers.patch_datetime_awareness_in_document(document)
            if not upsert:
                steps = simple_steps(document)
            elif not multi and (plan := upsert_steps(spec, document)) is not None:
                steps, inserting = plan
        matching: list[dict] = []
        if steps is not None:
            spec = helpers.patch_datetime_awareness_in_document(spec)
            for existing in self._iter_documents(spec):
                matching.append(existing)
                if not multi:
                    break
            if not all(supported(existing, steps) for existing in matching):
                steps = None
        if steps is None:
            return super()._update(spec, document, upsert, manipulate, multi, check_keys, **kwargs)
        if inserting is not None and not matching:
            return self._upsert_new(spec, inserting)
        matched = modified = 0
        for existing in matching:
            if not matched:
                check_encodable(steps)
            matched += 1
            before = dict(existing)
            changed = apply_steps(existing, steps)
            if changed:
                try:
                    self._ensure_uniques(existing, changed)
                except DuplicateKeyError:
                    restore(existing, before)
                    raise
                modified += 1
        return {
            "connectionId": self.database.client._id,
            "err": None,
            "n": matched,
            "nModified": modified,
            "ok": 1,
            "upserted": None,
            "updatedExisting": matched > 0,
        }

    def _upsert_new(self, spec: Mapping[str, Any], steps: list) -> dict[str, Any]:
        """An upsert that matched nothing: insert what mongomock would have (`upserts`)."""
        doc = new_document(spec)
        check_encodable(steps)
        apply_steps(doc, steps)
        upserted_id = self._insert(doc)
        return {
            "connectionId": self.database.client._id,
            "err": None,
            "n": 1,
            "nModified": 0,
            "ok": 1,
            "upserted": upserted_id,
            "updatedExisting": False,
        }

    def _check_unique(
        self, name: str, index: Mapping[str, Any], new_data: dict, doc_id: Any
    ) -> None:
        spec = {}
        for key, _ in index["key"]:
            if "." not in key:
                spec[key] = new_data.get(key)
                continue
            try:
                spec[key] = helpers.get_value_by_dot(new_data, key)
            except KeyError:
                spec[key] = None
        partial = index.get("partialFilterExpression")
        applies = True
        if partial is not None:
            match = self._indexes.partial_filter(name, index)
            applies = UNSURE if match is None else match(new_data)
            if applies is UNSURE:
                applies = filter_applies(partial, new_data)
        # The store held no duplicate before this write; if this document's key (and whether
        # the index covers it) is exactly what it was last checked with, it still holds none.
        typed_key = [typed(value) for value in spec.values()]
        stamp = None if None in typed_key else (applies, *typed_key)
        checked = self._indexes.checked_keys(name, index)
        if stamp is not None and checked.get(doc_id) == stamp:
            return
        checked.pop(doc_id, None)
        if not (index.get("sparse") and set(spec.values()) == {None}) and applies:
            query = spec if partial is None else {"$and": [partial, spec]}
            for other in self._iter_documents(query):
                if store_key(other["_id"]) != doc_id:
                    raise DuplicateKeyError("E11000 Duplicate Key Error", 11000)
        if stamp is not None:
            checked[doc_id] = stamp

    def create_index(
        self, key_or_list: Any, cache_for: int = 300, session: Any = None, **kwargs: Any
    ) -> str:
        """mongomock checks the documents already there against a new unique index without its
        partial filter, so a partial unique index over jobs it does not cover (the old system's,
        without `target`) was refused. Check only the covered documents, then register it."""
        self._written()
        if "expireAfterSeconds" in kwargs:
            keys = helpers.create_index_list(key_or_list)
            try:
                check_ttl_index(keys, kwargs["expireAfterSeconds"])
            except ValueError as e:  # what a MongoDB server answers to such an index
                raise OperationFailure(str(e), 67) from None
        partial = kwargs.get("partialFilterExpression")
        if session or not kwargs.get("unique") or partial is None:
            return super().create_index(key_or_list, cache_for, session, **kwargs)
        keys = helpers.create_index_list(key_or_list)
        name = kwargs.get("name") or helpers.gen_index_name(keys)
        index: dict[str, Any] = {"key": keys}
        if kwargs.get("sparse"):
            index["sparse"] = True
        index["unique"] = True
        if kwargs.get("expireAfterSeconds") is not None:
            index["expireAfterSeconds"] = kwargs["expireAfterSeconds"]
        index["partialFilterExpression"] = partial
        existing = self._store.indexes.get(name)
        if existing is not None:
            if existing == index:
                return name
            return super().create_index(key_or_list, cache_for, session, **kwargs)  # refuses
        for doc in list(self._store.documents):
            self._check_unique(name, index, doc, store_key(doc["_id"]))
        self._store.create_index(name, index)
        return name

    def _copy_only_fields(
        self, doc: dict, fields: Any, container: Any, copier: Callable[[Any], Any] | None = None
    ) -> Any:
        """mongomock's copy of a document for a reader: the whole of it, or top-level fields
        of an inclusion projection (in the document's order, `_id` last, as mongomock), made
        without a Python call per scalar. `copier=aware_copy`: with its dates made UTC-aware
        (`make_aware` of the copy, in the same pass)."""
        copy = reader_copy if copier is None else copier
        if container is dict and (fields is None or fields == {}):
            return copy(doc)
        keep = self._inclusion_of(fields) if container is dict else None
        if keep is not None:
            present = [k for k in keep if k != "_id" and k in doc]
            if len(present) > 1:  # in the document's order
                copied = {k: copy(v) for k, v in doc.items() if k in keep and k != "_id"}
            else:  # one field has no order to keep: no walk over the document's fields
                copied = {k: copy(doc[k]) for k in present}
            if "_id" in keep and "_id" in doc:
                copied["_id"] = doc["_id"] if copier is None else copier(doc["_id"])
            return copied
        drop = self._exclusion_of(fields) if container is dict else None
        if drop is None:
            copied = super()._copy_only_fields(doc, fields, container)
            return copied if copier is None else make_aware(copied)
        # mongomock copies the other fields in the document's order (`_id` in its place).
        if copier is aware_copy:
            return aware_dict(doc, drop)
        return {k: copy(v) for k, v in doc.items() if k not in drop}

    def _copier_of(
        self, fields: Any, copier: Callable[[Any], Any] | None
    ) -> Callable[[dict], dict]:
        """`_copy_only_fields(doc, fields, dict, copier)` for the documents of one result, the
        projection read once: an inclusion of one field besides `_id` copies that field alone."""
        keep = self._inclusion_of(fields) if fields else None
        others = [k for k in keep if k != "_id"] if keep is not None else []
        if keep is None or len(others) != 1:
            return lambda doc: self._copy_only_fields(doc, fields, dict, copier)
        (field,) = others
        copy = reader_copy if copier is None else copier
        with_id = "_id" in keep

        def copy_one(doc: dict) -> dict:
            copied = {field: copy(doc[field])} if field in doc else {}
            if with_id and "_id" in doc:
                copied["_id"] = doc["_id"] if copier is None else copier(doc["_id"])
            return copied

        return copy_one

    def _inclusion_of(self, fields: Any) -> set[str] | None:
        return self._remembered("_last_inclusion", _inclusion, fields)

    def _exclusion_of(self, fields: Any) -> frozenset[str] | None:
        return self._remembered("_last_exclusion", _exclusion, fields)

    def _remembered(self, slot: str, read: Callable[[Any], Any], fields: Any) -> Any:
        # Called once per document of a result: remember the last projection's answer.
        last = getattr(self, slot, None)
        if last is not None and last[0] is fields and last[1] == fields:
            return last[2]
        answer = read(fields)
        setattr(self, slot, (fields, dict(fields) if isinstance(fields, dict) else None, answer))
        return answer

    def find(self, *args: Any, **kwargs: Any) -> Cursor:
        cursor = super().find(*args, **kwargs)
        cursor.__class__ = _Cursor
        return cursor

    def distinct(self, key: Any, filter: Any = None, session: Any = None) -> list[Any]:
        """mongomock's `distinct` reads every matching document whole (a copy each): for a
        top-level field, read only that field."""
        if session or not isinstance(key, str) or "." in key or key.startswith("$"):
            return super().distinct(key, filter, session=session)
        return self.find(filter, {key: 1}).distinct(key)

    # -- aggregation ----------------------------------------------------------------------

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
            keep, rest = _inclusion(rest[0]["$project"]), rest[1:]
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


def _inclusion(fields: Any) -> set[str] | None:
    """The top-level fields an inclusion projection keeps (with `_id` unless it is excluded),
    or None for any other projection (mongomock's own code reads those)."""
    if not plain_projection(fields):
        return None
    keep = {name for name in fields if name != "_id"}
    if fields.get("_id", 1):
        keep.add("_id")
    return keep


def _exclusion(fields: Any) -> frozenset[str] | None:
    """The top-level fields an exclusion projection drops (`_id` too when it says 0), or None
    for any other projection."""
    if not isinstance(fields, Mapping) or not any(name != "_id" for name in fields):
        return None
    drop = set()
    for name, value in fields.items():
        if type(name) is not str or type(value) not in (int, bool):
            return None
        if name == "_id":
            if value not in (0, 1):
                return None
            if not value:
                drop.add(name)
        elif value == 0 and name and not name.startswith("$") and "." not in name:
            drop.add(name)
        else:
            return None
    return frozenset(drop)
