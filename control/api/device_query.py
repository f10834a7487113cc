"""``GET /admin/devices``: the device registry filtered by its columns and by what the live
core knows now: free memory (``min_free_mib``), precision and load (``max_load``).

Free memory is the device's memory less what the live core's replicas hold on it; load is the
steps queued or running on those replicas. Both are read from the core's snapshot on the event
loop (where the runtime lives), after the database read in a worker thread. A live filter on a
gateway without a live runtime is a 409 naming it (never an empty list that looks like none
fits); a device the core does not run matches no live filter.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import Query

from control.api.deps import GatewayDep, PageDep
from control.api.errors import ApiError
from control.api.schemas.common import Page
from control.api.schemas.fleet import DeviceFilter, DeviceOut
from control.api.state import Gateway

#: Filters on live values: answered from the core's snapshot, not the database.
LIVE_FILTERS = ("min_free_mib", "max_load")


async def list_devices(
    gw: GatewayDep, where: Annotated[DeviceFilter, Query()], page: PageDep
) -> Page[DeviceOut]:
    """Devices matching every filter given, oldest first, with their live free memory and
    load (null without a live runtime)."""
    wanted = where.model_dump(exclude_none=True)
    precision = wanted.pop("precision", None)
    live = {k: wanted.pop(k) for k in LIVE_FILTERS if k in wanted}
    rows = await asyncio.to_thread(gw.services.devices.list, **wanted)
    usage = _live_usage(gw)
    if live and usage is None:
        name = sorted(live)[0]
        raise ApiError(409, "live_unavailable",
                       f"filter {name!r} needs the live runtime, which this gateway does not run",
                       field=f"query.{name}")  # fmt: skip
    found = []
    for row in rows:
        if precision is not None and precision not in (row.precisions or []):
            continue
        free, load = (usage or {}).get(row.name, (None, None))
        if "min_free_mib" in live and (free is None or free < live["min_free_mib"]):
            continue
        if "max_load" in live and (load is None or load > live["max_load"]):
            continue
        out = DeviceOut.model_validate(row, from_attributes=True)
        found.append(out.model_copy(update={"free_mib": free, "load": load}))
    items = found[page.offset : page.offset + page.limit]
    return Page[DeviceOut](items=items, total=len(found), limit=page.limit, offset=page.offset)


def _live_usage(gw: Gateway) -> dict[str, tuple[int, int]] | None:
    """Core device id (the registry's name) -> (free MiB, load), or None without a live core."""
    inference = gw.inference
    if inference is None or not getattr(inference, "started", False):
        return None
    snap: Any = inference.snapshot()
    load: dict[str, int] = {}
    for r in snap.replicas:
        for device_id in r.device_ids:
            load[device_id] = load.get(device_id, 0) + r.queue_len + r.running_seqs
    return {
        d.device_id: (max(0, d.memory_mib - d.used_mib), load.get(d.device_id, 0))
        for d in snap.devices
    }
