"""What the core decides, measured on the live product (issue 24's "done when" figures).

Each part lives in its own module under ``bench/live/`` and measures one capability on a live
stack (real worker processes, real HTTP on 127.0.0.1, tiny models where speed matters); each
exposes ``measure() -> dict`` and runs on its own as ``python bench/live/<part>.py``. This file
runs the parts one after the other (never two at once: they would share this machine's cores
and skew each other's latencies) and prints one JSON object with every part's keys.

Goal figures (the issue's):

* ``prefix_hit_rate`` >= 0.6 and ``ttft_ratio_vs_no_prefix_routing`` <= 0.7
  (``bench/live/prefix.py``: a shared-system-prompt chat load on two replicas);
* ``planner_p99_ratio_vs_current`` (``bench/live/planner.py``: p99 after rolling out a proposed
  plan over p99 under a deliberately poor one; lower is better);
* ``canary_rolled_back`` true for a canary made to fail (``bench/live/canary.py``);
* ``critical_p99_vs_solo`` <= 1.5 under a batch tenant's saturating load
  (``bench/live/preemption.py``);
* ``served_vs_ceiling`` >= 0.85 for MiniLM over HTTP against the direct-call ceiling measured in
  the same run (``bench/live/serving.py``).

A context key that an earlier part already printed is printed as ``<part>.<key>``. A part
that fails reports ``{"<part>_error": "<exception>"}`` instead of its keys, so one broken
part does not hide the others' figures.

    python bench/live_capabilities.py [--only prefix,canary]
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PARTS = ("prefix", "planner", "canary", "preemption", "serving")


def run_part(name: str) -> dict:
    """One part's figures, or the one key that says why it could not be measured."""
    try:
        module = importlib.import_module(f"bench.live.{name}")
        return dict(module.measure())
    except Exception as exc:  # noqa: BLE001 - a broken part is reported, the others still run
        return {f"{name}_error": f"{type(exc).__name__}: {exc}"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated parts (default: all)")
    args = parser.parse_args(argv)
    chosen = [p for p in args.only.split(",") if p] or list(PARTS)
    unknown = sorted(set(chosen) - set(PARTS))
    if unknown:
        parser.error(f"unknown part(s) {', '.join(unknown)}; known: {', '.join(PARTS)}")
    figures: dict = {}
    for name in chosen:
        for key, value in run_part(name).items():
            # a context key two parts share ("seconds", "clients") is kept under its part's name
            figures[f"{name}.{key}" if key in figures else key] = value
    print(json.dumps(figures, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
