"""Resolving the futures an executor hands out (``load``, ``unload``, ``fetch_output``).

A caller may cancel such a future: ``asyncio.wrap_future`` cancels it when the task awaiting it
is cancelled (the live runtime cancels its tasks at stop, with loads still pending). The work
behind it goes on or fails as it will, and its answer then has nobody to go to. Setting a result
on a cancelled ``concurrent.futures.Future`` raises ``InvalidStateError``, which on an executor's
reading thread would break the bookkeeping around it (the replica table, the pending loads), so
an executor resolves its futures only through :func:`settle`.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any


def settle(future: concurrent.futures.Future, value: Any) -> bool:
    """Give ``future`` its result unless it is already resolved or cancelled (the check and the
    set race with a cancel on another thread: the loser is ignored). True when it was set."""
    if future.done():
        return False
    try:
        future.set_result(value)
    except concurrent.futures.InvalidStateError:
        return False
    return True


def fail(future: concurrent.futures.Future, error: BaseException) -> bool:
    """Give ``future`` its exception unless it is already resolved or cancelled (as
    :func:`settle`). True when it was set."""
    if future.done():
        return False
    try:
        future.set_exception(error)
    except concurrent.futures.InvalidStateError:
        return False
    return True
