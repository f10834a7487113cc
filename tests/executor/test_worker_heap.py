"""Workers keep their long-lived heap (libraries, loaded models) out of full collections."""

from __future__ import annotations

import gc

from control.executor.worker import freeze_heap, thaw_heap


def _tracked(obj: object) -> bool:
    """Whether the collector scans ``obj`` (frozen objects are left out of get_objects)."""
    return any(o is obj for o in gc.get_objects())


def test_freeze_moves_live_objects_out_of_the_collector_and_thaw_brings_them_back() -> None:
    old = [["alive before the freeze"]]
    freeze_heap()
    assert gc.get_freeze_count() > 0 and not _tracked(old)
    young = [["created after it"]]
    assert _tracked(young)  # new objects are collected as usual
    thaw_heap()
    assert gc.get_freeze_count() == 0 and _tracked(old)
    freeze_heap()  # leave the process as a serving one would be
