"""The twin's gate on rollouts: a plan is rolled out only after a twin replay predicted it.

``unsimulated_reason(plan, force)`` returns None for a plan whose stored simulation finished
(``simulation.state == "done"``, written only by ``plan_simulation``'s worker, whatever the
plan's status says). Otherwise it says why the plan is not simulated, and raises Conflict with
that reason unless ``force``: the caller then passes the reason on, and the rollout's audit
record says it was forced and why.
"""

from __future__ import annotations

from typing import Any

from control.services.errors import Conflict


def unsimulated_reason(plan: Any, force: bool) -> str | None:
    """None when ``plan`` was simulated; else the reason (Conflict unless ``force``)."""
    simulation = plan.simulation or {}
    state = simulation.get("state")
    if state == "done":
        return None
    if state is None:
        why = f"placement_plan {plan.id} was never simulated in the twin"
    elif state == "running":
        why = f"placement_plan {plan.id} is being simulated; wait for the report"
    else:
        why = f"placement_plan {plan.id}'s simulation {state}: {simulation.get('error', '')}"
    if not force:
        raise Conflict(
            f"{why}; POST /admin/placement-plans/{plan.id}/simulate first, or roll out with "
            '{"force": true} (audited as forced)'
        )
    return why
