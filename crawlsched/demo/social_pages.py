"""The demo social network's HTML, one function per view."""

from __future__ import annotations

from html import escape

from crawlsched.demo.social_data import FRIENDS_PER_PAGE, Profile


def _page(title: str, body: str) -> bytes:
    return f"<html><head><title>{escape(title)}</title></head><body>{body}</body></html>".encode()


def render(profile: Profile, view: str, page: int, stories_script: str) -> bytes | None:
    h = profile.handle
    if view == "profile":
        card = profile.card()
        return _page(
            profile.name,
            f'<div class="profile" data-handle="{h}"><h1 class="name">{escape(profile.name)}</h1>'
            f'<p class="bio">{escape(profile.bio)}</p>'
            f'<span class="followers">{card["followers"]}</span>'
            f'<span class="followings">{card["followings"]}</span>'
            f'<span class="posts">{card["posts"]}</span></div>',
        )
    if view == "posts":
        items = "".join(
            f'<article class="post" data-id="{p["id"]}"><p class="text">{escape(p["text"])}</p>'
            f'<time datetime="{p["date"]}">{p["date"]}</time><ul>'
            + "".join(
                f'<li class="comment" data-id="{c["id"]}"><span class="author">{c["author"]}'
                f'</span><p class="text">{escape(c["text"])}</p></li>'
                for c in p["comments"]
            )
            + "</ul></article>"
            for p in profile.posts
        )
        return _page(f"posts of {h}", items)
    if view in ("followers", "followings"):
        everyone = getattr(profile, view)
        start = (page - 1) * FRIENDS_PER_PAGE
        if page < 1 or (start >= len(everyone) and page > 1):
            return None
        rows = "".join(
            f'<li class="friend"><a href="/u/{o}">{o}</a></li>'
            for o in everyone[start : start + FRIENDS_PER_PAGE]
        )
        nav = ""
        if start + FRIENDS_PER_PAGE < len(everyone):
            nav = f'<a rel="next" href="/u/{h}/{view}?page={page + 1}">more</a>'
        return _page(f"{view} of {h}", f'<ul class="{view}">{rows}</ul>{nav}')
    if view == "replies":
        rows = "".join(
            f'<li class="reply" data-id="{r["id"]}" data-to="{r["to"]}">{escape(r["text"])}</li>'
            for r in profile.replies
        )
        return _page(f"replies of {h}", f'<ul class="replies">{rows}</ul>')
    if view == "stories":
        return _page(f"stories of {h}", f'<ul id="stories"></ul><script>{stories_script}</script>')
    return None
