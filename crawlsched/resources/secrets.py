"""Secrets encrypted at rest (Fernet): account and proxy passwords, kept login sessions; with
errors an operator can act on."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cryptography.fernet import Fernet, InvalidToken

from crawlsched.errors import SecretKeyInvalid, SecretKeyMissing


def generate_key() -> str:
    return Fernet.generate_key().decode()


class SecretBox:
    """Encrypts secrets for the store and decrypts them for the crawl actor that holds a lease.

    Built with no key, it refuses both directions with `SecretKeyMissing` instead of failing at
    start-up: only commands and workers that touch a secret need the key.
    """

    def __init__(self, key: str | None) -> None:
        self._fernet: Fernet | None = None
        if key:
            try:
                self._fernet = Fernet(key.encode())
            except (ValueError, TypeError):
                raise SecretKeyInvalid(
                    "CRAWLSCHED_SECRET_KEY is not a valid key (32 url-safe base64-encoded bytes); "
                    "create one with `crawlsched accounts keygen`"
                ) from None

    def _require(self) -> Fernet:
        if self._fernet is None:
            raise SecretKeyMissing()
        return self._fernet

    def encrypt(self, secret: str) -> str:
        if not secret:
            raise ValueError("an account secret must not be empty")
        return self._require().encrypt(secret.encode()).decode()

    def decrypt(self, token: str) -> str:
        try:
            return self._require().decrypt(token.encode()).decode()
        except InvalidToken:
            raise SecretKeyInvalid(
                "CRAWLSCHED_SECRET_KEY does not decrypt the stored account secrets: it is not "
                "the key they were written with"
            ) from None

    def encrypt_json(self, value: Mapping[str, Any]) -> str:
        """A small JSON document (an account's session cookies), encrypted like a secret."""
        return self._require().encrypt(json.dumps(value, sort_keys=True).encode()).decode()

    def decrypt_json(self, token: str) -> dict[str, Any]:
        value = json.loads(self.decrypt(token))
        if not isinstance(value, dict):
            raise ValueError("a kept session must be a JSON object")
        return value
