"""The console's own settings, read once from its environment (never from control.config).

``LEGATO_API_URL`` says where the admin API listens; the admin credential comes from
``LEGATO_ADMIN_TOKEN`` or the file ``<LEGATO_VAR_DIR or var>/admin_token`` when present,
otherwise the operator types it in at sign-in.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_API_URL = "http://127.0.0.1:8700"


@dataclass(frozen=True)
class ConsoleSettings:
    """What the console needs to reach the control plane."""

    api_url: str = DEFAULT_API_URL
    #: The admin credential handed over by ``legato console``; None: ask at sign-in.
    admin_token: str | None = None
    #: Seconds between refreshes of the live panels.
    live_refresh_s: float = 1.0
    #: Seconds a loaded table is reused before the API is asked again.
    cache_ttl_s: float = 5.0


def _token_from_file(var_dir: Path) -> str | None:
    path = var_dir / "admin_token"
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return text or None


def read_settings(env: dict[str, str] | None = None) -> ConsoleSettings:
    """Settings from ``env`` (default: the process environment). Called once per session."""
    env = dict(os.environ) if env is None else env
    token = env.get("LEGATO_ADMIN_TOKEN") or _token_from_file(
        Path(env.get("LEGATO_VAR_DIR", "var"))
    )
    return ConsoleSettings(
        api_url=env.get("LEGATO_API_URL", DEFAULT_API_URL).rstrip("/"),
        admin_token=token or None,
        live_refresh_s=float(env.get("LEGATO_CONSOLE_REFRESH_S", "1.0")),
        cache_ttl_s=float(env.get("LEGATO_CONSOLE_CACHE_TTL_S", "5.0")),
    )
