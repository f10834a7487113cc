"""Where a new step's inputs are held, and how big they are: what routing and work stealing
price with :meth:`~control.core.routing.transfer.TransferCosts.move_us`."""

from __future__ import annotations

from control.core.cluster import Cluster
from control.core.dag.run import StepRef
from control.core.routing.transfer import TransferCosts
from control.core.state import QueuedStep
from control.core.types import DeviceSpec


def locate_inputs(
    costs: TransferCosts, cluster: Cluster, step: QueuedStep, ref: StepRef, tokens: int
) -> None:
    """Set where ``step``'s inputs are held (and, when a tier prices bytes, how many bytes
    each is): what routing and stealing price with ``TransferCosts.move_us``. Host inputs count
    only where the host tier costs something (they cost every candidate the same)."""
    devs = cluster.devices
    located: list[DeviceSpec | None] = []
    sizes: list[int] = []
    sized = costs.prices_bytes
    host = costs.host_us > 0 or costs.host_mb_per_s > 0
    for b in ref.inputs:
        for r in b.refs:
            if r.device_id is not None:
                dev = devs.get(r.device_id)
                located.append(dev.spec if dev is not None else None)
            elif host:
                located.append(None)
            else:
                continue
            if sized:
                sizes.append(costs.input_bytes(r.field, tokens, len(b.refs)))
    if located:
        step.input_devices = tuple(located)
        step.input_bytes = tuple(sizes)
