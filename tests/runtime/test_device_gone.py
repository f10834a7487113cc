"""A device whose node left the cluster is down for good, not restarting (issue 23, item 2).

The executor says so with ``WorkerDown(gone=True)`` (only a backend over a cluster does; here
the events are handed to the live runtime as the executor would deliver them, over the local
executor's two workers): the core holds the device down, the runtime no longer counts it as
restarting (so a call does not wait for it), and ``on_device_left`` is told, once. A plain
``WorkerDown`` still counts as restarting until its ``WorkerUp``."""

from __future__ import annotations

import pytest

from control.executor.protocol import WorkerDown
from tests.runtime.conftest import make_runtime
from tests.support.waiting import until

pytestmark = pytest.mark.asyncio


def _up(rt) -> set[str]:  # noqa: ANN001
    return {d.device_id for d in rt.snapshot().devices if d.up}


async def test_a_device_gone_for_good_is_down_and_not_restarting(model_cache):
    left: list[str] = []
    rt = make_runtime(model_cache, on_device_left=left.append)
    await rt.start()
    try:
        assert _up(rt) == {"cpu:0", "cpu:1"} and rt.devices_restarting() == 0
        # its actor was lost first, its node seen leaving later: restarting, then gone
        rt._executor_event(WorkerDown("cpu:1", "actor died: ActorUnavailableError", (), ()))
        await until(lambda: "cpu:1" not in _up(rt), "cpu:1 down in the core")
        assert rt.devices_restarting() == 1 and left == []
        rt._executor_event(WorkerDown("cpu:1", "node 1 left the cluster", (), (), gone=True))
        await until(lambda: left == ["cpu:1"], "cpu:1 told as left")
        assert rt.devices_restarting() == 0 and "cpu:1" not in _up(rt)
        # a node that left at once: never counted as restarting
        rt._executor_event(WorkerDown("cpu:0", "node 0 left the cluster", (), (), gone=True))
        await until(lambda: left == ["cpu:1", "cpu:0"], "cpu:0 told as left")
        assert rt.devices_restarting() == 0 and rt.devices_up() == 0  # "no healthy device"
    finally:
        await rt.stop()
