"""The console's own settings, read once from its environment (never from control.config).

``LEGATO_API_URL`` says where the admin API listens. The console holds no credential of its own:
every browser session signs in by presenting the admin credential (typed in, or through a
one-time link whose tickets lie under ``LEGATO_VAR_DIR``, see :mod:`app.links`), and its sign-in
lasts ``LEGATO_CONSOLE_SESSION_S`` seconds. A ``LEGATO_ADMIN_TOKEN`` in the environment is
ignored: a credential the process holds would sign in every browser that opens the page.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_API_URL = "http://127.0.0.1:8700"
#: A working day: long enough not to interrupt an operator, short enough that a browser left
#: open overnight asks again.
DEFAULT_SESSION_S = 8 * 3600.0
#: How long a printed one-time link stays good if nobody opens it.
DEFAULT_LINK_TTL_S = 3600.0


@dataclass(frozen=True)
class ConsoleSettings:
    """What the console needs to reach the control plane and to sign sessions in."""

    api_url: str = DEFAULT_API_URL
    #: Where one-time sign-in tickets are (``<var_dir>/console-tickets``).
    var_dir: Path = Path("var")
    #: Seconds a browser session stays signed in after it signed in.
    session_s: float = DEFAULT_SESSION_S
    #: Seconds a one-time sign-in link is good for after it was issued.
    link_ttl_s: float = DEFAULT_LINK_TTL_S
    #: Seconds between refreshes of the live panels.
    live_refresh_s: float = 1.0
    #: Seconds a loaded table is reused before the API is asked again.
    cache_ttl_s: float = 5.0


def _positive(env: dict[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r}: expected a number of seconds") from None
    if not value > 0:
        raise ValueError(f"{name}={raw!r}: must be more than 0 seconds")
    return value


def read_settings(env: dict[str, str] | None = None) -> ConsoleSettings:
    """Settings from ``env`` (default: the process environment). Called once per session.
    Raises ValueError naming the variable when a duration is not a positive number."""
    env = dict(os.environ) if env is None else env
    return ConsoleSettings(
        api_url=env.get("LEGATO_API_URL", DEFAULT_API_URL).rstrip("/"),
        var_dir=Path(env.get("LEGATO_VAR_DIR", "var")),
        session_s=_positive(env, "LEGATO_CONSOLE_SESSION_S", DEFAULT_SESSION_S),
        link_ttl_s=_positive(env, "LEGATO_CONSOLE_LINK_TTL_S", DEFAULT_LINK_TTL_S),
        live_refresh_s=float(env.get("LEGATO_CONSOLE_REFRESH_S", "1.0")),
        cache_ttl_s=float(env.get("LEGATO_CONSOLE_CACHE_TTL_S", "5.0")),
    )
