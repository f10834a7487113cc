"""Gateway settings: the API's own knobs, read once at the edge (``LEGATO_`` prefix).

The shared :class:`control.config.Settings` holds what every component reads (database URL,
admin token, host and port). The limits below only the gateway uses; the command that starts
the API reads both once and passes a frozen :class:`GatewayConfig` to the app factory.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from control.config import Settings


class GatewaySettings(BaseSettings):
    """Limits and secrets of the API gateway. Descriptions double as help text."""

    model_config = SettingsConfigDict(env_prefix="LEGATO_", env_file=".env", extra="ignore")

    key_pepper: SecretStr = Field(
        SecretStr(""),
        description="Server secret keying API-key digests; never stored in the database. "
        "Changing it invalidates every issued key.",
    )
    max_body_bytes: int = Field(
        1_048_576, ge=1024, description="Largest request body accepted (413 above)."
    )
    max_json_depth: int = Field(
        64,
        ge=2,
        le=512,
        description="Deepest nesting of arrays and objects a JSON body or WebSocket message "
        "may have (422 above).",
    )
    sync_timeout_s: float = Field(
        60.0, gt=0, description="Default time a synchronous run may take before a 504."
    )
    max_wait_s: float = Field(60.0, gt=0, description="Longest long-poll ?wait= honoured.")
    async_run_timeout_s: float = Field(
        600.0,
        gt=0,
        description="Longest an async or stream run may take: still going then, it ends "
        "timed out (failed, with the reason) and releases its quota and concurrency.",
    )
    resume_max_age_s: float = Field(
        3600.0,
        ge=0,
        description="On start, runs an earlier process left open that were received at most "
        "this long ago are resumed; older ones fail retryably (0: none is resumed).",
    )
    key_cache_ttl_s: float = Field(
        2.0,
        ge=0,
        description="How long a verified API key is trusted without asking the database again "
        "(revocations through this API take effect at once; from elsewhere after this TTL).",
    )
    capacity_admission: bool = Field(
        True,
        description="Admission by capacity: refuse (429, Retry-After the predicted drain) a "
        "run predicted to wait past its deadline (on|off).",
    )
    capacity_margin: float = Field(
        1.0,
        gt=0,
        description="Factor on the predicted delay before it is compared with the "
        "time left to the deadline (above 1: refuse earlier).",
    )
    strict_priority_lead: int = Field(
        20_000,
        gt=0,
        description="Cost units (per unit of weight) a strict-priority tenant may run ahead of "
        "the least-served waiting tenant while its work overtakes their lower classes.",
    )
    capacity_lower_class_path_s: float | None = Field(
        None,
        ge=0,
        description="Headroom for the most urgent class on the gateway's own path: lower "
        "classes are refused (429) while its predicted delay exceeds this many seconds "
        "(unset: off).",
    )
    canary_error_margin: float = Field(
        0.05,
        ge=0,
        le=1,
        description="A canary model version is rolled back automatically when its error rate "
        "exceeds its baseline's by more than this (absolute; 0.05: five percentage points).",
    )
    canary_p99_margin: float = Field(
        1.0,
        ge=0,
        description="A canary is rolled back automatically when its p99 step latency exceeds "
        "its baseline's by more than this fraction of it (1.0: more than twice the baseline).",
    )
    canary_p99_min_delta_s: float = Field(
        0.05,
        ge=0,
        description="...and only when the canary's p99 exceeds the baseline's by at least this "
        "many seconds (tail latency over a few hundred steps is noisy).",
    )
    canary_min_samples: int = Field(
        20,
        ge=1,
        description="Recent steps each variant (baseline and canary) needs before a canary is "
        "judged.",
    )
    canary_window: int = Field(
        200,
        ge=1,
        description="Most recent steps per variant a canary is judged on (at least "
        "canary_min_samples).",
    )
    hot_routes: bool = Field(
        True,
        description="Serve the run-starting routes without FastAPI's per-call machinery "
        "(same answers, less CPU per call); false: FastAPI serves them like every route.",
    )
    demo_bursts: bool = Field(
        False,
        description="Allow the admin to start bounded demo bursts of one tenant's runs "
        "(/admin/demo/bursts; `legato up` turns it on for the demo; off: 403).",
    )
    demo_burst_max_rate_per_s: float = Field(
        20.0, gt=0, description="Highest rate a demo burst may ask for (422 above)."
    )
    demo_burst_max_duration_s: float = Field(
        120.0, gt=0, description="Longest a demo burst may last (422 above)."
    )
    demo_burst_max_requests: int = Field(
        2000, ge=1, description="Most runs one demo burst may submit (422 above)."
    )
    fair_history_every_s: float = Field(
        1.0, gt=0, le=60, description="Seconds between samples of the fair-share history."
    )
    fair_history_s: float = Field(
        600.0, gt=0, le=3600, description="Seconds of fair-share history the gateway keeps."
    )
    otlp_endpoint: str | None = Field(
        None,
        description="OpenTelemetry collector's OTLP/HTTP URL (http://host:4318 or its "
        "/v1/traces URL): each finished run is exported as a trace, one span per step. "
        "Unset: nothing is exported.",
    )
    otlp_service_name: str = Field(
        "legato", min_length=1, description="service.name of the exported run traces."
    )


@dataclass(frozen=True)
class GatewayConfig:
    """What the app factory needs; build it with :func:`gateway_config` or directly in tests."""

    admin_token: str | None = None
    max_body_bytes: int = 1_048_576
    max_json_depth: int = 64
    sync_timeout_s: float = 60.0
    max_wait_s: float = 60.0
    key_cache_ttl_s: float = 2.0
    #: Serve the inference routes through :mod:`control.api.hot_routes` (same answers, a
    #: fraction of FastAPI's CPU per call); off: FastAPI serves them like every other route.
    hot_routes: bool = True
    #: Admission by capacity (core and the gateway's door): on, and the factor on the delay.
    capacity_admission: bool = True
    capacity_margin: float = 1.0
    #: The door's headroom for the most urgent class (s of path delay; None: off).
    capacity_lower_class_path_s: float | None = None
    #: Demo bursts (``/admin/demo/bursts``): allowed, and their caps.
    demo_bursts: bool = False
    demo_burst_max_rate_per_s: float = 20.0
    demo_burst_max_duration_s: float = 120.0
    demo_burst_max_requests: int = 2000
    #: The fair-share history: sampling interval and how much is kept (seconds).
    fair_history_every_s: float = 1.0
    fair_history_s: float = 600.0

    def __post_init__(self) -> None:
        if self.max_body_bytes < 1024:
            raise ValueError(f"max_body_bytes={self.max_body_bytes}: must be >= 1024")
        if not 2 <= self.max_json_depth <= 512:
            raise ValueError(f"max_json_depth={self.max_json_depth}: must be in 2..512")
        if self.sync_timeout_s <= 0 or self.max_wait_s <= 0:
            raise ValueError("sync_timeout_s and max_wait_s must be > 0")
        if self.key_cache_ttl_s < 0:
            raise ValueError(f"key_cache_ttl_s={self.key_cache_ttl_s}: must be >= 0")


def gateway_config(settings: Settings, gateway: GatewaySettings) -> GatewayConfig:
    """Combine the shared settings and the gateway's own into the app factory's config."""
    token = settings.admin_token.get_secret_value() if settings.admin_token else None
    return GatewayConfig(
        admin_token=token or None,
        max_body_bytes=gateway.max_body_bytes,
        max_json_depth=gateway.max_json_depth,
        sync_timeout_s=gateway.sync_timeout_s,
        max_wait_s=gateway.max_wait_s,
        key_cache_ttl_s=gateway.key_cache_ttl_s,
        hot_routes=gateway.hot_routes,
        capacity_admission=gateway.capacity_admission,
        capacity_margin=gateway.capacity_margin,
        capacity_lower_class_path_s=gateway.capacity_lower_class_path_s,
        demo_bursts=gateway.demo_bursts,
        demo_burst_max_rate_per_s=gateway.demo_burst_max_rate_per_s,
        demo_burst_max_duration_s=gateway.demo_burst_max_duration_s,
        demo_burst_max_requests=gateway.demo_burst_max_requests,
        fair_history_every_s=gateway.fair_history_every_s,
        fair_history_s=gateway.fair_history_s,
    )
