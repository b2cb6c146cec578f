"""Proxy and session settings: how a failed proxy rests, how a domain moves between tiers, how
long an account's login session is kept, and where proxies may be."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator, model_validator

from crawlsched.settings.values import checked_networks


class ProxySettings(BaseModel):
    """Part of `Settings` (CRAWLSCHED_* from the environment): see the README's settings table."""

    proxy_backoff_s: float = Field(
        300.0, gt=0, le=86400, allow_inf_nan=False,
        description="A failed proxy's first rest; it doubles with each failure in a row.",
    )  # fmt: skip
    proxy_backoff_cap_s: float = Field(
        3600.0, gt=0, le=7 * 86400, allow_inf_nan=False,
        description="The longest rest of a failed proxy.",
    )  # fmt: skip
    proxy_escalate_after: int = Field(
        3, ge=1, le=1000,
        description="Blocks in a row on a domain's proxy tier before it moves to the next "
        "costlier tier.",
    )  # fmt: skip
    proxy_probe_after_s: float = Field(
        600.0, gt=0, le=7 * 86400, allow_inf_nan=False,
        description="After a domain moved up a tier, when one batch first tries the cheaper "
        "tier again (doubling after each failed probe, up to 6 h).",
    )  # fmt: skip
    proxy_allow_networks: list[str] = Field(
        default_factory=list,
        description="Networks (CIDR) proxies may be on although private, loopback or "
        "link-local, e.g. 127.0.0.1/32 for a proxy on this machine; none by default.",
    )
    session_max_age_s: float = Field(
        3000.0, ge=0, le=30 * 86400, allow_inf_nan=False,
        description="How long an account's login session (its cookies, encrypted) is kept "
        "for its next batches; 0 logs in once per batch.",
    )  # fmt: skip
    session_max_uses: int = Field(
        50, ge=1, le=100_000, description="Batches one kept login session serves at most."
    )

    @field_validator("proxy_allow_networks")
    @classmethod
    def _proxy_networks(cls, value: list[str]) -> list[str]:
        # (named apart from CrawlSettings._networks: one name would shadow the other in Settings)
        return checked_networks("proxy_allow_networks", value)

    @model_validator(mode="after")
    def _cap_over_base(self) -> ProxySettings:
        if self.proxy_backoff_cap_s < self.proxy_backoff_s:
            raise ValueError("proxy_backoff_cap_s must be >= proxy_backoff_s")
        return self
