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

Off by default, what real networks do to crawlers (the demo binds each account to a proxy, and
tells proxies apart by the address requests come from, `request.client_address`):
- `ban_moving_accounts`: an account (a session's user, or a login's username) seen from two
  addresses within `address_window_s` is banned;
- `max_accounts_per_address`: an account that makes one more than that many accounts seen
  from one address within `address_window_s` is banned;
- a banned account's login and its sessions' requests get 403 `account suspended`;
- `endpoint_rate_limit` (N, W): more than N requests to one view (`profile`, `posts`,
  `followers`, `followings`, `replies`, `stories`) by one account within W seconds get 429
  with `Retry-After` and `x-rate-limit-reset` (unix seconds, as twscrape reads it);
- `session_max_age_s`: a session cookie older than that is no longer accepted.
What happened is in `banned` (username -> reason), `logins` (successful, per username),
`address_of_requests` (username -> address -> requests) and `seen_from`.
"""

from __future__ import annotations

import html
import json
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

from crawlsched.demo.serving import LocalSite, QuietHandler
from crawlsched.demo.social_data import FRIENDS_PER_PAGE, Profile, generate
from crawlsched.demo.social_watch import AddressWatch, SlidingWindow

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


ENDPOINTS = ("profile", "posts", "followers", "followings", "replies", "stories")
_SUSPENDED = _page("account suspended", "<p>account suspended</p>")


def _endpoint_of(url) -> str | None:
    """The view a `/u/<handle>[/<view>]` path asks for (what a per-endpoint limit counts)."""
    parts = [p for p in url.path.split("/") if p]
    if len(parts) not in (2, 3) or parts[0] != "u":
        return None
    view = parts[2] if len(parts) == 3 else "profile"
    return view if view in ENDPOINTS else None


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
        *,
        ban_moving_accounts: bool = False,
        max_accounts_per_address: int | None = None,
        address_window_s: float = 600.0,
        endpoint_rate_limit: tuple[int, float] | None = None,
        session_max_age_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.data: dict[str, Profile] = generate(handles, seed)
        self.accounts = dict(accounts)
        self.rate_limit = rate_limit
        self.session_max_age_s = session_max_age_s
        self._clock = clock
        # Behind _lock: log, too_fast, banned, logins, address_of_requests and the private
        # state below.
        self.log: list[tuple[str, str, str | None]] = []  # method, path, account
        self.too_fast = 0  # 429s answered
        self.banned: dict[str, str] = {}  # username -> why
        self.logins: Counter[str] = Counter()  # successful logins per username
        self.address_of_requests: dict[str, Counter[str]] = {}  # username -> address -> count
        self._sessions: dict[str, tuple[str, float]] = {}  # token -> username, since
        self._uses = SlidingWindow(*rate_limit)
        self._endpoint_uses = SlidingWindow(*endpoint_rate_limit) if endpoint_rate_limit else None
        self._watch = AddressWatch(address_window_s, ban_moving_accounts, max_accounts_per_address)
        self._lock = threading.Lock()
        network = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                network._answer(self, "GET")

            def do_POST(self) -> None:
                network._answer(self, "POST")

        super().__init__(Handler, port=port)

    # -- requests ---------------------------------------------------------------------------------

    @property
    def seen_from(self) -> dict[str, set[str]]:
        """The addresses each account's requests came from."""
        with self._lock:
            return {user: set(by) for user, by in self.address_of_requests.items()}

    def _answer(self, request: BaseHTTPRequestHandler, method: str) -> None:
        now = self._clock()
        address = request.client_address[0]
        user = self._user_of(request.headers.get("Cookie", ""), now)
        with self._lock:
            self.log.append((method, request.path, user))
        if method == "POST":
            length = min(int(request.headers.get("Content-Length") or 0), 10_000)
            form = parse_qs(request.rfile.read(length).decode(errors="replace"))
            self._login(request, form, address, now)
            return
        if user is not None and self._suspended(user, address, now):
            self._send(request, 403, _SUSPENDED)
            return
        url = urlsplit(request.path)
        if user is not None and (wait := self._over_limit(user, _endpoint_of(url), now)):
            with self._lock:
                self.too_fast += 1
            headers = {"Retry-After": str(wait)}
            if self._endpoint_uses is not None:
                headers["x-rate-limit-reset"] = str(int(time.time()) + wait)
            self._send(request, 429, _page("slow down", "<p>too many requests</p>"), headers)
            return
        status, body, content_type = self._render(url, user)
        self._send(request, status, body, {"Content-Type": content_type})

    def _login(
        self, request: BaseHTTPRequestHandler, form: dict[str, list[str]], address: str, now: float
    ) -> None:
        username = (form.get("username") or [""])[0]
        password = (form.get("password") or [""])[0]
        if username in self.accounts and self._suspended(username, address, now):
            self._send(request, 403, _SUSPENDED)
            return
        if request.path != "/login" or self.accounts.get(username) != password:
            self._send(request, 403, _page("login refused", "<p>login refused</p>"))
            return
        token = secrets.token_hex(16)
        with self._lock:
            self._sessions[token] = (username, now)
            self.logins[username] += 1
        self._send(request, 303, b"", {"Location": "/", "Set-Cookie": f"session={token}; Path=/"})

    def _user_of(self, cookie: str, now: float) -> str | None:
        for part in cookie.split(";"):
            name, _, value = part.strip().partition("=")
            if name == "session":
                with self._lock:
                    user, since = self._sessions.get(value, (None, now))
                max_age = self.session_max_age_s
                return None if max_age is not None and now - since > max_age else user
        return None

    def _suspended(self, user: str, address: str, now: float) -> bool:
        """Count this request of `user` from `address`; whether the account is banned (now
        or before)."""
        with self._lock:
            self.address_of_requests.setdefault(user, Counter())[address] += 1
            reason = self._watch.see(user, address, now)
            if reason is not None and user not in self.banned:
                self.banned[user] = reason
            return user in self.banned

    def _over_limit(self, user: str, endpoint: str | None, now: float) -> int:
        """Seconds to wait when this request is one too many (for the account, or for the
        account at this endpoint), else 0."""
        with self._lock:
            if wait := self._uses.take(user, now):
                return wait
            if self._endpoint_uses is None or endpoint is None:
                return 0
            return self._endpoint_uses.take((user, endpoint), now)

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
