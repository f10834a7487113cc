"""Cost of moving a step's inputs to the device that will run it: latency + bytes / bandwidth
per topology tier.

Tiers, nearest first: the input is on the device itself; on another device of the same
interconnect group (NVLink); on another device of the same node (PCIe through the host); on
another node (the network: InfiniBand/RoCE, or Ray's object store between actors); in host
memory (request inputs, tool outputs). Each tier has a fixed cost per input (``*_us``: its
latency, and the whole cost where its bandwidth is 0, the pricing before bandwidths existed)
and a bandwidth (``*_mb_per_s``, 1 MB = 10^6 bytes, so ``bytes / mb_per_s`` is microseconds;
0: bytes are free on that tier). :meth:`TransferCosts.move_us` is the one price: the router's
predicted completion, work stealing and the twin's executor all call it.

How many bytes an input is, the core estimates from what it knows (:meth:`input_bytes`): an
embedding is ``vector_bytes`` (dimension x 4 for fp32), text and documents are the consuming
step's input tokens x ``text_bytes_per_token``, shared by the parts of a merged input; labels,
scores and orders are a few bytes, priced by latency alone. Named figures for real fabrics are
in :mod:`control.core.routing.interconnects`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import field

from control.core.dag.spec import PORTS
from control.core.types import DeviceSpec
from control.core.values import value

#: output field -> the port type it carries (field names are unique in type across tasks)
_FIELD_TYPES: dict[str, str] = {f: t for _ins, outs in PORTS.values() for f, t in outs.items()}
#: port types whose size does not grow with the text (priced by latency alone)
_TINY_TYPES = frozenset({"scores", "indices", "label"})


@value
class TransferCosts:
    same_device_us: int = field(default=0, metadata={"help": "input already on the device"})
    same_group_us: int = field(
        default=100, metadata={"help": "same interconnect group (NVLink): latency per input"}
    )
    same_node_us: int = field(
        default=400, metadata={"help": "same host, across PCIe: latency per input"}
    )
    other_node_us: int = field(
        default=2_000, metadata={"help": "across the network: latency per input"}
    )
    host_us: int = field(
        default=0, metadata={"help": "input in host memory (request, tool output)"}
    )
    same_group_mb_per_s: int = field(
        default=0, metadata={"help": "NVLink bandwidth between two devices, MB/s (0: free)"}
    )
    same_node_mb_per_s: int = field(
        default=0, metadata={"help": "PCIe bandwidth between devices of a node, MB/s (0: free)"}
    )
    other_node_mb_per_s: int = field(
        default=0, metadata={"help": "network bandwidth between nodes, MB/s (0: free)"}
    )
    host_mb_per_s: int = field(
        default=0, metadata={"help": "host <-> device bandwidth, MB/s (0: free)"}
    )
    vector_bytes: int = field(
        default=1_536, metadata={"help": "bytes of one embedding (384 x fp32: MiniLM)"}
    )
    text_bytes_per_token: int = field(
        default=4, metadata={"help": "bytes per token of text or documents that move"}
    )

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            if getattr(self, f.name) < 0:
                raise ValueError(f"TransferCosts.{f.name}={getattr(self, f.name)!r}: must be >= 0")

    @property
    def prices_bytes(self) -> bool:
        """Whether any tier charges for bytes (else every input costs its tier's latency)."""
        return bool(
            self.same_group_mb_per_s or self.same_node_mb_per_s or self.other_node_mb_per_s
            or self.host_mb_per_s
        )  # fmt: skip

    def move_us(self, src: DeviceSpec | None, dst: DeviceSpec | None, nbytes: int) -> int:
        """Microseconds to move ``nbytes`` held on ``src`` to ``dst`` (None: host memory, on
        either side): the tier's latency plus the bytes over its bandwidth, rounded up."""
        if src is None or dst is None:
            fixed, bw = (self.host_us, self.host_mb_per_s) if src is not dst else (0, 0)
        elif src.device_id == dst.device_id:
            return self.same_device_us
        elif src.interconnect_group and src.interconnect_group == dst.interconnect_group:
            fixed, bw = self.same_group_us, self.same_group_mb_per_s
        elif src.node_id == dst.node_id:
            fixed, bw = self.same_node_us, self.same_node_mb_per_s
        else:
            fixed, bw = self.other_node_us, self.other_node_mb_per_s
        if bw and nbytes > 0:
            return fixed + -(-nbytes // bw)
        return fixed

    def cost_us(self, src: DeviceSpec | None, dst: DeviceSpec) -> int:
        """Cost of one input of unknown size held on ``src`` (None: host memory) used on
        ``dst``: its tier's latency alone."""
        return self.move_us(src, dst, 0) if src is not None else self.host_us

    def input_bytes(self, field_name: str, tokens: int, parts: int = 1) -> int:
        """Estimated bytes of one of ``parts`` refs of input field ``field_name`` (an
        upstream output field, or a request input) of a step reading ``tokens`` tokens."""
        kind = _FIELD_TYPES.get(field_name, "text")
        if kind == "vector":
            return self.vector_bytes
        if kind in _TINY_TYPES:
            return 0
        return max(0, tokens) * self.text_bytes_per_token // max(1, parts)


def inputs_us(
    costs: TransferCosts,
    sources: tuple[DeviceSpec | None, ...],
    sizes: tuple[int, ...],
    dst: DeviceSpec,
) -> int:
    """Cost of moving every input (held on ``sources``, ``sizes`` bytes each; ``sizes`` empty:
    sizes unknown, latency alone) to ``dst``, one after the other."""
    if not sizes:
        return sum(costs.cost_us(src, dst) for src in sources)
    return sum(costs.move_us(src, dst, n) for src, n in zip(sources, sizes, strict=True))
