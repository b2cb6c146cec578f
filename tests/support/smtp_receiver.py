"""A local SMTP server (aiosmtpd, in a thread of the test process) on a free loopback port.

It takes AUTH LOGIN/PLAIN without TLS (loopback only) for one user and password, and keeps
every message it accepted and every login tried.
"""

from __future__ import annotations

import threading
from email import message_from_bytes
from email.message import Message
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult

from tests.support.ports import free_port


class SmtpReceiver:
    def __init__(self, user: str, password: str) -> None:
        self.user, self.password = user, password
        self.messages: list[Message] = []
        self.logins: list[tuple[str, bool]] = []  # (user, accepted): never the password
        self._lock = threading.Lock()
        self.port = free_port()
        self._controller = Controller(
            self,
            hostname="127.0.0.1",
            port=self.port,
            authenticator=self._authenticate,
            auth_required=True,
            auth_require_tls=False,
        )

    def _authenticate(self, server, session, envelope, mechanism, auth_data) -> AuthResult:
        login = auth_data.login.decode(errors="replace")
        ok = login == self.user and auth_data.password.decode(errors="replace") == self.password
        with self._lock:
            self.logins.append((login, ok))
        return AuthResult(success=ok)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        with self._lock:
            self.messages.append(message_from_bytes(envelope.content))
        return "250 Message accepted"

    def received(self) -> list[Message]:
        with self._lock:
            return list(self.messages)

    def notice_url(self, to: str = "ops@crawl.example") -> str:
        """The Apprise URL of this server (plain SMTP, the server named by `smtp=`)."""
        return (
            f"mailto://{self.user}:{self.password}@crawl.example:{self.port}"
            f"?smtp=127.0.0.1&from=crawlsched@crawl.example&to={to}"
        )

    def __enter__(self) -> SmtpReceiver:
        self._controller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._controller.stop()
