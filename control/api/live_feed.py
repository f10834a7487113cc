"""After an admin mutation commits, tell the live core (see control/services/live_config.py).

Admin routes run in worker threads; the runtime lives on the event loop, so the feed is called
through ``anyio.from_thread.run``. The outcome goes back to the operator in the
``X-Legato-Live-Config`` header ("applied: ..." or "not applied: ..."). Without a runtime
nothing is fed (the next start reads the database).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import anyio.from_thread
from fastapi import Response

from control.api.state import Gateway

HEADER = "X-Legato-Live-Config"


def _tenancy(feed: Any, _record: Any) -> Any:
    return feed.tenancy_changed()


#: Resource tag -> the feed call its committed changes need (the record may be None on delete).
FEEDS: Mapping[str, Callable[[Any, Any], Any]] = {
    "workflow": lambda feed, rec: feed.workflow_changed(rec.id),
    "model": lambda feed, rec: feed.model_changed(rec.id),
    "device": lambda feed, rec: feed.device_changed(rec.id),
    "tenant": _tenancy,
    "cohort": _tenancy,
    "quota": _tenancy,
    "headroom_reservation": _tenancy,
}


def feed_change(gw: Gateway, tag: str, record: Any, response: Response | None) -> None:
    """Feed the committed change of resource ``tag`` to the live core (worker thread only)."""
    if tag == "model" and gw.models is not None:
        gw.models.clear()
    call = FEEDS.get(tag)
    if call is None or gw.live_config is None or (record is None and tag in _NEEDS_RECORD):
        return
    outcome = anyio.from_thread.run(lambda: call(gw.live_config, record))
    if response is not None:
        state = "applied" if outcome.applied else "not applied"
        response.headers[HEADER] = f"{state}: {outcome.reason}"[:500]


_NEEDS_RECORD = frozenset({"workflow", "model", "device"})
