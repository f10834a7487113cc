"""The serving process freezes its start-up heap once (gc.freeze), not at every runtime start."""

from __future__ import annotations

import gc

from control.runtime import live


def test_freeze_happens_once_per_process(monkeypatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(live, "_heap_frozen", False)
    monkeypatch.setattr(gc, "collect", lambda *a: calls.append("collect") or 0)
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    assert live.freeze_startup_heap() is True
    assert calls == ["collect", "freeze"]  # start-up garbage goes first, then the rest freezes
    assert live.freeze_startup_heap() is False
    assert calls == ["collect", "freeze"]
