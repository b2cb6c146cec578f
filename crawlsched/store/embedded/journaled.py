"""The embedded collection's deletes, drops, index drops and renames, each reported to the
store's write effects (`effects.py`) as it is applied. Inserts and updates are reported by
`IndexedCollection._ensure_uniques`, which each of them passes; index creation by its
`create_index`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mongomock import helpers
from mongomock.collection import Collection

from crawlsched.store.embedded.effects import WriteEffects, effects_of
from crawlsched.store.embedded.indexes import store_key


class JournaledWrites(Collection):
    @property
    def _effects(self) -> WriteEffects | None:
        return effects_of(self._db_store)

    def _written(self) -> None:
        """Count a write on the collection's store (the standalone server's snapshots skip
        collections whose count did not move). Counted before the write, so a snapshot that
        reads the count and then the documents never misses one."""
        store = self._store
        store.generation = getattr(store, "generation", 0) + 1

    def _delete(
        self,
        filter: Any,
        collation: Any = None,
        hint: Any = None,
        multi: bool = False,
        session: Any = None,
    ) -> dict[str, Any]:
        """mongomock's delete, naming each document it removes to the effects (and reading
        the matches without copying them, as mongomock's `find` does)."""
        self._written()
        if hint or collation or session:
            return super()._delete(filter, collation, hint, multi, session)  # refused there
        filter = helpers.patch_datetime_awareness_in_document(filter)
        if filter is None:
            filter = {}
        if not isinstance(filter, Mapping):
            filter = {"_id": filter}
        effects = self._effects
        deleted = 0
        for doc in list(self._iter_documents(filter)):
            doc_id = doc["_id"]
            del self._store[store_key(doc_id)]
            if effects is not None:
                effects.deleted(self.name, doc_id)
            deleted += 1
            if not multi:
                break
        return {"connectionId": self.database.client._id, "n": deleted, "ok": 1.0, "err": None}

    def drop(self, session: Any = None) -> None:
        self._written()
        super().drop(session)
        if (effects := self._effects) is not None:
            effects.dropped(self.name)

    def drop_index(self, index_or_name: Any, session: Any = None) -> None:
        self._written()
        super().drop_index(index_or_name, session)
        if (effects := self._effects) is not None:
            name = index_or_name
            if isinstance(index_or_name, list):
                name = helpers.gen_index_name(index_or_name)
            effects.unindexed(self.name, name)

    def drop_indexes(self, session: Any = None) -> None:
        self._written()
        super().drop_indexes(session)
        if (effects := self._effects) is not None:
            effects.unindexed(self.name, "*")

    def rename(self, new_name: str, session: Any = None, **kwargs: Any) -> Any:
        self._written()
        result = super().rename(new_name, session, **kwargs)
        if (effects := self._effects) is not None:
            effects.renamed(self.name, new_name, bool(kwargs.get("dropTarget")))
        return result
