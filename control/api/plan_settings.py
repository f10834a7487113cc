"""Settings of the planner in the product (``LEGATO_PLAN_*``), read once at the edge.

``plan_extras(settings, factory, url)`` builds what the placement-plan routes find in the
gateway's ``extras``: the observer's :class:`~control.services.plan_observer.PlanWatchConfig`
(``plan_watch``), the default demand and replay window (``plan_window_s``) and the twin's
:class:`~control.services.plan_simulation.PlanSimulator` (``plan_simulator``).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy.orm import Session, sessionmaker

from control.config import Settings
from control.services.plan_observer import PlanWatchConfig
from control.services.plan_simulation import PlanSimulator


class PlanSettings(BaseSettings):
    """Descriptions double as help text (README's Configuration table)."""

    model_config = SettingsConfigDict(env_prefix="LEGATO_PLAN_", env_file=".env", extra="ignore")

    demand_window_s: float = Field(
        600.0,
        gt=0,
        description="Seconds of recent traffic a proposal's demand is observed "
        "over and a simulation replays (a request's window_s wins).",
    )
    observe_window_s: float = Field(
        300.0,
        gt=0,
        description="Seconds after a completed rollout over which the live "
        "p50/p99 are observed and stored beside the twin's prediction.",
    )
    p99_margin: float = Field(
        0.2,
        ge=0,
        description="Fraction of the predicted p99 an observed p99 may exceed "
        "beyond the twin's published p99 error before the plan is flagged.",
    )
    auto_rollback: bool = Field(
        False,
        description="Roll a flagged plan back automatically (a plan's own "
        "auto_rollback field wins).",
    )


def plan_extras(settings: Settings, factory: sessionmaker[Session], url: str) -> dict[str, Any]:
    """The gateway extras of the plan routes (see the module docstring)."""
    plan = PlanSettings()
    watch = PlanWatchConfig(window_s=plan.observe_window_s, margin=plan.p99_margin,
                            auto_rollback=plan.auto_rollback)  # fmt: skip
    return {"plan_watch": watch, "plan_window_s": plan.demand_window_s,
            "plan_simulator": PlanSimulator(factory, url, settings.var_dir)}  # fmt: skip
