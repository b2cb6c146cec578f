"""A small social network served on 127.0.0.1: what the demo and the tests crawl.

Pages (HTML; links between list pages are `<a rel="next">`):
- `/u/<handle>`: the profile (public);
- `/u/<handle>/posts`: posts with their comments (public);
- `/u/<handle>/followers?page=N`, `/u/<handle>/followings?page=N` (25 a page) and
  `/u/<handle>/replies`: need a session (`POST /login`, form `username`, `password`; a wrong
  password is refused with 403); without one they answer 401;
- `/u/<handle>/stories`: an empty list that JavaScript fills from
  `/api/u/<handle>/stories.json`: plain HTTP sees no story.
A logged-in account that makes more than `rate_limit[0]` requests within `rate_limit[1]`
seconds gets 429 with `Retry-After`.
"""

from __future__ import annotations

import html
import json
import secrets
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

from crawlsched.demo.serving import LocalSite, QuietHandler
from crawlsched.demo.social_data import FRIENDS_PER_PAGE, Profile, generate

STORIES_SCRIPT = """
fetch(location.pathname.replace('/u/', '/api/u/') + '.json').then(r => r.json()).then(items => {
  const list = document.getElementById('stories');
  for (const s of items) {
    const li = document.createElement('li');
    li.className = 'story'; li.dataset.id = s.id; li.textContent = s.text;
    list.appendChild(li);
  }
  list.dataset.ready = 'yes';
});
"""


def _page(title: str, body: str) -> bytes:
    return (
        f"<html><head><title>{html.escape(title)}</title></head><body>{body}</body></html>".encode()
    )


class DemoSocialNetwork(LocalSite):
    """`with DemoSocialNetwork(handles, accounts) as net:` on a loopback port (`port` 0: an
    ephemeral one)."""

    def __init__(
        self,
        handles: list[str],
        accounts: dict[str, str],
        rate_limit: tuple[int, float] = (10_000, 1.0),
        seed: int = 1,
        port: int = 0,
    ) -> None:
        self.data: dict[str, Profile] = generate(handles, seed)
        self.accounts = dict(accounts)
        self.rate_limit = rate_limit
        self.log: list[tuple[str, str, str | None]] = []  # method, path, account
        self.too_fast = 0  # 429s answered
        self._sessions: dict[str, str] = {}
        self._uses: dict[str, deque] = {}
        self._lock = threading.Lock()
        network = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                network._answer(self, "GET")

            def do_POST(self) -> None:
                network._answer(self, "POST")

        super().__init__(Handler, port=port)

    # -- requests ---------------------------------------------------------------------------------

    def _answer(self, request: BaseHTTPRequestHandler, method: str) -> None:
        user = self._user_of(request.headers.get("Cookie", ""))
        with self._lock:
            self.log.append((method, request.path, user))
        if method == "POST":
            length = min(int(request.headers.get("Content-Length") or 0), 10_000)
            form = parse_qs(request.rfile.read(length).decode(errors="replace"))
            self._login(request, form)
            return
        if user is not None and (wait := self._over_limit(user)):
            with self._lock:
                self.too_fast += 1
            self._send(request, 429, _page("slow down", "<p>too many requests</p>"),
                       {"Retry-After": str(wait)})  # fmt: skip
            return
        status, body, content_type = self._render(urlsplit(request.path), user)
        self._send(request, status, body, {"Content-Type": content_type})

    def _login(self, request: BaseHTTPRequestHandler, form: dict[str, list[str]]) -> None:
        username = (form.get("username") or [""])[0]
        password = (form.get("password") or [""])[0]
        if request.path != "/login" or self.accounts.get(username) != password:
            self._send(request, 403, _page("login refused", "<p>login refused</p>"))
            return
        token = secrets.token_hex(16)
        with self._lock:
            self._sessions[token] = username
        self._send(request, 303, b"", {"Location": "/", "Set-Cookie": f"session={token}; Path=/"})

    def _user_of(self, cookie: str) -> str | None:
        for part in cookie.split(";"):
            name, _, value = part.strip().partition("=")
            if name == "session":
                with self._lock:
                    return self._sessions.get(value)
        return None

    def _over_limit(self, user: str) -> int:
        """Seconds to wait when this request is one too many, else 0."""
        uses, window = self.rate_limit
        now = time.monotonic()
        with self._lock:
            recent = self._uses.setdefault(user, deque())
            while recent and now - recent[0] > window:
                recent.popleft()
            if len(recent) >= uses:
                return max(1, int(window - (now - recent[0])) + 1)
            recent.append(now)
            return 0

    def _render(self, url, user: str | None) -> tuple[int, bytes, str]:
        parts = [p for p in url.path.split("/") if p]
        page = parse_qs(url.query).get("page", ["1"])[0]
        number = int(page) if page.isdigit() and len(page) < 6 else 0
        if len(parts) == 4 and parts[0] == "api" and parts[3] == "stories.json":
            profile = self.data.get(parts[2])
            if profile is None:
                return 404, b"[]", "application/json"
            return 200, json.dumps(profile.stories).encode(), "application/json"
        if not parts:
            links = "".join(f'<li><a href="/u/{h}">{h}</a></li>' for h in self.data)
            return 200, _page("demo social", f"<ul>{links}</ul>"), "text/html; charset=utf-8"
        if len(parts) < 2 or parts[0] != "u" or parts[1] not in self.data:
            return 404, _page("not found", "<p>no such page</p>"), "text/html"
        profile = self.data[parts[1]]
        view = parts[2] if len(parts) > 2 else "profile"
        if view in ("followers", "followings", "replies") and user is None:
            return 401, _page("login needed", "<p>log in first</p>"), "text/html"
        body = pages.render(profile, view, number, STORIES_SCRIPT)
        if body is None:
            return 404, _page("not found", "<p>no such page</p>"), "text/html"
        return 200, body, "text/html; charset=utf-8"

    @staticmethod
    def _send(request, status: int, body: bytes, headers: dict | None = None) -> None:
        request.send_response(status)
        for name, value in {"Content-Type": "text/html", **(headers or {})}.items():
            request.send_header(name, value)
        request.send_header("Content-Length", str(len(body)))
        request.end_headers()
        request.wfile.write(body)


from crawlsched.demo import social_pages as pages  # noqa: E402  (the HTML, kept apart)

__all__ = ["FRIENDS_PER_PAGE", "DemoSocialNetwork"]
