"""Benchmark of the seed case studies in the twin (issue 26): one JSON object.

``rag_p99_ratio`` (naive p99 / the seed layout's, at 0.8 of the naive layout's capacity),
``rag_throughput_ratio`` (capacity of the seed layout / the naive one's), ``rag_prefix_reuse``
(prompt blocks served from the prefix cache, seed layout), ``agent_latency_ratio`` (mean
end-to-end latency without / with speculative preloading), ``agent_preload_hit_rate`` and
``critical_path_gain`` (agent p99 today / with ``step_order: critical_path``; null with a
``critical_path_gain_note`` where the core lacks that option); goals, the seed documents' figures:
2.66, 2.1, 0.67, 2.33, 0.83. Also the seed's figures, both studies' details and ``notes``: the
mechanism behind each difference. See :mod:`sim.casestudy`; scenarios
sim/scenarios/casestudy_rag.yaml and casestudy_agent.yaml, over their seeds.

    python bench/casestudies.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from control import native  # noqa: E402

native.install()  # before the core is imported: the compiled core when a build is current

from sim.casestudy import casestudies  # noqa: E402


def measure() -> dict:
    """Both case studies over the scenarios' seeds, whole trace slices."""
    return casestudies()


if __name__ == "__main__":
    print(json.dumps(measure()))
