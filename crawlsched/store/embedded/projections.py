"""How the embedded store copies a document for a reader under a projection: the top-level
fields of an inclusion or exclusion projection, made without a Python call per scalar (any
other projection is mongomock's own code)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mongomock.collection import Collection

from crawlsched.store.embedded.copying import aware_copy, aware_dict, make_aware, reader_copy
from crawlsched.store.embedded.reshaping import plain_projection


class ProjectedCopies(Collection):
    """Mixed into `IndexedCollection`: its readers' copies of documents."""

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
        return self._remembered("_last_inclusion", inclusion_fields, fields)

    def _exclusion_of(self, fields: Any) -> frozenset[str] | None:
        return self._remembered("_last_exclusion", exclusion_fields, fields)

    def _remembered(self, slot: str, read: Callable[[Any], Any], fields: Any) -> Any:
        # Called once per document of a result: remember the last projection's answer.
        last = getattr(self, slot, None)
        if last is not None and last[0] is fields and last[1] == fields:
            return last[2]
        answer = read(fields)
        setattr(self, slot, (fields, dict(fields) if isinstance(fields, dict) else None, answer))
        return answer


def inclusion_fields(fields: Any) -> set[str] | None:
    """The top-level fields an inclusion projection keeps (with `_id` unless it is excluded),
    or None for any other projection (mongomock's own code reads those)."""
    if not plain_projection(fields):
        return None
    keep = {name for name in fields if name != "_id"}
    if fields.get("_id", 1):
        keep.add("_id")
    return keep


def exclusion_fields(fields: Any) -> frozenset[str] | None:
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
