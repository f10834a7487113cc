"""Transfer pricing: latency + bytes / bandwidth per topology tier, the byte estimate of an
input, the named interconnects, and the router pricing sized inputs with the same function."""

from __future__ import annotations

import pytest

from control.core.routing.base import RoutingContext, StepDemand
from control.core.routing.interconnects import INTERCONNECTS, interconnect
from control.core.routing.predicted_completion import score
from control.core.routing.transfer import TransferCosts, inputs_us
from control.core.types import DeviceSpec
from tests.core.test_routing import Cand, latency


def dev(device_id: str, node: str, group: str = "") -> DeviceSpec:
    return DeviceSpec(device_id, node, "gpu", "h100", 81_920, group)


A0, A1, A2, B0 = dev("a0", "a", "nv-a"), dev("a1", "a", "nv-a"), dev("a2", "a"), dev("b0", "b")
PRICED = TransferCosts(
    same_device_us=1, same_group_us=3, same_node_us=10, other_node_us=5, host_us=7,
    same_group_mb_per_s=450_000, same_node_mb_per_s=64_000, other_node_mb_per_s=50_000,
    host_mb_per_s=32_000,
)  # fmt: skip


@pytest.mark.parametrize(
    ("src", "dst", "nbytes", "expected"),
    [
        (A0, A0, 10**9, 1),  # on the device: nothing moves, whatever its size
        (A0, A1, 0, 3),  # latency alone for an empty input
        (A0, A1, 450_000, 3 + 1),  # NVLink: 450 kB at 450 GB/s is 1 us
        (A0, A1, 450_001, 3 + 2),  # rounded up
        (A0, A2, 64_000_000, 10 + 1_000),  # PCIe Gen5: 64 MB in 1 ms
        (A0, B0, 50_000_000, 5 + 1_000),  # NDR 400: 50 MB in 1 ms
        (None, A0, 3_200_000, 7 + 100),  # host -> device
        (A0, None, 3_200_000, 7 + 100),  # device -> host (a host tool reads it)
        (None, None, 10**6, 0),  # host to host: nothing moves
    ],
)
def test_move_us_is_the_tiers_latency_plus_bytes_over_its_bandwidth(
    src: DeviceSpec | None, dst: DeviceSpec | None, nbytes: int, expected: int
) -> None:
    assert PRICED.move_us(src, dst, nbytes) == expected


def test_fixed_costs_alone_price_as_before_bandwidths_existed() -> None:
    old = TransferCosts()  # the defaults: 0 / 100 / 400 / 2000 us, host 0, no bandwidths
    assert [old.cost_us(s, A0) for s in (A0, A1, A2, B0, None)] == [0, 100, 400, 2_000, 0]
    assert old.move_us(A0, B0, 10**9) == 2_000 and not old.prices_bytes
    assert PRICED.prices_bytes


def test_input_bytes_by_what_the_field_carries() -> None:
    c = TransferCosts(vector_bytes=4_096, text_bytes_per_token=4)
    assert c.input_bytes("embedding", 10_000) == 4_096  # one 1024-d fp32 vector
    assert c.input_bytes("documents", 2_048) == 8_192
    assert c.input_bytes("text", 2_048, parts=4) == 2_048  # a merged map output's one chunk
    assert c.input_bytes("query", 100) == 400  # a request input: text
    assert [c.input_bytes(f, 2_048) for f in ("scores", "order", "label")] == [0, 0, 0]


def test_inputs_us_sums_sized_inputs_and_prices_unsized_ones_by_latency() -> None:
    assert inputs_us(PRICED, (A1, B0), (450_000, 50_000), A0) == (3 + 1) + (5 + 1)
    assert inputs_us(PRICED, (A1, B0), (), A0) == 3 + 5


def test_a_negative_figure_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="same_node_mb_per_s=-5"):
        TransferCosts(same_node_mb_per_s=-5)


def test_named_interconnects_order_the_tiers_and_an_unknown_name_lists_them() -> None:
    h100 = interconnect("h100-sxm-nvlink4-ndr400")
    kv = 500 * 327_680  # KV of 500 tokens of Llama-2-70B in fp16 (GQA: 320 KiB a token)
    nvlink, pcie, ib = (h100.move_us(A0, d, kv) for d in (A1, A2, B0))
    assert (nvlink, pcie, ib) == (3 + 365, 10 + 2_560, 5 + 3_277)
    with pytest.raises(ValueError, match="known: h100-sxm-nvlink4-ndr400"):
        interconnect("nvlink9")
    assert set(INTERCONNECTS) >= {"a100-sxm-nvlink3-hdr200", "l4-pcie4-roce100", "cpu-ray-local"}


def test_the_router_prices_sized_inputs_with_move_us() -> None:
    ctx = RoutingContext(0.0, latency(), PRICED, {})
    demand = StepDemand("m:1", 2_048, 0, (), None, (A0,), (8_000_000,))
    near, far = Cand("near", A1), Cand("far", B0)
    assert score(demand, near, ctx).transfer_us == PRICED.move_us(A0, A1, 8_000_000) == 3 + 18
    assert score(demand, far, ctx).transfer_us == PRICED.move_us(A0, B0, 8_000_000) == 5 + 160
    unsized = StepDemand("m:1", 2_048, 0, (), None, (A0,))
    assert score(unsized, far, ctx).transfer_us == 5
