"""Where crawlsched's store and broker are, and the keys it signs and seals with."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, ValidationInfo, field_validator

from crawlsched.settings.values import (
    split_broker_urls,
    spread_nodes,
)


class ConnectionSettings(BaseModel):
    """Part of `Settings` (CRAWLSCHED_* from the environment): see the README's settings table."""

    mongo_url: str = Field(
        "mongomock://",
        description="mongodb://… for a real server; mongomock:// for the embedded store.",
    )
    mongo_db: str = "crawlsched"
    broker_url: str = Field(
        "stub://",
        description="amqp://user:pass@host:5672/vhost for RabbitMQ (several nodes of a cluster: "
        "their URLs joined by ';', tried in order); stub:// in-process.",
    )
    broker_spread: bool = Field(
        False,
        description="With several node URLs, each process starts at a different one (by its "
        "process id), so connections and the queues their processes declare first spread over "
        "the cluster instead of all landing on the first node. Off by default: see the README's "
        "cluster section.",
    )
    queue_type: Literal["classic", "quorum"] = Field(
        "classic",
        description="Queues crawlsched declares: classic (one node) or quorum (replicated over "
        "a RabbitMQ cluster; survives the loss of a minority of nodes).",
    )
    quorum_delivery_limit: int = Field(
        20,
        ge=1,
        le=1000,
        description="quorum queues: a message handed out this many times without an ack "
        "(its worker died each time) is dead-lettered instead of redelivered forever.",
    )
    publisher_confirms: bool = Field(
        True,
        description="Wait for RabbitMQ to confirm every message it was sent (a send it does not "
        "confirm fails loudly and is retried instead of being lost without a trace).",
    )
    reference_file: Path | None = Field(
        None, description="YAML of models, media and tasks; the packaged default when unset."
    )
    connect_timeout_s: float = Field(
        5.0,
        gt=0,
        le=120,
        allow_inf_nan=False,
        description="How long a command, clock or worker waits for MongoDB or RabbitMQ to "
        "answer before it reports the service unreachable.",
    )
    secret_key: SecretStr | None = Field(
        None,
        description="Fernet key that encrypts account secrets at rest "
        "(`crawlsched accounts keygen` makes one). Needed by commands and workers that touch "
        "a secret.",
    )
    message_signing: bool = Field(
        True,
        description="Sign every message and dead-letter one without a valid signature. On "
        "RabbitMQ it needs message_signing_key; false runs unsigned (anyone who can publish on "
        "the vhost can then send ticks, plans and crawl batches).",
    )
    message_signing_key: SecretStr | None = Field(
        None,
        min_length=32,
        validate_default=True,
        description="The HMAC-SHA256 key messages are signed with; the same key on every "
        "process. Required on RabbitMQ unless message_signing is false; the standalone server "
        "makes one in its data directory.",
    )

    @field_validator("message_signing_key")
    @classmethod
    def _signed_on_rabbitmq(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        # A shared broker takes messages from anyone with publish rights on its vhost: without
        # a key, a worker would run whatever they send.
        shared = not str(info.data.get("broker_url", "stub://")).startswith("stub://")
        if value is None and shared and info.data.get("message_signing", True):
            raise ValueError(
                "unset, and messages on RabbitMQ are signed: set the same key (32+ characters, "
                "e.g. `openssl rand -hex 32`) on every process, or CRAWLSCHED_MESSAGE_SIGNING="
                "false to run unsigned"
            )
        return value

    @field_validator("mongo_url")
    @classmethod
    def _known_mongo_scheme(cls, value: str) -> str:
        if not value.startswith(("mongodb://", "mongodb+srv://", "mongomock://")):
            raise ValueError(
                "mongo_url must start with mongodb://, mongodb+srv:// or mongomock://, "
                f"got {value!r}"
            )
        return value

    @field_validator("broker_url")
    @classmethod
    def _known_broker_scheme(cls, value: str) -> str:
        urls = split_broker_urls(value)
        for url in urls:
            if not url.startswith(("amqp://", "amqps://", "stub://")):
                raise ValueError(
                    f"broker_url must start with amqp://, amqps:// or stub://, got {url[:100]!r}"
                )
        if len(urls) > 1 and any(url.startswith("stub://") for url in urls):
            raise ValueError("broker_url: stub:// cannot be one of several node URLs")
        return value

    @property
    def broker_urls(self) -> list[str]:
        """The node URLs of `broker_url` (one, or a cluster's) in the order this process tries
        them: from a node of its own when `broker_spread` is on."""
        urls = split_broker_urls(self.broker_url)
        return spread_nodes(urls, os.getpid()) if self.broker_spread else urls
