"""503 paths: no runtime at all, and a runtime whose devices are all down (a fake runtime
that reports its snapshot; nothing is submitted to it)."""

from __future__ import annotations

from dataclasses import dataclass

from control.core.tenancy.base import TenancyConfig
from control.services.inference import InferenceService
from tests.api.conftest import ADMIN_TOKEN, build_stack, client_for, make_tenant


@dataclass(frozen=True)
class _Device:
    device_id: str
    up: bool


@dataclass(frozen=True)
class _Snapshot:
    devices: tuple[_Device, ...]


@dataclass(frozen=True)
class _Blueprint:
    workflows: tuple = ()
    models: tuple = ()
    tenancy: TenancyConfig = TenancyConfig()


class DownRuntime:
    """A runtime whose only device is down: it must never be handed a run."""

    def __init__(self) -> None:
        self.submitted: list[object] = []
        self.blueprint = _Blueprint()

    async def start(self, *, usage_sink=None, after_turn=()) -> None: ...  # noqa: ANN001

    async def stop(self) -> None: ...

    def snapshot(self) -> _Snapshot:
        return _Snapshot((_Device("cpu:0", False),))

    def devices_up(self) -> int:
        return sum(1 for d in self.snapshot().devices if d.up)

    def submit_run(self, run: object) -> None:
        self.submitted.append(run)
        raise AssertionError("a run reached a runtime with no healthy device")


async def test_without_a_runtime_inference_is_503_and_admin_works(stack, admin):
    _, key = await make_tenant(admin, "acme")
    async with client_for(stack.app, key) as tenant:
        r = await tenant.post("/v1/workflows/rag/versions/1/runs", json={"inputs": {}})
        assert r.status_code == 503 and "runtime" in r.json()["detail"]
    assert (await admin.get("/admin/snapshot")).status_code == 503


async def test_no_healthy_device_is_503_before_anything_is_recorded(tmp_path, _sqlite_template):
    runtime = DownRuntime()
    stack = build_stack(tmp_path / "l.db", _sqlite_template)
    inference = InferenceService(
        stack.services, runtime, stack.factory, model_ids={}, device_ids={}
    )
    stack.app.state.gateway.inference = inference
    await inference.start()
    async with client_for(stack.app, ADMIN_TOKEN) as admin:
        _, key = await make_tenant(admin, "acme")
        ready = await admin.get("/readyz")
        assert ready.status_code == 503 and ready.json()["checks"]["runtime"] == "no healthy device"
    async with client_for(stack.app, key) as tenant:
        body = {"inputs": {"text": "x"}}
        r = await tenant.post("/v1/workflows/any/versions/1/runs", json=body)
    assert r.status_code == 503 and "no healthy device" in r.json()["detail"]
    assert runtime.submitted == [] and stack.services.requests.list() == []
    await inference.stop()
