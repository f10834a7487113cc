"""The core's judgement of a placement target's tensor-parallel groups (``group_refusal``):
each way a group cannot be held gets its own sentence; a group that can, and one-device
replicas, are never refused."""

from __future__ import annotations

from control.core.state import DeviceRecord
from control.core.tp_groups import group_refusal
from control.core.types import DeviceSpec, ModelSpec

MODELS = {
    "tp:1": ModelSpec("tp", "1", "embed", 300, tp_degree=2),
    "e:1": ModelSpec("e", "1", "embed", 300),
}


def fleet(**down: bool) -> dict[str, DeviceRecord]:
    """Node a: cpu:0; node b: cpu:1, cpu:2 (512 MiB each; interconnect group = node)."""
    nodes = {"cpu:0": "a", "cpu:1": "b", "cpu:2": "b"}
    return {d: DeviceRecord(DeviceSpec(d, n, "cpu", "cpu", 512, interconnect_group=n),
                            up=not down.get(d.replace(":", ""), False))
            for d, n in nodes.items()}  # fmt: skip


def test_a_group_in_a_domain_with_room_and_single_devices_pass():
    rows = (("tp:1", ("cpu:1", "cpu:2"), 1, "hot"), ("e:1", ("cpu:0",), 1, "hot"))
    assert group_refusal(MODELS, fleet(), rows) is None
    # one-device replicas are never judged here, even over-committed
    assert group_refusal(MODELS, fleet(), (("e:1", ("cpu:0",), 3, "hot"),)) is None


def test_no_domain_with_k_free_devices_names_the_degree_and_the_domains():
    rows = (("tp:1", ("cpu:0", "cpu:1"), 1, "hot"), ("e:1", ("cpu:2",), 1, "hot"))
    key, why = group_refusal(MODELS, fleet(), rows)
    assert key == "tp:1"
    assert why.startswith("tp_degree 2: no interconnect domain has 2 devices free for 300 MiB")
    assert "(at most 1; free devices per domain: a: 1, b: 1)" in why


def test_a_group_across_domains_is_refused_even_when_one_domain_could_hold_it():
    key, why = group_refusal(MODELS, fleet(), (("tp:1", ("cpu:0", "cpu:1"), 1, "hot"),))
    assert "spans interconnect domains a, b" in why and "(b has 2 devices free)" in why


def test_a_down_or_full_device_of_the_group_is_named():
    _, why = group_refusal(MODELS, fleet(cpu2=True), (("tp:1", ("cpu:1", "cpu:2"), 1, "hot"),))
    assert why.startswith("tp_degree 2: no interconnect domain has 2 devices free")  # b: 1 up
    two = {**fleet(), "cpu:3": DeviceRecord(DeviceSpec("cpu:3", "b", "cpu", "cpu", 512, "b"))}
    rows = (("tp:1", ("cpu:1", "cpu:2"), 1, "hot"), ("e:1", ("cpu:2",), 1, "hot"))
    _, why = group_refusal(MODELS, two, rows)  # b still has cpu:1 and cpu:3 free
    assert "device(s) cpu:2 of the group in domain b have no 300 MiB free" in why
