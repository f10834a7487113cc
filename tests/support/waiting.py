"""Waiting for a condition in async tests: poll it, never sleep a guessed delay."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


async def until(predicate: Callable[[], T], what: str, timeout: float = 60.0) -> T:
    """``predicate()``'s first truthy value, polled every 10 ms; AssertionError naming
    ``what`` after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if found := predicate():
            return found
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")
