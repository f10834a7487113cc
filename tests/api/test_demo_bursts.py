"""Demo bursts without a runtime: off by default (403 saying how to turn them on), bounds
refused with a 422 naming the field (nothing started, nothing audited), and the fair-share
history empty without a live runtime."""

from __future__ import annotations

import httpx
import pytest

from control.api.settings import GatewayConfig
from tests.api.conftest import ADMIN_TOKEN, build_stack, client_for

BODY = {"tenant": "acme", "workflow": "vec:1", "rate_per_s": 2, "duration_s": 5}


@pytest.fixture
async def admin_on(tmp_path, _sqlite_template) -> httpx.AsyncClient:
    """The admin's client of a gateway with demo bursts on (caps: 5/s, 30 s, 100 runs)."""
    config = GatewayConfig(admin_token=ADMIN_TOKEN, demo_bursts=True, demo_burst_max_rate_per_s=5,
                           demo_burst_max_duration_s=30, demo_burst_max_requests=100)  # fmt: skip
    stack = build_stack(tmp_path / "legato.db", _sqlite_template, config=config)
    async with client_for(stack.app, ADMIN_TOKEN) as client:
        client.stack = stack  # type: ignore[attr-defined]
        yield client


@pytest.mark.parametrize(("method", "path"), [("post", "/admin/demo/bursts"),
                                              ("get", "/admin/demo/bursts"),
                                              ("delete", "/admin/demo/bursts/burst-1")])  # fmt: skip
async def test_bursts_are_off_by_default_and_say_how_to_turn_them_on(admin, method, path) -> None:
    kwargs = {"json": BODY} if method == "post" else {}
    r = await getattr(admin, method)(path, **kwargs)
    assert r.status_code == 403, r.text
    assert r.json()["error"] == "demo_bursts_off"
    assert "LEGATO_DEMO_BURSTS=true" in r.json()["detail"]


async def test_bursts_need_the_admin_credential(anon) -> None:
    assert (await anon.get("/admin/demo/bursts")).status_code == 401
    assert (await anon.get("/admin/fair-share/history")).status_code == 401


@pytest.mark.parametrize(("field", "value"), [("rate_per_s", 6), ("duration_s", 31),
                                              ("max_requests", 101)])  # fmt: skip
async def test_a_burst_above_a_cap_is_refused_naming_the_field(admin_on, field, value) -> None:
    r = await admin_on.post("/admin/demo/bursts", json={**BODY, field: value})
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field
    assert "cap" in r.json()["detail"]
    assert (await admin_on.get("/admin/demo/bursts")).json() == []
    assert admin_on.stack.services.audit.list(entity_type="demo_burst") == []


@pytest.mark.parametrize(("field", "value"), [("rate_per_s", 0), ("duration_s", -1),
                                              ("workflow", "no-version")])  # fmt: skip
async def test_malformed_bounds_are_refused_naming_the_field(admin_on, field, value) -> None:
    r = await admin_on.post("/admin/demo/bursts", json={**BODY, field: value})
    assert r.status_code == 422, r.text
    assert field in r.text


async def test_within_bounds_but_no_runtime_is_a_503(admin_on) -> None:
    r = await admin_on.post("/admin/demo/bursts", json=BODY)
    assert r.status_code == 503, r.text
    assert admin_on.stack.services.audit.list(entity_type="demo_burst") == []


async def test_history_is_empty_without_a_runtime(admin) -> None:
    r = await admin.get("/admin/fair-share/history", params={"minutes": 2})
    assert r.status_code == 200, r.text
    assert r.json()["samples"] == []
    assert (await admin.get("/admin/fair-share/history", params={"minutes": 0})).status_code == 422
