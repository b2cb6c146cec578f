"""The demo social network's content: generated from a seed, the same every time.

Everything the network serves comes from here, so a test compares what a crawl stored with
exactly this.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

FRIENDS_PER_PAGE = 25


@dataclass
class Profile:
    handle: str
    name: str
    bio: str
    posts: list[dict] = field(default_factory=list)  # id, text, date, comments[id, author, text]
    followers: list[str] = field(default_factory=list)
    followings: list[str] = field(default_factory=list)
    replies: list[dict] = field(default_factory=list)  # id, to, text
    stories: list[dict] = field(default_factory=list)  # id, text

    def card(self) -> dict:
        return {
            "handle": self.handle,
            "name": self.name,
            "bio": self.bio,
            "followers": len(self.followers),
            "followings": len(self.followings),
            "posts": len(self.posts),
        }


def generate(handles: list[str], seed: int = 1) -> dict[str, Profile]:
    rng = random.Random(seed)
    profiles: dict[str, Profile] = {}
    crowd = [f"fan{n:03d}" for n in range(500)]
    for i, handle in enumerate(handles):
        profile = Profile(handle, f"{handle.replace('_', ' ').title()}", f"bio of {handle}")
        for p in range(rng.randint(2, 4)):
            comments = [
                {"id": f"c{c}", "author": rng.choice(crowd), "text": f"comment {c} on post {p}"}
                for c in range(rng.randint(0, 3))
            ]
            date = f"2026-11-{1 + (i + p) % 28:02d}"
            profile.posts.append(
                {"id": f"p{p}", "text": f"post {p} of {handle}", "date": date, "comments": comments}
            )
        profile.followers = sorted(rng.sample(crowd, rng.randint(150, 400)))
        profile.followings = sorted(rng.sample(crowd, rng.randint(30, 80)))
        profile.replies = [
            {"id": f"r{r}", "to": rng.choice(crowd), "text": f"reply {r} by {handle}"}
            for r in range(rng.randint(1, 3))
        ]
        profile.stories = [{"id": f"s{s}", "text": f"story {s} of {handle}"} for s in range(2)]
        profiles[handle] = profile
    return profiles
