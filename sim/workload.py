"""A scenario's workload for one seed: trace requests mapped to tenants and workflows.

``arrivals(scenario, seed)`` reads or generates the trace, applies time scaling and limits,
then maps every request to a tenant and a workflow by seeded weighted choice (a trace that names
its tenants keeps them), sets the tenant's priority class, the workflow's deadline, and the
prompt's prefix-block hashes (Mooncake) for the prefix-cache model, cut to the blocks of the
prompt as capped by ``max_input_tokens`` (a block past the prompt is never computed, so it can
neither hit nor count). Same scenario and seed, same list.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from control.core.types import BLOCK_TOKENS, Request
from sim.driver import Arrival
from sim.scenario import Scenario, Workload
from sim.traces.azure import read_azure_csv
from sim.traces.mooncake import read_mooncake_jsonl
from sim.traces.records import SHIPPED, TraceRequest, limit, scale_time
from sim.traces.servegen import generate_servegen
from sim.traces.synthetic import SyntheticSpec, generate


def _path(source: str) -> str:
    return str(SHIPPED[source]) if source in SHIPPED else source


def trace_requests(w: Workload, seed: int) -> list[TraceRequest]:
    """The trace, time-scaled and limited (seeded where it is generated)."""
    rng = random.Random(seed)
    if w.trace == "azure":
        reqs = read_azure_csv(_path(w.source), max_requests=w.max_requests)
    elif w.trace == "mooncake":
        reqs = read_mooncake_jsonl(_path(w.source), max_requests=w.max_requests)
    elif w.trace == "servegen":
        clients = [int(c) for c in w.source.split(",")]
        names = list(w.tenants) or [f"client-{c}" for c in clients]
        span = float(w.synthetic.get("span_s", 600.0))
        reqs = generate_servegen(dict(zip(clients, names, strict=False)), span, rng)
    else:
        reqs = generate(SyntheticSpec(**w.synthetic), rng)  # type: ignore[arg-type]
    reqs = limit(scale_time(reqs, w.rate_factor), max_span_s=w.max_span_s)
    return reqs[: w.max_requests] if w.max_requests is not None else reqs


def _chooser(weights: Mapping[str, int], rng: random.Random):  # noqa: ANN202
    names = sorted(weights)
    cum, acc = [], 0
    for n in names:
        acc += int(weights[n])
        cum.append(acc)
    if not names or acc <= 0:
        raise ValueError(f"weights {dict(weights)!r}: need at least one positive weight")

    def pick() -> str:
        x = rng.randrange(acc)
        for n, c in zip(names, cum, strict=True):
            if x < c:
                return n
        return names[-1]

    return pick


def arrivals(scenario: Scenario, seed: int) -> list[Arrival]:
    """Core requests with their arrival times for one seed."""
    w = scenario.workload
    rng = random.Random(seed * 7919 + 17)
    classes = {t.tenant_id: t.priority_class for t in scenario.tenancy.tenants}
    tenant_of = _chooser(w.tenants or {t: 1 for t in classes} or {"default": 1}, rng)
    workflow_of = _chooser(w.workflows, rng)
    out = []
    for i, t in enumerate(trace_requests(w, seed)):
        tenant = t.tenant or tenant_of()
        wf = workflow_of()
        deadline = w.deadline_s.get(wf)
        prompt = min(t.input_tokens, w.max_input_tokens or t.input_tokens)
        req = Request(
            request_id=f"r{i}", tenant_id=tenant, workflow=wf,
            priority_class=classes.get(tenant, "standard"),
            deadline=None if deadline is None else t.arrival_s + deadline,
            session_id=t.session, prompt_tokens=prompt,
            max_output_tokens=min(t.output_tokens, w.max_output_tokens or t.output_tokens),
            prefix_blocks=t.block_hashes[: -(-prompt // BLOCK_TOKENS)],
        )  # fmt: skip
        out.append(Arrival(t.arrival_s, req))
    return out
