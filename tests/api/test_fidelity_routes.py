"""Fidelity reports through the admin API: latest, list, auth."""

from __future__ import annotations

from datetime import datetime

import pytest

from control.api.routes import fidelity
from control.services.fidelity.runner import ValidationRunning
from control.services.fidelity_reports import NO_REPORT
from tests.api.conftest import client_for, make_tenant

KEYS = {"id", "created_at", "trace", "p50_error", "p99_error", "slo_attainment_error_pp",
        "live", "twin", "config", "workflow", "load"}  # fmt: skip


@pytest.fixture(autouse=True)
def _routes(stack) -> None:
    """Mount the router on the shared app unless the app factory already does."""
    paths = {getattr(r, "path", None) for r in stack.app.routes}
    if "/admin/fidelity/latest" not in paths:
        stack.app.include_router(fidelity.router)


def _store(stack, trace: str, p50: float) -> int:
    result = {"p50_error": p50, "p99_error": 0.2, "slo_attainment_error_pp": 1.25,
              "live": {"p50_s": 0.03}, "twin": {"p50_s": 0.031}}  # fmt: skip
    return stack.services.fidelity_reports.store("cli", trace, {"seed": 0}, result).id


async def test_latest_is_404_with_the_hint_before_any_report(admin) -> None:
    r = await admin.get("/admin/fidelity/latest")
    assert r.status_code == 404
    assert r.json()["detail"] == NO_REPORT


async def test_latest_has_exactly_the_documented_shape(stack, admin) -> None:
    _store(stack, "old", 0.5)
    newest = _store(stack, "azure_code", 0.07)
    r = await admin.get("/admin/fidelity/latest")
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == KEYS
    assert body["id"] == newest and body["trace"] == "azure_code"
    assert isinstance(body["created_at"], str) and datetime.fromisoformat(body["created_at"])
    assert (body["p50_error"], body["p99_error"], body["slo_attainment_error_pp"]) == (
        0.07, 0.2, 1.25,
    )  # fmt: skip
    assert body["live"] == {"p50_s": 0.03} and body["config"]["seed"] == 0
    assert (body["workflow"], body["load"]) == ("embed", None)


async def test_a_dag_report_names_its_workflow_trace_and_load(stack, admin) -> None:
    result = {"p50_error": 0.04, "p99_error": 0.09, "slo_attainment_error_pp": 0.0,
              "live": {"p50_s": 0.5}, "twin": {"p50_s": 0.52}}  # fmt: skip
    config = {"workflow": "rag", "loads": [0.3, 0.9], "load": 0.9}
    stack.services.fidelity_reports.store("cli", "my_trace.jsonl", config, result)
    body = (await admin.get("/admin/fidelity/latest")).json()
    assert (body["workflow"], body["trace"], body["load"]) == ("rag", "my_trace.jsonl", 0.9)
    listed = (await admin.get("/admin/fidelity")).json()["items"][0]
    assert (listed["workflow"], listed["load"]) == ("rag", 0.9)


async def test_list_is_newest_first_with_limit_and_offset(stack, admin) -> None:
    ids = [_store(stack, f"t{i}", i / 100) for i in range(4)]
    r = await admin.get("/admin/fidelity", params={"limit": 2, "offset": 1})
    assert r.status_code == 200, r.text
    page = r.json()
    assert page["total"] == 4 and (page["limit"], page["offset"]) == (2, 1)
    assert [x["id"] for x in page["items"]] == [ids[2], ids[1]]
    assert all(set(x) == KEYS for x in page["items"])


@pytest.mark.parametrize(("token", "status"), [(None, 401), ("not-the-token", 401)])
async def test_routes_need_the_admin_credential(stack, token, status) -> None:
    async with client_for(stack.app, token) as client:
        for path in ("/admin/fidelity/latest", "/admin/fidelity"):
            assert (await client.get(path)).status_code == status


async def test_a_tenant_key_is_forbidden(stack, admin) -> None:
    _, key = await make_tenant(admin, "acme")
    async with client_for(stack.app, key) as client:
        r = await client.get("/admin/fidelity/latest")
    assert r.status_code == 403


class FakeRunner:
    """Records the validations asked for; ``busy`` makes it refuse like a running one."""

    def __init__(self, busy: bool = False) -> None:
        self.busy = busy
        self.started: list = []

    def start(self, request) -> None:  # noqa: ANN001
        if self.busy:
            raise ValidationRunning("a fidelity validation is already running")
        self.started.append(request)


async def test_a_validation_starts_in_the_background(stack, admin) -> None:
    runner = stack.app.state.gateway.extras["fidelity_runner"] = FakeRunner()
    try:
        r = await admin.post("/admin/fidelity/runs", json={"requests": 60, "repeats": 3})
        assert r.status_code == 202, r.text
        assert r.json()["running"] is True
        assert [(x.requests, x.repeats, x.rate_factor) for x in runner.started] == [(60, 3, None)]
        runner.busy = True
        again = await admin.post("/admin/fidelity/runs", json={})
        assert again.status_code == 409 and "already running" in again.json()["detail"]
    finally:
        del stack.app.state.gateway.extras["fidelity_runner"]


@pytest.mark.parametrize("body", [{"requests": 1}, {"load": 1.5}, {"repeats": 9}, {"x": 1}])
async def test_bad_validation_settings_are_422(stack, admin, body) -> None:
    stack.app.state.gateway.extras["fidelity_runner"] = FakeRunner()
    try:
        assert (await admin.post("/admin/fidelity/runs", json=body)).status_code == 422
    finally:
        del stack.app.state.gateway.extras["fidelity_runner"]


async def test_without_a_runner_starting_is_503(admin) -> None:
    r = await admin.post("/admin/fidelity/runs", json={})
    assert r.status_code == 503 and "no fidelity runner" in r.json()["detail"]
