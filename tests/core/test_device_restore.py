"""The core restores a device's replicas when it comes back, once: a model that gained a
replacement elsewhere while the device was down is not loaded again (table-driven, pure)."""

from __future__ import annotations

import pytest

from control.core.actions import LoadModel
from control.core.events import DeviceDown, DeviceUp, ReplicaLoaded
from tests.core.fakes import FcfsTenancy
from tests.support.builders import EMBED, RERANK, devices, make_core

DEVS = devices(2)


@pytest.mark.parametrize(
    ("replacement", "restored"),
    [
        (None, [(EMBED.key, ("d001",), "hot"), (RERANK.key, ("d001",), "hot")]),
        (EMBED.key, [(RERANK.key, ("d001",), "hot")]),  # embed served elsewhere meanwhile
    ],
)
def test_a_device_back_up_gets_the_replicas_it_lost(replacement, restored) -> None:  # noqa: ANN001
    core = make_core(FcfsTenancy(), devs=DEVS,
                     replicas=[(EMBED.key, "d001"), (RERANK.key, "d001")])  # fmt: skip
    core.ingest(DeviceDown("d001", "worker crashed"), 1.0)
    assert core.step(1.0).of_type(LoadModel) == ()  # nothing to restore while it is down
    if replacement is not None:  # loaded outside the core meanwhile (an operator, a rollout)
        core.ingest(ReplicaLoaded("extra", replacement, ("d000",), "hot"), 1.5)
    core.ingest(DeviceUp(DEVS[1]), 2.0)
    loads = core.step(2.0).of_type(LoadModel)
    assert [(a.model_key, a.device_ids, a.pool) for a in loads] == restored
    assert all("lost when the device went down" in a.reason for a in loads)
    assert core.step(3.0).of_type(LoadModel) == ()  # once


def test_a_device_down_and_up_within_one_step_ends_up_with_its_replicas_restored() -> None:
    """A worker that crashed and restarted between two steps: Down (applied at the step) and Up
    (applied at once) used to land in the wrong order and leave the device down for good."""
    core = make_core(FcfsTenancy(), devs=DEVS,
                     replicas=[(EMBED.key, "d001"), (RERANK.key, "d001")])  # fmt: skip
    core.ingest(DeviceDown("d001", "worker crashed"), 1.0)
    core.ingest(DeviceUp(DEVS[1]), 1.0)
    loads = core.step(1.0).of_type(LoadModel)
    assert {d.device_id: d.up for d in core.snapshot().devices} == {"d000": True, "d001": True}
    assert sorted(a.model_key for a in loads) == sorted([EMBED.key, RERANK.key])
    assert all(a.device_ids == ("d001",) for a in loads)


def test_a_device_up_with_no_down_pending_applies_at_once() -> None:
    core = make_core(FcfsTenancy(), devs=DEVS[:1])
    core.ingest(DeviceUp(DEVS[1]), 1.0)
    core.ingest(DeviceDown("d000", "worker crashed"), 1.0)  # another device: no reorder
    core.step(1.0)
    up = {d.device_id: d.up for d in core.snapshot().devices}
    assert up == {"d000": False, "d001": True}
