"""Serving processes keep their long-lived heap out of full collections (control.executor.heap):
the driver freezes its start-up heap once, workers freeze and thaw around model changes."""

from __future__ import annotations

import gc

from control.executor import heap


def test_freeze_happens_once_per_process(monkeypatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(heap, "_startup_frozen", False)
    monkeypatch.setattr(gc, "collect", lambda *a: calls.append("collect") or 0)
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    monkeypatch.setattr(gc, "get_freeze_count", lambda: calls.count("freeze"))
    assert heap.freeze_startup_heap() is True
    assert calls == ["collect", "freeze"]  # start-up garbage goes first, then the rest freezes
    assert heap.freeze_startup_heap() is False
    assert calls == ["collect", "freeze"]


def _tracked(obj: object) -> bool:
    """Whether the collector scans ``obj`` (frozen objects are left out of get_objects)."""
    return any(o is obj for o in gc.get_objects())


def test_freeze_moves_live_objects_out_of_the_collector_and_thaw_brings_them_back() -> None:
    old = [["alive before the freeze"]]
    heap.freeze_heap()
    assert gc.get_freeze_count() > 0 and not _tracked(old)
    young = [["created after it"]]
    assert _tracked(young)  # new objects are collected as usual
    heap.thaw_heap()
    assert gc.get_freeze_count() == 0 and _tracked(old)
    heap.freeze_heap()  # leave the process as a serving one would be


def test_a_thawed_start_up_heap_is_frozen_again(monkeypatch) -> None:
    """gc.unfreeze is process-wide: a twin replay in this process (sim.env.tuned_gc) thaws the
    start-up heap a runtime froze; the next runtime start must freeze it again (it used to
    trust its once-per-process flag and leave the heap thawed)."""
    monkeypatch.setattr(heap, "_startup_frozen", False)
    heap.freeze_startup_heap()
    assert heap.freeze_startup_heap() is False and gc.get_freeze_count() > 0
    gc.unfreeze()  # what tuned_gc does on exit
    assert heap.freeze_startup_heap() is True
    assert gc.get_freeze_count() > 0
