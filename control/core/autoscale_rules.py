"""The rules a model's autoscaling settings obey, in one place for the core and the API.

A model autoscales when ``max_replicas`` is set (``ModelSpec``'s autoscaling fields, see
``control.core.autoscaler``). ``autoscaling_problems`` returns every broken rule as (field,
message), so ``ModelSpec`` refuses a bad spec and the admin API answers a 422 naming each field
(``min_replicas`` above ``max_replicas`` names both). Pure: no imports of the core.
"""

from __future__ import annotations


def autoscaling_problems(
    min_replicas: int, max_replicas: int | None, scale_out_delay_s: float | None,
    idle_s: float | None,
) -> list[tuple[str, str]]:  # fmt: skip
    """(field, what is wrong) for every rule the settings break; empty when they are valid."""
    found: list[tuple[str, str]] = []
    if min_replicas < 0:
        found.append(("min_replicas", f"must be >= 0, got {min_replicas}"))
    if max_replicas is not None and max_replicas < 1:
        found.append(("max_replicas", f"must be >= 1, got {max_replicas}"))
    if max_replicas is not None and min_replicas > max_replicas:
        why = f"min_replicas ({min_replicas}) must not exceed max_replicas ({max_replicas})"
        found.append(("min_replicas", why))
        found.append(("max_replicas", why))
    if scale_out_delay_s is not None and not scale_out_delay_s > 0:
        found.append(("scale_out_delay_s", f"must be > 0 seconds, got {scale_out_delay_s}"))
    if idle_s is not None and not idle_s > 0:
        found.append(("idle_s", f"must be > 0 seconds, got {idle_s}"))
    return found
