"""Fidelity of the twin: one trace slice through the live stack and through the twin.

Modules: ``config`` (settings), ``world`` (the scenario, slice and payloads both sides use),
``live`` (the live session and its in-worker profile), ``twin`` (the twin side), ``compare``
(figures and errors) and ``validate`` (the whole check, run once or repeated).

The whole-DAG check (a RAG or agent workflow, per stage, at several loads of any trace) is
``dag_validate`` over ``dag_world``, ``dag_live``, ``dag_tables`` and ``dag_twin``.
"""

from control.services.fidelity.compare import Side, compare_sides, summarize
from control.services.fidelity.config import MODEL_KEY, TRACE, FidelityConfig
from control.services.fidelity.live import Overheads, RequestSeen, run_live
from control.services.fidelity.twin import run_twin, run_twin_detailed, run_twin_pooled
from control.services.fidelity.validate import config_dict, validate_fidelity, validate_repeated
from control.services.fidelity.world import (
    fidelity_scenario,
    rate_for_load,
    slice_arrivals,
    text_of,
)

__all__ = [
    "MODEL_KEY",
    "TRACE",
    "FidelityConfig",
    "Overheads",
    "RequestSeen",
    "Side",
    "compare_sides",
    "config_dict",
    "fidelity_scenario",
    "rate_for_load",
    "run_live",
    "run_twin",
    "run_twin_detailed",
    "run_twin_pooled",
    "slice_arrivals",
    "summarize",
    "text_of",
    "validate_fidelity",
    "validate_repeated",
]
