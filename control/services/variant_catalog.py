"""Precision variants in the fleet view: active ``ModelVariant`` rows as core ``ModelSpec``s.

Each active variant of an active model becomes a ``ModelSpec`` with ``base`` = the model's key
and ``precision`` set (core key ``name:version@precision``), an executor ``ModelRef`` with that
precision when the base is loadable, and a cost weight. Where a figure is not measured yet:

- memory: the base's scaled by the usual weight-size ratio of the precision against fp32
  (bf16/fp16 1/2, int8 1/3.5 -- quantized linear layers, the rest stays fp32 --, int4 1/6);
- load time: the base's;
- cost weight: ``cost_weight_milli`` of the row, else the base's scaled by the memory ratio
  (a variant that holds less memory frees device time and is billed less, rounded up).

Read-only; the variants service (``control.services.variants``) owns writes.
"""

from __future__ import annotations

import math
from dataclasses import replace

from sqlalchemy.orm import Session

from control.core.placement.inputs import ModelEntry
from control.core.tenancy.cost import ModelCostWeight
from control.core.types import ModelSpec
from control.core.variants import precision_of, variant_key
from control.executor.protocol import ModelRef
from control.store.variants import VariantRecord, VariantRepository

#: Memory of a variant against its fp32 base when not measured (see the module docstring).
MEMORY_RATIO = {"fp32": 1.0, "bf16": 0.5, "fp16": 0.5, "int8": 1 / 3.5, "int4": 1 / 6}


def active_variants(session: Session, model_ids: set[int]) -> list[VariantRecord]:
    """Active variants of the given models, by id (fp32 rows are the base itself: skipped)."""
    rows = VariantRepository(session).list(status="active")
    return [v for v in rows if v.model_id in model_ids and v.precision != "fp32"]


def variant_spec(base: ModelSpec, row: VariantRecord) -> ModelSpec:
    """The core's view of one variant of ``base``."""
    memory = row.memory_mib or max(1, math.ceil(base.memory_mib * MEMORY_RATIO[row.precision]))
    load_s = row.load_time_ms / 1000.0 if row.load_time_ms else base.load_time_s
    score = (row.quality or {}).get("score")
    return replace(base, memory_mib=memory, load_time_s=load_s, precision=row.precision,
                   base=base.key, quality_score=None if score is None else float(score))  # fmt: skip


def variant_ref(base: ModelRef, spec: ModelSpec) -> ModelRef:
    """The executor reference of a variant: the base's weights at the variant's precision."""
    return replace(base, name=spec.key, precision=spec.precision, expected_mib=spec.memory_mib)


def variant_weight(base: ModelCostWeight, base_mib: int, spec: ModelSpec,
                   row: VariantRecord) -> ModelCostWeight:  # fmt: skip
    """Price of a variant's work: its own weight, else the base's scaled by memory."""
    if row.cost_weight_milli is not None:
        return ModelCostWeight(row.cost_weight_milli, row.cost_weight_milli)
    ratio = spec.memory_mib / max(1, base_mib)
    return ModelCostWeight(math.ceil(base.input_milli * ratio),
                           math.ceil(base.output_milli * ratio))  # fmt: skip


def with_variants(
    session: Session, rows: dict[int, ModelSpec], refs: dict[str, ModelRef],
    weights: dict[str, ModelCostWeight],
) -> list[ModelSpec]:  # fmt: skip
    """The variant specs of the models ``rows`` (model id -> base spec); adds their refs
    (for loadable bases) to ``refs`` and their weights to ``weights``, in place."""
    out = []
    for row in active_variants(session, set(rows)):
        base = rows[row.model_id]
        spec = variant_spec(base, row)
        out.append(spec)
        if base.key in refs:
            refs[spec.key] = variant_ref(refs[base.key], spec)
        if base.key in weights:
            weights[spec.key] = variant_weight(weights[base.key], base.memory_mib, spec, row)
    return out


def profile_key(base_key: str, variant: str) -> str:
    """Key of a latency profile row or a stored placement: the base's, or its variant's
    (``variant`` non-empty)."""
    return variant_key(base_key, variant) if variant else base_key


def stored_variant(key: str) -> str:
    """What a ``Placement.variant`` column holds for core key ``key`` ("" for a base key);
    the row's ``model_id`` is the base's (``base_of(key)``)."""
    return precision_of(key) or ""


def placement_entry(spec: ModelSpec) -> ModelEntry:
    """Placement's view of a model: a variant runs only at its own precision, so it is placed
    only on devices whose ``precisions`` include it (or that declare none); a base model as
    before (any precision)."""
    return ModelEntry(spec, (spec.precision,) if spec.base else ())
