"""What the routing policy is told about a ready step (``StepDemand``), built from the step."""

from __future__ import annotations

from control.core.routing.adapters import step_adapter
from control.core.routing.base import StepDemand
from control.core.state import QueuedStep


def demand_of(step: QueuedStep) -> StepDemand:
    """The step's model, tokens, prefix blocks, session (generate steps only: a session pins
    generation, not embeddings) the devices its inputs live on and their sizes, and its LoRA
    adapter with the load time a replica lacking it pays."""
    adapter = step_adapter(step)
    load_s = step.run.request.adapter_load_s if adapter else 0.0
    return StepDemand(
        model_key=step.model_key or "",
        input_tokens=step.input_tokens,
        output_tokens=step.max_output_tokens,
        prefix_blocks=step.prefix_blocks,
        session_id=step.run.request.session_id if step.node.task == "generate" else None,
        input_devices=step.input_devices,
        input_bytes=step.input_bytes,
        adapter=adapter,
        adapter_load_us=int(load_s * 1e6),
    )
