"""Precision variants through the whole core (``ControlCore`` submit/step), not the choice alone.

A one-node embed workflow names the base ``minilm:1``; the catalog also holds its int8 variant
(``minilm:1@int8``, a ``ModelSpec`` with ``base`` set), each with a ready replica on a device of
its own. The dispatched items say which key served them and why (``BatchItem.variant``).
"""

from __future__ import annotations

from dataclasses import replace

from control.core.actions import Dispatch
from control.core.context import CoreConfig
from control.core.events import TenancyConfigChanged
from control.core.tenancy.base import TenancyConfig, TenantSpec
from control.core.types import Request
from control.core.variant_choice import DEGRADE, PREFERRED
from control.core.variant_config import VariantChoiceConfig
from tests.core.fakes import FcfsTenancy
from tests.support.builders import EMBED, LLM, devices, latency, make_core, single

INT8 = replace(EMBED, precision="int8", base=EMBED.key, memory_mib=30, quality_score=0.97)
BASE_DEV, INT8_DEV = "d000", "d001"


def core_with(score: float = 0.97, *, degrade_wait_us: int = 200_000, allow: bool = False):
    variant = replace(INT8, quality_score=score)
    cfg = CoreConfig(variants=VariantChoiceConfig(degrade_wait_us=degrade_wait_us))
    core = make_core(FcfsTenancy(), models=(EMBED, variant), devs=devices(2),
                     replicas=[(EMBED.key, BASE_DEV), (variant.key, INT8_DEV)],
                     workflows=[single(EMBED)], config=cfg, lat=latency((EMBED, variant)))  # fmt: skip
    tenants = (TenantSpec("t1", 1, allow_degrade=allow), TenantSpec("t2", 1, quality="fast"))
    core.ingest(TenancyConfigChanged(TenancyConfig(tenants)), 0.0)
    assert core._st.catalog.variants == {EMBED.key: [variant.key]}
    return core


def dispatched(core) -> dict[str, tuple[str, object]]:
    """Request id -> (model key of the replica that got it, the variant decision), over
    steps at 0 (routing) and 1 s (past every batch delay; nothing completes meanwhile)."""
    out = {}
    for now in (0.0, 1.0):
        for d in core.step(now).of_type(Dispatch):
            for item in d.items:
                out[item.request_id] = (d.model_key, item.variant)
    return out


def req(i: int, quality: str | None = None, tenant: str = "t1", **kw) -> Request:  # noqa: ANN003
    return Request(f"q{i}", tenant, "only-minilm", prompt_tokens=64, quality=quality, **kw)


def test_a_fast_request_runs_on_the_int8_replica_and_an_exact_one_on_the_base() -> None:
    core = core_with()
    core.submit(req(1, "fast"), 0.0)
    core.submit(req(2, "exact"), 0.0)
    core.submit(req(3, tenant="t2"), 0.0)  # the tenant's default: fast
    core.submit(req(4, priority_class="critical"), 0.0)  # from the priority class: exact
    got = dispatched(core)
    assert {k: v[0] for k, v in got.items()} == {
        "q1": INT8.key, "q2": EMBED.key, "q3": INT8.key, "q4": EMBED.key}  # fmt: skip
    assert all(v[1].kind == PREFERRED for v in got.values())
    assert got["q3"][1].quality == "fast" and got["q4"][1].quality == "exact"


def _saturate(core, n: int = 6) -> dict[str, tuple[str, object]]:
    for i in range(n):
        core.submit(req(i, "exact"), 0.0)
    return dispatched(core)


def test_a_saturated_base_is_degraded_only_when_the_tenant_allows_it() -> None:
    # int8 measured at 0.995: above the exact floor (0.99), so it may take exact work
    allowed = _saturate(core_with(0.995, degrade_wait_us=0, allow=True))
    degraded = [v for v in allowed.values() if v[1].kind == DEGRADE]
    assert degraded and all(k == INT8.key for k, _ in degraded)
    assert "the tenant allows degrading" in degraded[0][1].reason
    assert degraded[0][1].wanted == EMBED.key
    refused = _saturate(core_with(0.995, degrade_wait_us=0, allow=False))
    assert {k for k, _ in refused.values()} == {EMBED.key}
    assert any("does not allow degrading" in v[1].reason for v in refused.values())


def test_exact_is_never_degraded_below_the_floor() -> None:
    got = _saturate(core_with(0.97, degrade_wait_us=0, allow=True))
    assert {k for k, _ in got.values()} == {EMBED.key}
    assert any("no cheaper variant allowed" in v[1].reason for v in got.values())


def test_a_step_with_a_lora_adapter_runs_on_the_base_even_when_fast_is_asked() -> None:
    """Adapters are trained on and loaded onto the base's weights: the variant choice leaves a
    step carrying one on the base model, while the same fast request without one takes int8."""
    llm8 = replace(LLM, precision="int8", base=LLM.key, memory_mib=90, quality_score=0.97)
    core = make_core(FcfsTenancy(), models=(LLM, llm8), devs=devices(2),
                     replicas=[(LLM.key, BASE_DEV), (llm8.key, INT8_DEV)],
                     workflows=[single(LLM)], lat=latency((LLM, llm8)))  # fmt: skip
    core.ingest(TenancyConfigChanged(TenancyConfig((TenantSpec("t1", 1),))), 0.0)
    wf = single(LLM)["workflow"]
    core.submit(Request("plain", "t1", wf, prompt_tokens=16, max_output_tokens=4,
                        quality="fast"), 0.0)  # fmt: skip
    core.submit(Request("tuned", "t1", wf, prompt_tokens=16, max_output_tokens=4, quality="fast",
                        adapter="lora-1", adapter_model=LLM.key), 0.0)  # fmt: skip
    got = dispatched(core)
    assert got["plain"][0] == llm8.key
    assert got["tuned"][0] == LLM.key
