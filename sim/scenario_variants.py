"""Precision variants in a twin scenario, and the what-if that adds a replica.

A scenario's model may declare its precision variants under ``variants``::

    models:
      - {name: minilm, version: "1", task: embed, memory_mib: 400, cost_milli: 1000,
         variants: [{precision: int8, memory_mib: 115, latency_scale: 0.35,
                     quality_score: 0.97}]}

Each becomes a model of its own (``ModelSpec`` with ``base`` = the model's key, ``precision``
and ``quality_score``; key ``minilm:1@int8``), as the live catalog makes one of a
``ModelVariant`` row, so the core places, routes, chooses (``control.core.variant_choice``) and
bills it as it does live. ``memory_mib`` is required (the twin does not guess a variant's
memory); ``cost_milli`` defaults to the base's scaled by the memory ratio, rounded up (the live
rule, ``control.services.variant_catalog``). Latency: profile rows already given for the
variant key (``latency.tables``/``rows`` naming ``minilm:1@int8``) are used as they are; else
the base's rows, decode and load rows are copied under the variant key with every latency x
``latency_scale`` (default 1.0; load times are copied unscaled).

``add_replica`` is the what-if change "one more replica of this model (or variant) here": the
baseline's placement plus one row, checked against the scenario's models and devices.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from control.core.latency import DecodeRow, LatencyRow
from control.core.variants import variant_key
from sim.scenario import LatencyTables

#: Keys of a declared variant besides ModelSpec's own that the twin reads.
_VARIANT_KEYS = {"precision", "memory_mib", "latency_scale", "quality_score", "cost_milli"}


class VariantError(ValueError):
    """A declared variant or an added replica the scenario cannot take; names the field."""


def expand_variants(models: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(model dicts with each declared variant as a model of its own, variant key -> (base
    key, latency scale)). ``models`` are the scenario's model dicts; they lose ``variants``."""
    out, scales = [], {}
    for raw in models:
        declared = raw.pop("variants", None) or ()
        out.append(raw)
        base = f"{raw['name']}:{raw['version']}"
        for v in declared:
            spec = _variant_dict(raw, base, v)
            scales[variant_key(base, spec["precision"])] = (
                base,
                float(v.get("latency_scale", 1.0)),
            )
            out.append(spec)
    return out, scales


def _variant_dict(base_raw: Mapping[str, Any], base: str, v: Any) -> dict[str, Any]:
    where = f"models.{base}.variants"
    if not isinstance(v, Mapping) or set(v) - _VARIANT_KEYS:
        raise VariantError(f"{where}: {v!r}: an object of {sorted(_VARIANT_KEYS)}")
    if "precision" not in v or "memory_mib" not in v:
        raise VariantError(f"{where}: {dict(v)!r}: precision and memory_mib are required")
    if not float(v.get("latency_scale", 1.0)) > 0:
        raise VariantError(f"{where}: latency_scale={v['latency_scale']!r}: must be > 0")
    out = {k: val for k, val in base_raw.items() if k != "cost_milli"}
    base_cost = int(base_raw.get("cost_milli", 1000))
    ratio = int(v["memory_mib"]) / max(1, int(base_raw["memory_mib"]))
    out.update(precision=v["precision"], base=base, memory_mib=int(v["memory_mib"]),
               quality_score=v.get("quality_score"),
               cost_milli=int(v.get("cost_milli", math.ceil(base_cost * ratio))))  # fmt: skip
    return out


def with_variant_rows(tables: LatencyTables, scales: Mapping[str, Any]) -> LatencyTables:
    """``tables`` plus, for each variant with no rows of its own, the base's rows scaled."""
    have = {r.model for r in tables.rows}
    rows, decode, loads = list(tables.rows), list(tables.decode), list(tables.loads)
    sources = list(tables.sources)
    for key, (base, scale) in scales.items():
        if key in have:
            continue
        rows += [LatencyRow(key, r.device_type, r.batch_size, r.tokens,
                            max(1, round(r.latency_us * scale)))
                 for r in tables.rows if r.model == base]  # fmt: skip
        decode += [DecodeRow(key, d.device_type, max(1, round(d.fixed_us * scale)),
                             max(0, round(d.per_seq_us * scale)))
                   for d in tables.decode if d.model == base]  # fmt: skip
        loads += [replace(x, model=key) for x in tables.loads if x.model == base]
        sources.append(f"{key}: {base}'s latency x {scale:g}")
    return LatencyTables(tuple(rows), tuple(decode), tuple(loads), tuple(sources))


def add_replica(base: Mapping[str, Any], value: Any) -> dict[str, Any]:
    """The placement section of ``base`` (a scenario dict) with one more row: ``value`` is
    ``{model_key, device_ids, replicas?, pool?}`` naming a model (or variant) key and devices
    of the scenario."""
    if not isinstance(value, Mapping) or not {"model_key", "device_ids"} <= set(value):
        raise VariantError(f"{value!r}: an object with model_key and device_ids")
    models, _ = expand_variants([dict(m) for m in base.get("models") or ()])
    keys = {_key(m) for m in models}
    if value["model_key"] not in keys:
        raise VariantError(f"model_key={value['model_key']!r}: no such model; known {sorted(keys)}")
    devices = {d["device_id"] for d in base.get("devices") or ()}
    ids = list(value["device_ids"]) if isinstance(value["device_ids"], list) else []
    if not ids or set(ids) - devices:
        raise VariantError(
            f"device_ids={value['device_ids']!r}: devices of the scenario, one at least"
        )
    row = {"model_key": value["model_key"], "device_ids": ids,
           "replicas": int(value.get("replicas", 1)), "pool": value.get("pool", "hot")}  # fmt: skip
    return {"placement": [*(dict(p) for p in base.get("placement") or ()), row]}


def _key(m: Mapping[str, Any]) -> str:
    key = f"{m['name']}:{m['version']}"
    return variant_key(key, m["precision"]) if m.get("base") else key
