"""ActiveModels: one database read per refresh however many callers arrive together."""

from __future__ import annotations

import asyncio
import threading

from control.api.model_cache import ActiveModels


class _SlowCatalogue:
    """A load function that blocks until released and counts its calls."""

    def __init__(self, names: list[str]) -> None:
        self.calls = 0
        self.names = names
        self.gate = threading.Event()

    def __call__(self) -> list:
        self.calls += 1
        self.gate.wait(5)
        return [_Model(n) for n in self.names]


class _Model:
    def __init__(self, name: str) -> None:
        self.name = name


async def test_concurrent_callers_share_one_load():
    cache = ActiveModels(ttl_s=60)
    load = _SlowCatalogue(["a", "b"])
    waiting = [asyncio.ensure_future(cache.named("a", load)) for _ in range(50)]
    await asyncio.sleep(0.05)
    load.gate.set()
    found = await asyncio.gather(*waiting)
    assert load.calls == 1
    assert all([m.name for m in f] == ["a"] for f in found)


async def test_clear_during_a_load_forces_a_fresh_one():
    cache = ActiveModels(ttl_s=60)
    old = _SlowCatalogue(["a"])
    first = asyncio.ensure_future(cache.named("b", old))
    await asyncio.sleep(0.05)
    cache.clear()  # "b" was just created through the admin API
    new = _SlowCatalogue(["a", "b"])
    new.gate.set()
    assert [m.name for m in await cache.named("b", new)] == ["b"]
    old.gate.set()
    await first
    assert new.calls == 1
    # the stale load finishing late does not overwrite the newer list
    again = _SlowCatalogue([])
    again.gate.set()
    assert [m.name for m in await cache.named("b", again)] == ["b"]
    assert again.calls == 0
