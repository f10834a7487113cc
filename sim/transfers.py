"""What moving a batch's inputs costs in the twin, where the live executor moves them.

The live executors move a step's input when it is held somewhere other than where the step
runs: an output held by another worker or actor is exported to the consumer (local executor:
shared memory through the host; Ray: the object store, across nodes when the actors are), an
output a host tool reads is fetched from its holder, and request inputs and tool outputs go to
the worker with the batch (host memory). The twin charges exactly those moves, each priced by
the core's own :meth:`~control.core.routing.transfer.TransferCosts.move_us` with the core's
byte estimate, so the twin waits what the router predicted. Items move their inputs in
parallel; a batch waits for its slowest item.
"""

from __future__ import annotations

from collections.abc import Mapping

from control.core.actions import Dispatch
from control.core.routing.transfer import TransferCosts
from control.core.types import DeviceSpec


def batch_move_us(
    costs: TransferCosts, devices: Mapping[str, DeviceSpec], d: Dispatch, dst: DeviceSpec | None
) -> int:
    """Microseconds before ``d`` can start on ``dst`` (None: a host tool) while its inputs
    move there: the slowest item's inputs, one after the other."""
    sized = costs.prices_bytes
    host = dst is not None and (costs.host_us > 0 or costs.host_mb_per_s > 0)
    worst = 0
    for it in d.items:
        t = 0
        for b in it.inputs:
            for r in b.refs:
                src = devices.get(r.device_id) if r.device_id is not None else None
                if src is None and not host:
                    continue  # already where it runs (host), or a device the twin lacks
                n = costs.input_bytes(r.field, it.input_tokens, len(b.refs)) if sized else 0
                t += costs.move_us(src, dst, n)
        worst = max(worst, t)
    return worst
