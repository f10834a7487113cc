"""``Completions.billed`` (issue 22, bounded memory): a full window of billed step keys costs
tens of bytes a key, not the ~330 of a dict of key strings, and still bills each key once."""

from __future__ import annotations

import tracemalloc

from control.core.tenancy.cost import CostModel
from control.runtime.completions import BILLED_WINDOW_S, Completions
from control.runtime.metrics import RuntimeMetrics


def _completions(runs: dict) -> Completions:
    return Completions(runs, CostModel(), RuntimeMetrics(), None, lambda d: None,
                       lambda d: [])  # fmt: skip


def test_a_full_billed_window_is_compact_and_still_bills_each_key_once():
    done = _completions({})
    rate = 100.0  # keys a second: 90,000 keys inside the 900-s window
    n = int(rate * BILLED_WINDOW_S)
    keys = [(f"5:tenant-b/{i:08x}-4a1b-9c2d/embed/1", f"{i:08x}-4a1b-9c2d") for i in range(n)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i, (key, run) in enumerate(keys):
            assert done.first_bill(key, run, i / rate)
        per_key = (tracemalloc.get_traced_memory()[0] - before) / n
    finally:
        tracemalloc.stop()
    assert per_key < 40, f"{per_key:.0f} bytes a key"
    now = n / rate
    assert not done.first_bill(keys[0][0], keys[0][1], now)  # 900 s old: still inside
    assert not done.first_bill(keys[-1][0], keys[-1][1], now)
    later = now + BILLED_WINDOW_S + done.billed.span + 1.0
    assert done.first_bill(keys[0][0], keys[0][1], later)  # forgotten past the window
    assert len(done.billed) < 10


def test_an_active_runs_key_is_held_while_the_rest_are_forgotten():
    runs: dict = {"long": object()}
    done = _completions(runs)
    assert done.first_bill("long/step", "long", 0.0)
    for i in range(2000):  # 2000 s of other runs' keys, one a second
        done.first_bill(f"k{i}", f"ended-{i}", float(i))
    assert not done.first_bill("long/step", "long", 2000.0)
    assert len(done.billed) <= 1 + BILLED_WINDOW_S * (1 + 1 / 16) + 1
