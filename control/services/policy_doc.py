"""The core's policies as a JSON document, and changes to it checked field by field.

The document mirrors :class:`~control.core.context.CoreConfig` (nested configs as objects; the
batching and routing strategies' configs as the objects of their registered config types) plus
the tenancy half's ``fair_share`` and ``fair_share_config``. :func:`merge` applies a partial
document (what ``PATCH /admin/policies`` and ``LEGATO_CORE_POLICIES`` give) to the policies in
force: every key must be a field (or the change is refused naming it and the known ones),
every value of its declared type (strictly: ``"7"`` is not an integer), and each config's own
checks hold. Changing a strategy's name without its config takes that strategy's defaults.
Which fields may change on a running core is :mod:`control.services.policy_fields`' table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from control.core.batching.registry import BATCHING
from control.core.context import CoreConfig
from control.core.registry import PolicyRegistry
from control.core.routing.registry import ROUTING
from control.core.tenancy.fairshare.registry import FAIR_SHARE_POLICIES
from control.services.field_types import field_types

#: The strategy fields of the document: name field -> (its config field, its registry).
STRATEGIES: dict[str, tuple[str, PolicyRegistry[Any]]] = {
    "batching": ("batching_config", BATCHING),
    "routing": ("routing_config", ROUTING),
    "fair_share": ("fair_share_config", FAIR_SHARE_POLICIES),
}


class PolicyFieldError(ValueError):
    """A change the policies cannot take: ``field`` is its dotted path in the document."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Policies:
    """What the live core runs: its configuration and the fair-share policy."""

    core: CoreConfig
    fair_share: str = "vtc"
    fair_share_config: Any = None


def plain(value: Any) -> Any:
    """JSON values of a config (dataclasses and mappings as objects, tuples as lists)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    return value


def document(policies: Policies) -> dict[str, Any]:
    """The policies as one JSON object (the shape :func:`merge` takes)."""
    doc = plain(policies.core)
    doc["fair_share"] = policies.fair_share
    doc["fair_share_config"] = plain(
        FAIR_SHARE_POLICIES.config_for(policies.fair_share, policies.fair_share_config)
    )
    return doc


def merge(current: Policies, changes: Mapping[str, Any], allowed: frozenset[str]) -> Policies:
    """``current`` with ``changes`` applied; only top-level fields in ``allowed`` may change.
    Raises PolicyFieldError naming the first bad field (its path and what is wrong)."""
    if not isinstance(changes, Mapping):
        raise PolicyFieldError("body", f"expected an object of fields, got {changes!r}")
    known = [f.name for f in dataclasses.fields(CoreConfig)] + ["fair_share", "fair_share_config"]
    for key in changes:
        if key not in known:
            raise PolicyFieldError(key, f"unknown field; known: {', '.join(known)}")
        if key not in allowed:
            raise PolicyFieldError(key, "cannot change on a running core (fixed at start: "
                                   "set it in LEGATO_CORE_POLICIES and restart)")  # fmt: skip
    values = {f.name: getattr(current.core, f.name) for f in dataclasses.fields(CoreConfig)}
    values.update(fair_share=current.fair_share, fair_share_config=current.fair_share_config)
    hints = field_types(CoreConfig)
    for key, change in changes.items():
        if key in STRATEGIES:
            values[key] = _leaf(key, str, change)
        elif key.endswith("_config"):
            continue  # after the names: the config type follows the strategy
        elif dataclasses.is_dataclass(values[key]):
            values[key] = _nested(key, values[key], change)
        else:
            values[key] = _leaf(key, hints[key], change)
    for name, (cfg, registry) in STRATEGIES.items():
        values[cfg] = _strategy_config(name, values[name], cfg, registry, current, changes)
    fair, fair_config = values.pop("fair_share"), values.pop("fair_share_config")
    try:
        core = CoreConfig(**values)
    except (ValueError, TypeError) as exc:
        raise PolicyFieldError(_named(exc, list(changes)), str(exc)) from None
    return Policies(core, fair, fair_config)


def _strategy_config(name_field: str, name: str, cfg: str, registry: PolicyRegistry[Any],
                     current: Policies, changes: Mapping[str, Any]) -> Any:  # fmt: skip
    """The config object of strategy ``name``: the current one while the strategy and its
    type stay, else the strategy's defaults; with the changes of ``changes[cfg]`` applied."""
    if name not in registry:
        raise PolicyFieldError(name_field, f"unknown {registry.family} {name!r}; known: "
                               f"{', '.join(registry.names())}")  # fmt: skip
    kept = getattr(current.core, cfg) if hasattr(current.core, cfg) else current.fair_share_config
    base = registry.config_for(name, None)
    if kept is not None and type(kept) is type(base) and name == _current_name(current, name_field):
        base = kept
    if cfg not in changes:
        return base
    return _nested(cfg, base, changes[cfg])


def _current_name(current: Policies, name_field: str) -> str:
    return current.fair_share if name_field == "fair_share" else getattr(current.core, name_field)


def _nested(path: str, config: Any, change: Any) -> Any:
    """``config`` (a frozen dataclass) with the fields of ``change`` replaced, checked."""
    if not isinstance(change, Mapping):
        raise PolicyFieldError(path, f"expected an object of {type(config).__name__} fields, "
                               f"got {change!r}")  # fmt: skip
    names = [f.name for f in dataclasses.fields(config)]
    hints = field_types(type(config))
    values = {}
    for key, value in change.items():
        if key not in names:
            raise PolicyFieldError(f"{path}.{key}", f"unknown field of {type(config).__name__}; "
                                   f"known: {', '.join(names)}")  # fmt: skip
        values[key] = _leaf(f"{path}.{key}", hints[key], value)
    try:
        return dataclasses.replace(config, **values)
    except (ValueError, TypeError) as exc:
        raise PolicyFieldError(f"{path}.{_named(exc, list(values))}", str(exc)) from None


def _leaf(path: str, hint: Any, value: Any) -> Any:
    try:
        return TypeAdapter(hint).validate_python(value, strict=True)
    except ValidationError as exc:
        raise PolicyFieldError(path, exc.errors()[0]["msg"] + f", got {value!r}") from None


def _named(exc: Exception, keys: list[str]) -> str:
    """The changed key a config's own check names (its message says which), else the first."""
    text = str(exc)
    return next((k for k in keys if k in text), keys[0] if keys else "body")
