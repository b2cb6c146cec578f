"""Demo data: reference rows pointed at the local site, jobs in all four categories, pools."""

from __future__ import annotations

from datetime import datetime, timedelta

from crawlsched.catalog import JobState
from crawlsched.demo.site import MISSING_PREFIX
from crawlsched.reference import ProxyRow, ReferenceData, load_reference
from crawlsched.resources.rules import AccountLimits
from crawlsched.runtime import Runtime

PROFILES_PER_MEDIA = {"twitter": 12, "instagram": 6, "tiktok": 8, "youtube": 10}
WEBSITES = 12
DEAD_EVERY = 7  # every 7th target 404s


def demo_reference(base_url: str) -> ReferenceData:
    reference = load_reference()
    media = [
        m.model_copy(
            update={
                "url_template": f"{base_url}/{m.name}/{{handle}}",
                # The demo site is where the demo accounts' secrets may go.
                "secret_hosts": [base_url],
            }
        )
        if m.url_template
        else m
        for m in reference.media
    ]
    return reference.model_copy(update={"media": media})


def _job(target: str, media: str, media_id: int, task: str, now: datetime, n: int) -> dict:
    return {
        "target": target,
        "media_name": media,
        "media_name_id": media_id,
        "task": task,
        "state": int(JobState.PENDING),
        "enabled": True,
        "execution_date": now - timedelta(seconds=1),
        "human_validation": int(n % 4 == 0),
        "certitude": round(0.5 + (n % 5) / 10, 2),
        "modified_at": now - timedelta(minutes=n),
        "created_at": now,
        "attempt_count": 0,
        "interval_s": 3600,
    }


def seed(rt: Runtime, base_url: str, node_url: str | None = None) -> dict[str, int]:
    now = rt.now()
    rt.create_indexes()
    rt.reference.load(demo_reference(base_url))
    rt.schedules.ensure_defaults(now)
    media_ids = {m["media_name"]: m["_id"] for m in rt.reference.media()}
    profiles = []
    n = 0
    for media, count in PROFILES_PER_MEDIA.items():
        for i in range(count):
            n += 1
            handle = f"{media}_user{i}"
            for task in ("profile", "publication"):
                doc = _job(handle, media, media_ids[media], task, now, n)
                if n % DEAD_EVERY == 0:
                    doc["url"] = f"{base_url}{MISSING_PREFIX}{handle}"
                profiles.append(doc)
    websites = []
    for i in range(WEBSITES):
        path = f"{MISSING_PREFIX}site{i}" if i % DEAD_EVERY == 3 else f"/site{i}/news"
        websites.append(_job(f"{base_url}{path}", "web", media_ids["web"], "article", now, i))
    inserted_profiles, _ = rt.jobs("profiles").insert_new(profiles)
    inserted_websites, _ = rt.jobs("websites").insert_new(websites)
    # Fewer resources than batches ask for at once: batches wait their turn, as in production.
    add_demo_pools(rt, node_url)
    return {"profiles": inserted_profiles, "websites": inserted_websites}


def add_demo_pools(rt: Runtime, node_url: str | None, node_slots: int = 2) -> None:
    """Three accounts on two media, and the local node when there is one."""
    now = rt.now()
    for media in ("twitter", "instagram"):
        rt.inventory.add_account(
            media, f"demo_{media}_1", f"demo-secret-{media}-1", AccountLimits(), now
        )
    rt.inventory.add_account(
        "twitter", "demo_twitter_2", "demo-secret-twitter-2", AccountLimits(), now
    )
    if node_url is not None:
        rt.inventory.add_node(node_url, "chromedriver", node_slots, now)


# The demo proper: the social network and the news site, crawled by their own drivers.
DEMO_HANDLES = {"twitter": 6, "instagram": 4, "tiktok": 4, "youtube": 4}
DEMO_TASKS = {
    "twitter": ("profile", "publication", "friend", "profile_replies"),
    "instagram": ("profile", "publication", "stories"),
    "tiktok": ("profile", "publication"),
    "youtube": ("profile", "publication"),
}
MISSING_HANDLE = "gone_user"  # not on the network: its jobs fail and show the retry schedule


