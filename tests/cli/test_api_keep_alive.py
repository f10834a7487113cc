"""`legato api` keeps idle connections open longer than clients' pools do.

A server that closes an idle keep-alive connection at the same instant a client reuses it
loses that call (the soak benchmark saw an httpx ``ReadError``): both sides defaulted to 5 s.
"""

from __future__ import annotations

import uvicorn

from control import config
from control.commands import api as api_command
from control.wiring import gateway


def _served_with(monkeypatch, env: dict[str, str]) -> dict:  # noqa: ANN001
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    config.get_settings.cache_clear()
    seen: dict = {}
    monkeypatch.setattr(gateway, "build_gateway", lambda with_runtime: object())
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: seen.update(kwargs))
    try:
        api_command.api(host=None, port=None, runtime=False, drain=1.0)
    finally:
        config.get_settings.cache_clear()
    return seen


def test_the_server_outlives_a_client_pool_by_default(monkeypatch):
    seen = _served_with(monkeypatch, {})
    assert seen["timeout_keep_alive"] == 75
    assert seen["timeout_keep_alive"] > 5  # httpx's keepalive_expiry


def test_the_keep_alive_is_a_setting(monkeypatch):
    assert _served_with(monkeypatch, {"LEGATO_API_KEEP_ALIVE_S": "30"})["timeout_keep_alive"] == 30
