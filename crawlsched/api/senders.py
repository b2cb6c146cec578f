"""The senders of the messages a route sends, when messages sent from this process reach a
worker (a real broker, or the standalone's in-process workers); otherwise 503."""

from __future__ import annotations

from fastapi import Request

from crawlsched.api.problems import ApiProblem
from crawlsched.control import Senders


def senders_of(request: Request, what: str = "start or stop runs") -> Senders:
    if not request.app.state.delivers:
        raise ApiProblem(503, f"this server has no broker its workers read: it cannot {what}")
    from crawlsched.actors.sends import send_plan_children, send_plan_iso, send_webhook

    return Senders(send_plan_iso, send_plan_children, send_webhook)
