"""Membership diffs Ray's node table (no cluster needed): joined nodes give their devices,
left ones their id, a GPU node of unknown memory waits for it; GPUs of a node share its
NVLink domain label."""

from __future__ import annotations

import pytest

from control.executor.ray.membership import Membership

pytestmark = pytest.mark.ray

HEAD, CPU_NODE, GPU_NODE = "a" * 56, "b" * 56, "c" * 56


def node(node_id: str, alive: bool = True, **resources: float) -> dict:
    res = {"CPU": 1.0, "memory": 4 * 1024**3, **resources}
    return {"NodeID": node_id, "Alive": alive, "NodeManagerAddress": "10.0.0.1", "Resources": res}


def test_joined_left_and_gpu_nodes():
    m = Membership(HEAD)
    first = m.update([node(HEAD)])
    assert [d.device_id for d, _ in first.joined] == ["cpu:0"] and not first.left
    assert not m.update([node(HEAD)])  # nothing changed
    joined = m.update([node(HEAD), node(CPU_NODE)])
    assert [d.device_id for d, _ in joined.joined] == ["bbbbbbbb/cpu:0"]
    assert joined.joined[0][0].node == CPU_NODE and joined.joined[0][1].node_id == CPU_NODE
    gpu = node(GPU_NODE, GPU=2.0, **{"accelerator_type:H100": 1.0})
    waiting = m.update([node(HEAD), node(CPU_NODE), gpu])
    assert waiting.probe == (GPU_NODE,) and not waiting.joined  # its memory is asked first
    assert not m.update([node(HEAD), node(CPU_NODE), gpu])  # still waiting: not again
    added = m.add(gpu, 80_000)
    devices = [d for d, _ in added.joined]
    assert [d.device_id for d in devices] == ["cccccccc/cuda:0", "cccccccc/cuda:1"]
    assert {dict(d.labels)["nvlink"] for d in devices} == {"nvlink:cccccccc"}
    assert all(d.memory_budget_mib == 72_000 and d.node == GPU_NODE for d in devices)
    left = m.update([node(HEAD), node(CPU_NODE, alive=False), gpu])
    assert left.left == (CPU_NODE,) and not left.joined
    assert m.update([node(HEAD)]).left == (GPU_NODE,)  # absent from the table: left too
    assert not m.add(gpu, 80_000)  # an answer for a node no longer there adds nothing
