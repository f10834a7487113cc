"""Cost of moving a step's inputs to the device that will run it, by topology distance."""

from __future__ import annotations

from dataclasses import field

from control.core.types import DeviceSpec
from control.core.values import value


@value
class TransferCosts:
    same_device_us: int = field(default=0, metadata={"help": "input already on the device"})
    same_group_us: int = field(default=100, metadata={"help": "same interconnect group (NVLink)"})
    same_node_us: int = field(default=400, metadata={"help": "same host, across PCIe"})
    other_node_us: int = field(default=2_000, metadata={"help": "across the network"})
    host_us: int = field(
        default=0, metadata={"help": "input in host memory (request, tool output)"}
    )

    def cost_us(self, src: DeviceSpec | None, dst: DeviceSpec) -> int:
        """Cost of one input held on ``src`` (None: host memory) used on ``dst``."""
        if src is None:
            return self.host_us
        if src.device_id == dst.device_id:
            return self.same_device_us
        if src.interconnect_group and src.interconnect_group == dst.interconnect_group:
            return self.same_group_us
        if src.node_id == dst.node_id:
            return self.same_node_us
        return self.other_node_us
