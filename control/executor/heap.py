"""Keeping a serving process's long-lived heap out of the garbage collector's full collections.

A serving process (the live driver with its gateway, or an executor worker) allocates its
long-lived world up front: imported modules, torch and transformers, the core's wiring, each
loaded model and tokenizer (~300k objects). CPython's full collections rescan all of it, a
pause of 100-280 ms measured here, and they come when many objects survive, i.e. while a
backlog grows: the driver or the device then stands still when it is needed most.
``gc.freeze`` moves what is alive out of the collector's generations; frozen objects are still
freed by reference counting, only cycles among them wait for ``thaw_heap``.
"""

from __future__ import annotations

import gc

_startup_frozen = False


def freeze_heap() -> None:
    """Collect (what is garbage now must not be frozen), then freeze every object alive."""
    gc.collect()
    gc.freeze()


def thaw_heap() -> None:
    """Put the frozen objects back under the collector (before dropping a model, so that its
    reference cycles can be collected)."""
    gc.unfreeze()


def freeze_startup_heap() -> bool:
    """:func:`freeze_heap` the first time it is called in a process (True then; False later):
    later runtimes in the same process (tests, restarts) do not freeze their own short-lived
    state. Unless the heap has been thawed since (``gc.unfreeze`` is process-wide: a twin
    replay in this process under ``sim.env.tuned_gc``, a worker's ``thaw_heap``): then the
    start-up heap is no longer frozen, and it is frozen again (True)."""
    global _startup_frozen
    if _startup_frozen and gc.get_freeze_count() > 0:
        return False
    _startup_frozen = True
    freeze_heap()
    return True