def demo_handles() -> list[str]:
    return [f"{media}_user{i}" for media, n in DEMO_HANDLES.items() for i in range(n)]


def demo_accounts() -> dict[str, str]:
    """The accounts the network knows, by username: the pool's demo accounts."""
    return {
        "demo_twitter_1": "demo-secret-twitter-1",
        "demo_twitter_2": "demo-secret-twitter-2",
        "demo_instagram_1": "demo-secret-instagram-1",
    }


# The demo's twitter goes out through local proxies, each account bound to its own: the
# network bans an account seen from two addresses and an address used by two accounts.
PROXIED_MEDIA = "twitter"
DEMO_PROXY_BINDINGS = {"demo_twitter_1": "demo-proxy-1", "demo_twitter_2": "demo-proxy-2"}
DEMO_PROXY_ADDRESSES = {"demo-proxy-1": "127.0.0.31", "demo-proxy-2": "127.0.0.32"}


def crawl_reference(network_url: str, proxied: bool = False) -> ReferenceData:
    """The packaged media on the demo network (driver `demo_social`) and `web` on the
    website driver; both follow what they discover. `proxied`: twitter goes out through
    the proxy pool."""
    reference = load_reference()
    social = {
        "driver_class": "demo_social",
        "url_template": f"{network_url}/u/{{handle}}",
        "secret_hosts": [network_url],
        "max_depth": 30,
    }
    web = {"driver_class": "website", "max_depth": 10}
    media = [
        m.model_copy(update=social if m.url_template else web if m.name == "web" else {})
        for m in reference.media
    ]
    if proxied:
        proxy = ProxyRow(block_markers=["proxy-blocked"])
        media = [
            m.model_copy(update={"proxy": proxy}) if m.name == PROXIED_MEDIA else m for m in media
        ]
    return reference.model_copy(update={"media": media})


def add_demo_proxies(rt: Runtime, proxy_urls: dict[str, str]) -> None:
    """The demo's proxies (name -> URL), each twitter account bound to its own."""
    now = rt.now()
    for name, url in proxy_urls.items():
        rt.proxies.add_proxy(name, url, now, group="demo", tier=0, max_concurrent=2)
    for username, proxy in DEMO_PROXY_BINDINGS.items():
        rt.proxies.bind_account(PROXIED_MEDIA, username, proxy, None, now)


def seed_crawl_demo(
    rt: Runtime,
    network_url: str,
    website_url: str,
    node_url: str | None = None,
    proxy_urls: dict[str, str] | None = None,
) -> dict[str, int]:
    """`proxy_urls` (name -> URL of the demo's proxies): twitter goes out through them."""
    now = rt.now()
    rt.create_indexes()
    rt.reference.load(crawl_reference(network_url, proxied=bool(proxy_urls)))
    rt.schedules.ensure_defaults(now)
    media_ids = {m["media_name"]: m["_id"] for m in rt.reference.media()}
    profiles, n = [], 0
    for media, count in DEMO_HANDLES.items():
        handles = [f"{media}_user{i}" for i in range(count)]
        if media == "twitter":
            handles.append(MISSING_HANDLE)
        for handle in handles:
            n += 1
            for task in DEMO_TASKS[media]:
                profiles.append(_job(handle, media, media_ids[media], task, now, n))
    websites = [
        {**_job(f"{website_url}/news/", "web", media_ids["web"], "article", now, 1),
         "pagination": "next_link"},
        {**_job(f"{website_url}/blog/", "web", media_ids["web"], "article", now, 2),
         "pagination": "page_param"},
        _job(f"{website_url}/gone/", "web", media_ids["web"], "article", now, 3),
    ]  # fmt: skip
    inserted_profiles, _ = rt.jobs("profiles").insert_new(profiles)
    inserted_websites, _ = rt.jobs("websites").insert_new(websites)
    add_demo_pools(rt, node_url)
    if proxy_urls:
        add_demo_proxies(rt, proxy_urls)
    return {"profiles": inserted_profiles, "websites": inserted_websites}
