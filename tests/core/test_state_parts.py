"""The core's state is made of parts, each owned by one concern, and a phase is handed the parts
it may touch: only ``run_phases`` (which hands them out) and the read-only views (snapshot,
gauges) take the whole ``CoreState``."""

from __future__ import annotations

import ast
from pathlib import Path

from control.core.parts import Ids, Timers

CORE = Path(__file__).resolve().parents[2] / "control" / "core"
TAKE_THE_WHOLE = {
    "phases.py:run_phases",
    "snapshot.py:build_snapshot",
    "gauges.py:build_gauges",
}


def _takers_of_the_whole() -> set[str]:
    found = set()
    for path in sorted(CORE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            if any(a.annotation is not None and "CoreState" in ast.unparse(a.annotation)
                   for a in args):  # fmt: skip
                found.add(f"{path.relative_to(CORE).as_posix()}:{node.name}")
    return found


def test_only_run_phases_and_the_views_take_the_whole_state() -> None:
    assert _takers_of_the_whole() == TAKE_THE_WHOLE


def test_timers_draw_their_tie_breaks_from_the_id_sequence() -> None:
    # the ids in decision logs (batches, replicas) count the timers armed before them
    ids = Ids()
    timers = Timers(ids)
    assert ids.next_id("b") == "b1"
    timers.arm(2.0, "batch", "r1")
    timers.arm(1.0, "timeout", "k1")
    assert ids.next_id("b") == "b4"
    assert [t[1:] for t in sorted(timers.heap)] == [(3, "timeout", "k1"), (2, "batch", "r1")]
    assert timers.due(1.0) and not timers.due(0.5)
