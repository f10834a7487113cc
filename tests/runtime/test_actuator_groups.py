"""The core's device group reaches the executor (issue 23, item 3): a ``LoadModel`` of a
tensor-parallel replica loads it with its whole group (before, only ``device_ids[0]`` went to
the executor, which loaded the replica on one device), and a start-up replica adopted on a
group is reported to the core on all its devices."""

from __future__ import annotations

import asyncio
import concurrent.futures

from control.core.actions import LoadModel
from control.core.events import ReplicaLoaded
from control.executor.protocol import LoadReport, ModelRef
from control.runtime.actuator import Actuator
from control.runtime.completions import Completions

REF = ModelRef("tp", "embed", "tiny", "bert")


class Recording:
    def __init__(self) -> None:
        self.loads: list[tuple] = []

    def load(self, replica_id: str, ref: ModelRef, device_id: str, *, group: tuple = ()):  # noqa: ANN201
        self.loads.append((replica_id, device_id, group))
        done: concurrent.futures.Future = concurrent.futures.Future()
        done.set_result(LoadReport(replica_id, device_id, True, "loaded"))
        return done


def _world() -> tuple[Recording, list, Actuator]:
    ex, records = Recording(), []
    completions = Completions({}, None, None, None, lambda *_: None, lambda *_: None)  # type: ignore[arg-type]
    act = Actuator(ex, completions, {}, {"m:1": REF}, {}, None, records.append)  # type: ignore[arg-type]
    return ex, records, act


def test_a_load_of_a_tp_replica_names_its_whole_group() -> None:
    ex, records, act = _world()

    async def go() -> None:
        act.apply((LoadModel("r1", "m:1", ("cpu:0", "cpu:1"), "hot", False, "tp"),), 0.0)
        for _ in range(5):
            await asyncio.sleep(0)

    asyncio.run(go())
    assert ex.loads == [("r1", "cpu:0", ("cpu:0", "cpu:1"))]
    assert [r.event for r in records] == [ReplicaLoaded("r1")]


def test_an_adopted_group_replica_is_reported_on_all_its_devices() -> None:
    ex, records, act = _world()
    ok = asyncio.run(act.load_replica("r2", REF, "cpu:1", ("m:1", "hot"), ("cpu:1", "cpu:0")))
    assert ok and ex.loads == [("r2", "cpu:1", ("cpu:1", "cpu:0"))]
    assert records[0].event == ReplicaLoaded("r2", "m:1", ("cpu:1", "cpu:0"), "hot")
