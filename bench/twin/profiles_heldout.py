"""Held-out errors of the public GPU latency profiles (``sim/profiles``), as one JSON object.

``interpolation_*``: the twin's table interpolation (the core's ``TableLatencyModel``) over rows
built from the measurements left after holding some out, against the held-out measurements.
``*_rule_*``: the derivation rules (TP degree, model family, GPU) against measurements they did
not see. Each entry is ``{"n", "mean", "max"}`` of |relative error|. See
``sim/profiles/heldout.py`` for what is held out and ``sim/profiles/README.md`` for the rules.

    python bench/twin/profiles_heldout.py
"""

from __future__ import annotations

import json

from sim.profiles.heldout import report


def measure() -> dict[str, object]:
    return report()


if __name__ == "__main__":
    print(json.dumps(measure()))
