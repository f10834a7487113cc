"""Which precision variant of a model runs a step: chosen per request from its quality class.

A workflow node names a base model (``minilm:1``); the catalog may hold precision variants of
it (``minilm:1@int8``, a ``ModelSpec`` with ``base`` set and a measured ``quality_score``).
When the routing phase routes a step of such a node (``lifecycle.served_key``), this module
picks the model key that serves it and records why on the step (``QueuedStep.variant``); the
dispatched ``BatchItem`` carries the decision, so the run record and the ledger name the
variant that ran.

The quality class: the request's own (``Request.quality``), else its tenant's, else its
priority class mapped by ``VariantChoiceConfig.class_quality``. Among the base and its
variants ("options"), ordered from most exact (the base, then by measured score, unmeasured
last) to cheapest (least memory):

- ``exact`` prefers the base; only the base or a variant whose measured score is at least
  ``exact_quality_floor`` may serve it. When none of those has a replica, the base is chosen
  (a cold load, or a wait) and the reason names the floor.
- ``balanced`` prefers the cheapest variant measured at least ``balanced_quality_floor``
  (the base when none is); ``fast`` prefers the cheapest variant of all.
- Upgrade: when the preferred option has no replica, the nearest more exact option that has
  one serves the step (always allowed). With none, the preferred one is loaded.
- Degrade: only when the tenant allows it (``TenantSpec.allow_degrade``) and the preferred
  option is saturated (its predicted queue delay exceeds ``degrade_wait_us``): the cheaper
  placed option with the least predicted wait, if it waits less; never below the floor for
  ``exact``.
"""

from __future__ import annotations

from collections.abc import Sequence

from control.core.values import value
from control.core.variant_config import VariantChoiceConfig

PREFERRED, UPGRADE, DEGRADE = "preferred", "upgrade", "degrade"


@value
class VariantOption:
    """One model key that may serve a node: the base (``score`` 1.0) or one of its variants
    (``score`` None: quality not measured). ``placed``: it has a replica that takes work;
    ``wait_us``: the predicted queue delay of its least loaded replica."""

    key: str
    precision: str
    score: float | None
    memory_mib: int
    placed: bool
    wait_us: int = 0
    is_base: bool = False


@value
class VariantDecision:
    """The key a step runs on (``ran``), the one its class preferred (``wanted``), how they
    relate (``kind``: preferred, upgrade or degrade) and why, in words."""

    wanted: str
    ran: str
    kind: str
    reason: str
    quality: str


def exactness_order(options: Sequence[VariantOption]) -> list[VariantOption]:
    """Most exact first: the base, then measured variants by score, then unmeasured ones
    (ties: more memory first, then key)."""
    return sorted(options, key=lambda o: (not o.is_base, o.score is None,
                                          -(o.score or 0.0), -o.memory_mib, o.key))  # fmt: skip


def acceptable(cfg: VariantChoiceConfig, quality: str, o: VariantOption) -> bool:
    """Whether ``o`` may serve a request of class ``quality`` at all."""
    if quality != "exact" or o.is_base:
        return True
    return o.score is not None and o.score >= cfg.exact_quality_floor


def preferred(
    cfg: VariantChoiceConfig, quality: str, ordered: list[VariantOption]
) -> VariantOption:
    """The option a class prefers (``ordered``: most exact first, the base among them)."""
    base = ordered[0]
    if quality == "exact":
        return base
    if quality == "balanced":
        pool = [o for o in ordered
                if o.is_base or (o.score is not None and o.score >= cfg.balanced_quality_floor)]  # fmt: skip
    else:
        pool = ordered
    return min(pool, key=lambda o: (o.memory_mib, ordered.index(o)))


def choose(
    cfg: VariantChoiceConfig, quality: str, allow_degrade: bool, options: Sequence[VariantOption]
) -> VariantDecision:
    """The option that serves a step of class ``quality`` (see the module's docstring)."""
    ordered = exactness_order(options)
    want = preferred(cfg, quality, ordered)
    if not want.placed:
        return _without_replica(cfg, quality, want, ordered)
    if want.wait_us <= cfg.degrade_wait_us:
        return VariantDecision(want.key, want.key, PREFERRED, f"{quality}: {want.key}", quality)
    busy = f"{want.key} is saturated (predicted wait {want.wait_us // 1000} ms > " \
           f"{cfg.degrade_wait_us // 1000} ms)"  # fmt: skip
    if not allow_degrade:
        why = f"{quality}: {busy}; the tenant does not allow degrading, so it waits"
        return VariantDecision(want.key, want.key, PREFERRED, why, quality)
    cheaper = [o for o in ordered if o.placed and o.memory_mib < want.memory_mib
               and acceptable(cfg, quality, o) and o.wait_us < want.wait_us]  # fmt: skip
    if not cheaper:
        why = f"{quality}: {busy}; no cheaper variant allowed for {quality} waits less"
        return VariantDecision(want.key, want.key, PREFERRED, why, quality)
    best = min(cheaper, key=lambda o: (o.wait_us, o.memory_mib, o.key))
    why = (f"{quality}: {busy}; the tenant allows degrading: ran on {best.key} "
           f"(predicted wait {best.wait_us // 1000} ms{_floor_note(cfg, quality, best)})")  # fmt: skip
    return VariantDecision(want.key, best.key, DEGRADE, why, quality)


def _without_replica(
    cfg: VariantChoiceConfig, quality: str, want: VariantOption, ordered: list[VariantOption]
) -> VariantDecision:
    """The preferred option has no replica: the nearest more exact one that has (for exact,
    any placed option at or above the floor), else the preferred one itself (loaded)."""
    ups = [o for o in reversed(ordered[: ordered.index(want)]) if o.placed]
    if quality == "exact":
        ups = [o for o in ordered if o.placed and acceptable(cfg, quality, o)]
    if ups:
        o = ups[0]
        why = (f"{quality}: {want.key} has no replica; upgraded to {o.key}"
               f"{_floor_note(cfg, quality, o)}")  # fmt: skip
        return VariantDecision(want.key, o.key, UPGRADE, why, quality)
    why = f"{quality}: {want.key} has no replica; it is loaded (or waited for)"
    if quality == "exact":
        below = [f"{o.key} {'unmeasured' if o.score is None else f'{o.score:.3f}'}"
                 for o in ordered if o.placed and not acceptable(cfg, quality, o)]  # fmt: skip
        why = (f"exact: no replica of {want.key} or of a variant with measured quality >= "
               f"the floor {cfg.exact_quality_floor:g}"
               + (f" (below it: {', '.join(below)})" if below else "") + "; waits for one")  # fmt: skip
    return VariantDecision(want.key, want.key, PREFERRED, why, quality)


def _floor_note(cfg: VariantChoiceConfig, quality: str, o: VariantOption) -> str:
    if quality != "exact" or o.is_base:
        return ""
    return f"; quality {o.score:.3f} >= floor {cfg.exact_quality_floor:g}"
