"""Load generator: replay a trace against the API as several tenants, time-scaled.

Arrivals come from the shipped trace slices (the Azure code trace, Mooncake conversations) with
tenants assigned by weighted round-robin, or from per-tenant ServeGen arrival windows. Each
arrival becomes one HTTP call (chat, completion, embeddings or a workflow run) sized from the
trace's token counts, capped so that small CPU models keep up. ``run_load`` fires each call at
its scaled arrival time, whatever the earlier calls are doing (an open loop, as a trace is), and
``summarise`` reduces the outcomes to a per-tenant table: throughput, p50/p99 latency,
rejections (429) and errors.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import httpx

from control.clock import monotonic
from sim.traces.azure import read_azure_csv
from sim.traces.mooncake import read_mooncake_jsonl
from sim.traces.records import TraceRequest, assign_tenants, limit, scale_time, shipped_trace_path
from sim.traces.servegen import generate_servegen

TRACES = ("azure", "mooncake", "servegen")
ROUTES = ("chat", "completions", "embeddings", "workflow")
#: ServeGen client ids the shipped slice has, handed to tenants in order.
SERVEGEN_CLIENTS = (12, 14, 26, 36)
_WORDS = ("legato", "routes", "batches", "models", "tenants", "share", "devices", "fairly")


@dataclass(frozen=True)
class LoadConfig:
    """What to replay and how. ``rate_factor`` 2.0 replays twice as fast as recorded."""

    trace: str = "azure"
    route: str = "chat"
    model: str = "smollm2-135m"
    workflow: str = "rag:1"
    rate_factor: float = 1.0
    max_requests: int = 200
    span_s: float = 120.0
    max_prompt_words: int = 48
    max_output_tokens: int = 16
    timeout_s: float = 120.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.trace not in TRACES:
            raise ValueError(f"trace={self.trace!r}: expected one of {TRACES}")
        if self.route not in ROUTES:
            raise ValueError(f"route={self.route!r}: expected one of {ROUTES}")
        if self.rate_factor <= 0 or self.max_requests < 1 or self.span_s <= 0:
            raise ValueError("rate_factor and span_s must be > 0, max_requests >= 1")


@dataclass(frozen=True)
class Call:
    """One planned HTTP call."""

    at_s: float
    tenant: str
    method: str
    path: str
    body: dict


@dataclass(frozen=True)
class Outcome:
    tenant: str
    status: int  # HTTP status; 0 for a transport error or a client-side timeout
    latency_s: float


@dataclass(frozen=True)
class TenantSummary:
    tenant: str
    sent: int
    ok: int
    rejected: int
    errors: int
    throughput_rps: float
    p50_ms: float | None
    p99_ms: float | None


def arrivals(
    config: LoadConfig, tenants: Sequence[str], weights: Sequence[int] | None = None
) -> list[TraceRequest]:
    """The trace's arrivals for ``tenants``, time-scaled and limited."""
    if config.trace == "servegen":
        clients = dict(zip(SERVEGEN_CLIENTS, tenants, strict=False))
        found = generate_servegen(clients, config.span_s * config.rate_factor,
                                  random.Random(config.seed))  # fmt: skip
    elif config.trace == "azure":
        found = read_azure_csv(shipped_trace_path("azure_code"), config.max_requests)
    else:
        found = read_mooncake_jsonl(
            shipped_trace_path("mooncake_conversation"), config.max_requests
        )
    if config.trace != "servegen":
        found = assign_tenants(found, tenants, weights)
    scaled = scale_time(found, config.rate_factor)
    return limit(scaled, max_requests=config.max_requests, max_span_s=config.span_s)


def _prompt(words: int, rng: random.Random) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(max(1, words)))


def plan_calls(config: LoadConfig, trace: Sequence[TraceRequest]) -> list[Call]:
    """One call per arrival, sized by its token counts (about 0.75 words a token, capped)."""
    rng = random.Random(config.seed)
    calls = []
    for r in trace:
        words = min(config.max_prompt_words, max(1, int(r.input_tokens * 0.75)))
        out = min(config.max_output_tokens, max(1, r.output_tokens))
        text = _prompt(words, rng)
        calls.append(Call(r.arrival_s, r.tenant or "default", "POST", *_route(config, text, out)))
    return calls


def _route(config: LoadConfig, text: str, out: int) -> tuple[str, dict]:
    if config.route == "chat":
        return "/v1/chat/completions", {"model": config.model, "max_tokens": out,
                                         "messages": [{"role": "user", "content": text}]}  # fmt: skip
    if config.route == "completions":
        return "/v1/completions", {"model": config.model, "prompt": text, "max_tokens": out}
    if config.route == "embeddings":
        return "/v1/embeddings", {"model": config.model, "input": text}
    name, _, version = config.workflow.partition(":")
    return f"/v1/workflows/{name}/versions/{version or '1'}/runs", {"inputs": {"query": text}}


async def run_load(
    client: httpx.AsyncClient,
    calls: Sequence[Call],
    keys: Mapping[str, str],
    *,
    timeout_s: float = 120.0,
    on_done: Callable[[Outcome], None] | None = None,
) -> list[Outcome]:
    """Fire every call at its arrival time (open loop); returns the outcomes in call order.
    ``keys`` maps tenant -> API key; ``on_done`` is told each outcome (a progress bar)."""
    start = monotonic()

    async def one(call: Call) -> Outcome:
        await asyncio.sleep(max(0.0, call.at_s - (monotonic() - start)))
        sent = monotonic()
        headers = {"Authorization": f"Bearer {keys[call.tenant]}"}
        try:
            r = await client.request(call.method, call.path, json=call.body, headers=headers,
                                     timeout=timeout_s)  # fmt: skip
            status = r.status_code
        except httpx.HTTPError:
            status = 0
        outcome = Outcome(call.tenant, status, monotonic() - sent)
        if on_done is not None:
            on_done(outcome)
        return outcome

    return list(await asyncio.gather(*(one(c) for c in calls)))


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def summarise(outcomes: Sequence[Outcome], wall_s: float) -> list[TenantSummary]:
    """Per-tenant figures, tenants in name order, then an ``all`` row."""
    groups: dict[str, list[Outcome]] = {}
    for o in outcomes:
        groups.setdefault(o.tenant, []).append(o)
    rows = [_row(t, groups[t], wall_s) for t in sorted(groups)]
    return [*rows, _row("all", list(outcomes), wall_s)]


def _row(tenant: str, mine: Sequence[Outcome], wall_s: float) -> TenantSummary:
    ok = [o for o in mine if 200 <= o.status < 300]
    latencies = [o.latency_s * 1000 for o in ok]
    return TenantSummary(
        tenant=tenant,
        sent=len(mine),
        ok=len(ok),
        rejected=sum(1 for o in mine if o.status == 429),
        errors=sum(1 for o in mine if o.status == 0 or o.status >= 500),
        throughput_rps=len(ok) / wall_s if wall_s > 0 else 0.0,
        p50_ms=percentile(latencies, 0.50),
        p99_ms=percentile(latencies, 0.99),
    )
