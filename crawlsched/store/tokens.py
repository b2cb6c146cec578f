"""API tokens: two roles (read, admin), stored only as a SHA-256 of the token.

A token is `cs_<id>_<secret>`: the id finds the row, the hash of the whole token proves it.
The plain token is shown once, when it is created; the store cannot give it back.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from datetime import datetime
from typing import Any

from crawlsched.store.counting import CountingDatabase

ROLES = ("read", "admin")
PREFIX = "cs"


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> tuple[str, str]:
    """(token id, plain token)."""
    token_id = secrets.token_hex(4)
    return token_id, f"{PREFIX}_{token_id}_{secrets.token_urlsafe(24)}"


def token_id_of(token: str) -> str | None:
    # The secret part may itself hold "_" (URL-safe base64): split twice only.
    parts = token.split("_", 2)
    if len(parts) != 3 or parts[0] != PREFIX or not parts[1] or not parts[2]:
        return None
    return parts[1]


def allows(role: str, needed: str) -> bool:
    """An admin token may do what a read token may; a read token only reads."""
    return ROLES.index(role) >= ROLES.index(needed)


TOKENS_COLLECTION = "api_tokens"

# Revocations made in this process, by any token store: a cache of verified tokens
# (`api.token_cache`) filled before the latest one is stale. Counted after the write.
_revocations = 0
_revocations_lock = threading.Lock()


def revocations() -> int:
    """How many revocations this process has made (read it before reading the store)."""
    return _revocations


def _count_revocation() -> None:
    global _revocations
    with _revocations_lock:
        _revocations += 1


class MongoTokenStore:
    def __init__(self, db: CountingDatabase) -> None:
        self._tokens = db[TOKENS_COLLECTION]

    def create(self, role: str, name: str, now: datetime) -> tuple[dict[str, Any], str]:
        """A new token: its row (no secret in it) and the plain token, which is not kept."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}, got {role!r}")
        token_id, token = new_token()
        row = {
            "_id": token_id,
            "role": role,
            "name": name,
            "sha256": digest(token),
            "created_at": now,
            "revoked_at": None,
        }
        self._tokens.insert_one(row)
        return _public(row), token

    def verify(self, token: str) -> dict[str, Any] | None:
        """The token's row if it exists, matches and is not revoked; else None."""
        token_id = token_id_of(token)
        if token_id is None:
            return None
        row = self._tokens.find_one({"_id": token_id})
        if row is None or row.get("revoked_at") is not None:
            return None
        if not hmac.compare_digest(row["sha256"], digest(token)):
            return None
        return _public(row)

    def revoke(self, token_id: str, now: datetime) -> dict[str, Any]:
        try:
            row = self._tokens.find_one_and_update(
                {"_id": token_id, "revoked_at": None}, {"$set": {"revoked_at": now}}
            )
        finally:
            _count_revocation()  # after the write: a cache filled before it is stale
        if row is None:
            if self._tokens.find_one({"_id": token_id}) is None:
                raise LookupError(f"no API token with id {token_id!r}")
            raise ValueError(f"API token {token_id!r} is already revoked")
        return _public({**row, "revoked_at": now})

    def all(self) -> list[dict[str, Any]]:
        return [_public(r) for r in self._tokens.find().sort("created_at", 1)]


def _public(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k != "sha256"}
