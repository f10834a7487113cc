"""Handing a resumed run's completed steps to the runtime: their outputs become host-held
outputs of the run (as a host tool's are), and the core's request names them done
(``control.core.dag.resume`` replays them), so only the remaining steps run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from control.core.types import DoneStep, Request
from control.runtime import lora, mapping
from control.runtime.types import RunRequest


def seed(run: RunRequest, host_outputs: dict[tuple[str, str], Mapping[str, Any]]) -> Request:
    """The core request of ``run`` (with its LoRA adapter, :mod:`.lora`); a resumed run's
    outputs are put into ``host_outputs``."""
    request = lora.with_adapter(run.request, run.sampling)
    if not run.completed:
        return request
    rid = run.request_id
    done = []
    for k in run.completed:
        host_outputs[(rid, mapping.exec_node(k.node_id, k.chunk))] = k.output
        done.append(DoneStep(k.node_id, k.chunk, k.route_label, k.item_count))
    return replace(request, completed=tuple(done))
