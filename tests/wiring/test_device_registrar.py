"""The live path's ``on_device_joined``: a device the executor found on a cluster node is
written to the device registry off the event loop, and the ledger's device ids learn it."""

from __future__ import annotations

import asyncio
import shutil

import pytest

from control.executor.host import ExecutorConfig, LocalExecutor
from control.executor.protocol import DeviceInfo
from control.runtime.joins import spec_of
from control.services import build_services
from control.wiring.live import build_live
from control.wiring.services import session_factory

NODE = "feed" * 14
JOINED = DeviceInfo("feedfeed/cpu:0", "cpu", 0, 900, node=NODE, labels=(("address", "10.1.2.3"),))


@pytest.fixture
def services(tmp_path, _sqlite_template):
    shutil.copyfile(_sqlite_template, tmp_path / "legato.db")
    return build_services(session_factory(f"sqlite:///{tmp_path / 'legato.db'}"))


async def test_a_joined_device_reaches_the_registry_and_the_ledger_ids(services):
    never_started = LocalExecutor(ExecutorConfig(use_cuda=False), [])
    live = build_live(services.factory, services, never_started)
    hook = live.inference.runtime.on_device_joined
    assert hook is not None
    hook(JOINED, spec_of(JOINED))  # on the loop, as the runtime calls it: returns at once
    assert JOINED.device_id not in live.inference.device_ids
    for _ in range(200):
        if JOINED.device_id in live.inference.device_ids:
            break
        await asyncio.sleep(0.01)
    (row,) = services.devices.list(name=JOINED.device_id)
    assert live.inference.device_ids[JOINED.device_id] == row.id
    assert row.is_real and row.interconnect_group == NODE and row.memory_mib == 900
    assert services.nodes.list(name=NODE)[0].address == "10.1.2.3"
