"""IndexedCollection: mongomock's Collection with index lookups, unique keys and fast updates
(its aggregations: `aggregation`; its readers' copies: `projections`; its cursor: `cursor`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from mongomock import DuplicateKeyError, OperationFailure, helpers
from mongomock.collection import Cursor
from mongomock.filtering import filter_applies

from crawlsched.planning.retention import check_ttl_index
from crawlsched.store.embedded.aggregation import StreamingAggregation
from crawlsched.store.embedded.copying import typed
from crawlsched.store.embedded.cursor import WindowedCursor
from crawlsched.store.embedded.indexes import SELECTIVE, StoreIndexes, equality_values, store_key
from crawlsched.store.embedded.journaled import JournaledWrites
from crawlsched.store.embedded.matching import UNSURE, compile_filter
from crawlsched.store.embedded.projections import ProjectedCopies
from crawlsched.store.embedded.stages import index_key
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


class IndexedCollection(ProjectedCopies, StreamingAggregation, JournaledWrites):
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
        # The standalone's journal records the document as the operation leaves it (after
        # the unique checks: a write they refuse is rolled back and records nothing).
        if (effects := self._effects) is not None:
            effects.put(self.name, self._store, doc_id)

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
        name = self._create_index(key_or_list, cache_for, session, **kwargs)
        if (effects := self._effects) is not None:
            effects.indexed(self.name, self._store, name)
        return name

    def _create_index(self, key_or_list: Any, cache_for: int, session: Any, **kwargs: Any) -> str:
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

    def find(self, *args: Any, **kwargs: Any) -> Cursor:
        cursor = super().find(*args, **kwargs)
        cursor.__class__ = WindowedCursor
        return cursor

    def distinct(self, key: Any, filter: Any = None, session: Any = None) -> list[Any]:
        """mongomock's `distinct` reads every matching document whole (a copy each): for a
        top-level field, read only that field."""
        if session or not isinstance(key, str) or "." in key or key.startswith("$"):
            return super().distinct(key, filter, session=session)
        return self.find(filter, {key: 1}).distinct(key)
