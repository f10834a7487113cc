"""Named transfer pricings for real fabrics: per-tier latency and bandwidth from public figures
(GPUs) or from this project's own measurement (the Ray cross-node hop). Sources, and which
figure is nominal and which measured, are in ``sim/profiles/interconnects.md``.

Bandwidths are one direction of one device pair or one NIC, in MB/s (10^6 bytes/s): NVLink 4's
"900 GB/s" is both directions over 18 links, 450 GB/s each way; InfiniBand NDR's 400 Gb/s is
50 GB/s. Latencies are per input moved (a small message's one-way time through the software a
serving stack uses), not the wire's alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from control.core.routing.transfer import TransferCosts

INTERCONNECTS: Mapping[str, TransferCosts] = MappingProxyType(
    {
        # H100 SXM5 in an HGX board: NVLink 4 through NVSwitch, PCIe Gen5 x16 to the host,
        # one ConnectX-7 InfiniBand NDR 400 Gb/s NIC per GPU between nodes (GPUDirect RDMA)
        "h100-sxm-nvlink4-ndr400": TransferCosts(
            same_device_us=0, same_group_us=3, same_node_us=10, other_node_us=5, host_us=10,
            same_group_mb_per_s=450_000, same_node_mb_per_s=64_000,
            other_node_mb_per_s=50_000, host_mb_per_s=64_000,
        ),
        # A100 SXM4: NVLink 3 (600 GB/s both ways), PCIe Gen4 x16, InfiniBand HDR 200 Gb/s
        "a100-sxm-nvlink3-hdr200": TransferCosts(
            same_device_us=0, same_group_us=3, same_node_us=10, other_node_us=5, host_us=10,
            same_group_mb_per_s=300_000, same_node_mb_per_s=32_000,
            other_node_mb_per_s=25_000, host_mb_per_s=32_000,
        ),
        # L4 (no NVLink): peers over PCIe Gen4 x16, 100 Gb/s Ethernet with RoCE between nodes
        "l4-pcie4-roce100": TransferCosts(
            same_device_us=0, same_group_us=10, same_node_us=10, other_node_us=10, host_us=10,
            same_group_mb_per_s=32_000, same_node_mb_per_s=32_000,
            other_node_mb_per_s=12_500, host_mb_per_s=32_000,
        ),
        # this machine's Ray executor: the cross-node hop measured by bench/ray_executor.py
        # --calibrate (issue 23: 780 us, cross-node hop p50 less same-actor hop p50, small
        # inputs, so a latency; the bandwidth of the loopback object store is not measured)
        "cpu-ray-local": TransferCosts(other_node_us=780),
    }
)  # fmt: skip


def interconnect(name: str) -> TransferCosts:
    """The named pricing; ValueError naming the known ones for an unknown name."""
    costs = INTERCONNECTS.get(name)
    if costs is None:
        raise ValueError(f"unknown interconnect {name!r}; known: {', '.join(INTERCONNECTS)}")
    return costs
