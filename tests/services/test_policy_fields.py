"""Every field of the core's configuration is reachable: from the settings at start, and from
``PATCH /admin/policies`` on the running core where the table says so (issue 24, item 9).

The walk goes through ``CoreConfig`` (nested configs field by field, and the config of every
registered batching, routing and fair-share strategy). A field added to ``CoreConfig`` without
a row in ``control.services.policy_fields`` fails here; so does a row whose settings do not
exist, or a field the merge cannot actually set to a new value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from control.api.settings import GatewaySettings
from control.config import Settings
from control.core.context import CoreConfig
from control.services.policy_doc import STRATEGIES, Policies, PolicyFieldError, merge
from control.services.policy_fields import LIVE_FIELDS, POLICY_FIELDS
from control.wiring.live import serving_core_config
from control.wiring.policies import policies_from_settings

BASE = Policies(serving_core_config())
#: a plain field with a closed set of string values: another allowed value
OTHER_CHOICE = {
    "arrival": "critical_path",
    "exact": "balanced",
    "balanced": "fast",
    "fast": "exact",
}


def _leaves(prefix: str, value: Any) -> Iterator[tuple[str, Any]]:
    for f in dataclasses.fields(value):
        inner = getattr(value, f.name)
        if dataclasses.is_dataclass(inner):
            yield from _leaves(f"{prefix}{f.name}.", inner)
        else:
            yield f"{prefix}{f.name}", inner


def _changes() -> Iterator[tuple[str, dict[str, Any]]]:
    """(leaf path, a change setting it to a value other than the current one)."""
    configs = {cfg for cfg, _ in STRATEGIES.values()}
    for path, value in _leaves("", BASE.core):
        top, _, rest = path.partition(".")
        if top in STRATEGIES or top in configs:
            continue  # below, per registered strategy
        yield path, _nest(path, _other(value))
    for name, (cfg, registry) in STRATEGIES.items():
        for strategy in registry.names():
            yield f"{name}={strategy}", {name: strategy}
            for path, value in _leaves("", registry.config_for(strategy, None)):
                change = _nest(f"{cfg}.{path}", _other(value))
                yield f"{cfg}[{strategy}].{path}", {name: strategy, **change}


def _other(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return 1.0 if value == 0 else value * 2 if value < 0.5 else 1.0 if value != 1.0 else 2.0
    if value is None:
        return 2.5
    if isinstance(value, Mapping):
        return {"minilm-embed:1": 40_000}
    if isinstance(value, str) and value in OTHER_CHOICE:
        return OTHER_CHOICE[value]
    raise AssertionError(f"no sample for {value!r}")


def _nest(path: str, value: Any) -> dict[str, Any]:
    head, _, rest = path.partition(".")
    return {head: _nest(rest, value) if rest else value}


def _get(doc: Policies, change: Mapping[str, Any]) -> list[tuple[Any, Any]]:
    """(wanted, found) for every leaf of ``change``."""
    pairs = []
    for key, want in change.items():
        have = getattr(doc.core, key) if hasattr(doc.core, key) else getattr(doc, key)
        if isinstance(want, Mapping) and dataclasses.is_dataclass(have):
            for sub, sub_want in want.items():
                sub_have = getattr(have, sub)
                if isinstance(sub_want, Mapping) and dataclasses.is_dataclass(sub_have):
                    pairs += [(v, getattr(sub_have, k)) for k, v in sub_want.items()]
                else:
                    pairs.append((sub_want, sub_have))
        else:
            pairs.append((want, have))
    return pairs


def test_every_core_config_field_has_a_row_and_its_settings_exist() -> None:
    fields = {f.name for f in dataclasses.fields(CoreConfig)} | {"fair_share", "fair_share_config"}
    assert fields == set(POLICY_FIELDS), "CoreConfig fields without a row (or rows too many)"
    known = set(Settings.model_fields) | set(GatewaySettings.model_fields)
    for name, row in POLICY_FIELDS.items():
        assert row.settings and set(row.settings) <= known, (name, row.settings)


@pytest.mark.parametrize(("path", "change"), list(_changes()), ids=lambda v: str(v)[:60])
def test_each_field_is_set_from_the_settings_and_live_where_allowed(path, change) -> None:
    started = policies_from_settings(Settings(core_policies=change), BASE.core)
    assert all(w == h for w, h in _get(started, change)), (path, _get(started, change))
    top = next(iter(change))
    if all(k in LIVE_FIELDS for k in change):
        live = merge(BASE, change, LIVE_FIELDS)
        assert all(w == h for w, h in _get(live, change)), (path, _get(live, change))
    else:
        with pytest.raises(PolicyFieldError, match="fixed at start") as err:
            merge(BASE, change, LIVE_FIELDS)
        assert err.value.field == top


def test_the_named_settings_reach_the_core() -> None:
    settings = Settings(batching="size_delay", batching_max_delay_s=0.02, fair_share="fcfs")
    policies = policies_from_settings(settings, BASE.core)
    assert policies.core.batching == "size_delay" and policies.fair_share == "fcfs"
    assert policies.core.batching_config.max_queue_delay_s == 0.02


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        ({"batching": "nope"}, "batching", "known: adaptive, queue_building, size_delay"),
        ({"fair_share": "lottery"}, "fair_share", "known: fcfs, rate_limit, vtc"),
        ({"batchnig": "adaptive"}, "batchnig", "known: batching"),
        ({"binding": {"dispatch_ahead_us": "7"}}, "binding.dispatch_ahead_us", "integer"),
        ({"binding": {"max_local_batches": 0}}, "binding.max_local_batches", ">= 1"),
        ({"batching_config": {"target_us": 5}}, "batching_config.target_us", "unknown field"),
        ({"stealing": 3}, "stealing", "expected an object"),
        ({"request_ids_kept_s": 5.0}, "request_ids_kept_s", "fixed at start"),
    ],
)
def test_a_bad_change_names_its_field(change, field, says) -> None:
    with pytest.raises(PolicyFieldError) as err:
        merge(BASE, change, LIVE_FIELDS)
    assert err.value.field == field and says in str(err.value), str(err.value)


def test_serving_waits_for_a_building_queue_by_default() -> None:
    """The gateway's default batching is not 'no delay' (batches stayed small at the knee):
    queue_building, bounded by a small max delay."""
    from control.wiring.gateway import live_options

    core = live_options(GatewaySettings(_env_file=None), Settings(_env_file=None)).core_config
    assert core.batching == "queue_building"
    assert 0 < core.batching_config.max_queue_delay_s <= 0.02
