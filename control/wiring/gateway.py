"""The gateway: the FastAPI app over the services and, when there is one, the live path.

:func:`build_gateway` is what ``legato api`` serves (the settings read once, here);
:func:`gateway_app` is its recipe over parts the caller already has (tests and benchmarks use
it with their own database and executor).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

from fastapi import FastAPI

from control.api.app import Lifespan, create_app
from control.api.demo_bursts import EXTRA as BURSTS
from control.api.metrics import GatewayMetrics
from control.api.plan_settings import plan_extras
from control.api.ports import WhatIfEngine
from control.api.prompts import PROMPT_PREFIXES
from control.api.routes.demo_bursts import SAMPLER
from control.api.routes.policies import EXTRA as POLICIES_EXTRA
from control.api.settings import GatewayConfig, GatewaySettings, gateway_config
from control.api.twin import TwinEngine
from control.config import Settings, get_settings
from control.core.canary_stats import CanaryConfig
from control.core.capacity import CapacityAdmissionConfig
from control.core.tenancy.config import TenancyManagerConfig
from control.core.variant_config import VariantChoiceConfig
from control.executor.protocol import Executor
from control.runtime.types import UsageRecord
from control.services import Services
from control.services.fair_history import FairShareHistory, FairShareSampler
from control.services.fidelity.runner import FidelityRunner
from control.services.inference import InferenceService
from control.services.live_policies import LivePolicies
from control.services.run_tracing import RunTracer
from control.store.records import RequestRecord
from control.wiring.executor import build_executor, with_measured_transfer
from control.wiring.live import (
    LiveOptions,
    LiveParts,
    OnSettled,
    build_live,
    serving_core_config,
)
from control.wiring.policies import policies_from_settings, tenancy_of
from control.wiring.services import checked_services, session_factory


def live_lifespan(inference: InferenceService, sampler: FairShareSampler | None = None) -> Lifespan:
    """A lifespan that starts ``inference`` (and so its runtime) with the app and stops it
    when the app stops; ``sampler`` (the fair-share history's) runs while it runs. Demo bursts
    still running are stopped first."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await inference.start()
        if sampler is not None:
            sampler.ensure_started()
        try:
            yield
        finally:
            bursts = app.state.gateway.extras.get(BURSTS)
            if bursts is not None:
                await bursts.stop_all()
            if sampler is not None:
                await sampler.stop()
            await inference.stop()

    return lifespan


def gateway_app(
    services: Services,
    config: GatewayConfig,
    executor: Executor | None = None,
    options: LiveOptions = LiveOptions(),
    *,
    spec_validator: Callable[[Mapping[str, Any]], list[str]] | None = None,
    whatif_engine: WhatIfEngine | None = None,
    extras: Mapping[str, Any] | None = None,
    start_with_app: bool = True,
    also_settled: OnSettled | None = None,
) -> FastAPI:
    """The app over ``services``; with an ``executor``, over the live path of
    :func:`~control.wiring.live.build_live` too (the inference service is then
    ``app.state.gateway.inference``). The gateway's metrics are built first and handed to the
    inference service as its ``on_settled``. ``start_with_app``: the app's lifespan starts and
    stops the live path (False: the caller does, e.g. a test over an ASGI transport).
    ``also_settled`` is told each settled run after the metrics (a benchmark's probe)."""
    metrics = GatewayMetrics()
    live: LiveParts | None = None
    if executor is not None:
        on_settled = (
            metrics.on_settled if also_settled is None else _both(metrics.on_settled, also_settled)
        )
        live = build_live(services.factory, services, executor, options, on_settled=on_settled)
    sampler = None if live is None else fair_share_sampler(live.inference, config)
    lifespan = (live_lifespan(live.inference, sampler)
                if live is not None and start_with_app else None)  # fmt: skip
    if live is not None:  # GET/PATCH /admin/policies: the running core's policies
        extras = {**(extras or {}), SAMPLER: sampler,
                  POLICIES_EXTRA: LivePolicies(live.inference.runtime, services.audit)}  # fmt: skip
    return create_app(
        services,
        config,
        metrics=metrics,
        spec_validator=spec_validator,
        inference=None if live is None else live.inference,
        live_config=None if live is None else live.live_config,
        whatif_engine=whatif_engine,
        extras={**(extras or {}), PROMPT_PREFIXES: live.prefixes} if live else extras,
        lifespan=lifespan,
    )


def fair_share_sampler(inference: InferenceService, config: GatewayConfig) -> FairShareSampler:
    """The sampler of the fair-share history (``/admin/fair-share/history``) over the live
    core's snapshot and the runtime's preemption counter, keeping ``fair_history_s``."""
    keep = max(1, round(config.fair_history_s / config.fair_history_every_s))
    return FairShareSampler(inference.snapshot, lambda: inference.runtime.metrics,
                            FairShareHistory(keep), config.fair_history_every_s)  # fmt: skip


def _both(first: OnSettled, then: OnSettled) -> OnSettled:
    def settled(request_id: str, record: RequestRecord, usage: tuple[UsageRecord, ...]) -> None:
        first(request_id, record, usage)
        then(request_id, record, usage)

    return settled


def build_gateway(with_runtime: bool = True) -> FastAPI:
    """The app as ``legato api`` serves it: the settings' database (migrated beforehand),
    services with the core's spec check and the server's key pepper, the live path over the
    local executor (``with_runtime``; without it the inference routes answer 503), the twin's
    what-if engine and the fidelity runner."""
    settings, gateway = get_settings(), GatewaySettings()
    url = settings.resolved_database_url()
    factory = session_factory(url)
    services, validator = checked_services(factory, gateway.key_pepper.get_secret_value().encode())
    executor = build_executor(settings) if with_runtime else None
    # Validations run in their own process with their own executor worker, so the runner is
    # installed whether or not this gateway runs the live runtime.
    extras = {"fidelity_runner": FidelityRunner(url), **plan_extras(settings, factory, url)}
    options = with_measured_transfer(live_options(gateway, settings), settings)
    tracer = run_tracer(gateway)
    return gateway_app(services, gateway_config(settings, gateway), executor, options,
                       spec_validator=validator, whatif_engine=TwinEngine(factory, url),
                       extras=extras,
                       also_settled=tracer.on_settled if tracer else None)  # fmt: skip


def run_tracer(gateway: GatewaySettings) -> RunTracer | None:
    """The OTLP exporter of finished runs' traces; None (nothing exported) without an endpoint
    (``LEGATO_OTLP_ENDPOINT``)."""
    if not gateway.otlp_endpoint:
        return None
    return RunTracer(gateway.otlp_endpoint, gateway.otlp_service_name)


def live_options(gateway: GatewaySettings, settings: Settings | None = None) -> LiveOptions:
    """The live path's options from the gateway's settings: the resume age and capacity
    admission (``LEGATO_CAPACITY_ADMISSION``, ``LEGATO_CAPACITY_MARGIN``) and the canary's
    rollback margins (``LEGATO_CANARY_*``) into the core, the async runs' bound
    (``LEGATO_ASYNC_RUN_TIMEOUT_S``), the prefix block size (``LEGATO_PREFIX_BLOCK_TOKENS``)
    into the core and the gateway's prompt hashing alike, the strict-priority lead
    (``LEGATO_STRICT_PRIORITY_LEAD``) into the tenancy half and, given ``settings``, the core's
    policies (:func:`~control.wiring.policies.policies_from_settings`)."""
    admission = CapacityAdmissionConfig(
        enabled=gateway.capacity_admission, margin=gateway.capacity_margin
    )
    core = replace(serving_core_config(), capacity_admission=admission,
                   canary=_canary_config(gateway),
                   variants=_variant_config(settings or get_settings()),
                   prefix_block_tokens=(settings or get_settings()).prefix_block_tokens)  # fmt: skip
    tenancy = TenancyManagerConfig(strict_priority_lead=gateway.strict_priority_lead)
    options = LiveOptions(resume_max_age_s=gateway.resume_max_age_s, core_config=core,
                          async_run_timeout_s=gateway.async_run_timeout_s,
                          tenancy=tenancy)  # fmt: skip
    if settings is None:
        return options
    policies = policies_from_settings(settings, core)
    return replace(options, core_config=policies.core,
                   tenancy=tenancy_of(policies, options.tenancy))  # fmt: skip


def _variant_config(settings: Any) -> VariantChoiceConfig:
    """The core's variant choice with ``LEGATO_EXACT_QUALITY_FLOOR`` (the floor the console's
    variants panel and the variants API read out too)."""
    return VariantChoiceConfig(exact_quality_floor=float(settings.exact_quality_floor))


def _canary_config(gateway: GatewaySettings) -> CanaryConfig:
    """``LEGATO_CANARY_*``; a window below the sample count is raised to it (every judged
    sample is kept)."""
    return CanaryConfig(
        error_margin=gateway.canary_error_margin,
        p99_margin=gateway.canary_p99_margin,
        p99_min_delta_s=gateway.canary_p99_min_delta_s,
        min_samples=gateway.canary_min_samples,
        window=max(gateway.canary_window, gateway.canary_min_samples),
    )
