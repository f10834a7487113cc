"""The stored tenancy configuration reaches the core as its own TenancyConfig."""

from __future__ import annotations

from control.core.tenancy.base import QuotaSpec, TenantSpec
from control.services import Services
from control.store.tenancy_snapshot import load_tenancy_config
from db.session import session_scope
from tests.services.builders import ACTOR, World


def _config(session_factory):
    with session_scope(session_factory) as session:
        return load_tenancy_config(session)


def test_tenants_and_quotas_map_to_core_specs_by_name(
    services: Services, world: World, session_factory
) -> None:
    gone = services.tenants.create(ACTOR, name="gone", weight=9)
    services.quotas.create(ACTOR, tenant_id=world.tenant, resource="tokens_per_min", nominal=6000,
                           borrowing_limit=1000)  # fmt: skip
    services.quotas.create(ACTOR, tenant_id=gone.id, resource="tokens_per_min", nominal=1)
    services.tenants.retire(ACTOR, gone.id)
    config = _config(session_factory)
    assert config.tenants == (
        TenantSpec(tenant_id="acme", weight=2, priority_class="standard", cohort="research"),
    )
    assert config.quotas == (
        QuotaSpec("acme", "tokens_per_min", 6000, borrowing_limit=1000, lending_limit=None),
    )


def test_headroom_selectors_resolve_to_the_matching_up_devices(
    services: Services, world: World, session_factory
) -> None:
    base = {"node_id": world.node, "kind": "declared", "memory_mib": 81920, "is_real": False}
    services.devices.create(
        ACTOR, name="h0", accelerator="H100-80GB", labels={"pool": "gold"}, **base
    )
    services.devices.create(
        ACTOR, name="h1", accelerator="H100-80GB", labels={"pool": "gold"}, **base
    )
    services.devices.create(
        ACTOR, name="a0", accelerator="A10-24GB", labels={"pool": "gold"}, **base
    )
    down = services.devices.create(
        ACTOR, name="h2", accelerator="H100-80GB", labels={"pool": "gold"}, **base
    )
    services.devices.retire(ACTOR, down.id)
    services.headroom.create(ACTOR, name="gold-h100", reserved_milli=150,
                             selector={"labels": {"pool": "gold"}, "accelerator": "H100-80GB"},
                             allowed_classes=["critical"], borrowable=True)  # fmt: skip
    services.headroom.create(ACTOR, name="pinned", reserved_milli=100,
                             selector={"device_ids": [world.device]},
                             allowed_classes=["critical", "standard"], borrowable=False)  # fmt: skip
    pools = {h.reservation_id: h for h in _config(session_factory).headroom}
    assert pools["gold-h100"].device_ids == frozenset({"h0", "h1"})
    assert pools["gold-h100"].reserved_milli == 150 and pools["gold-h100"].borrowable
    assert pools["pinned"].device_ids == frozenset({"cpu0"})
    assert pools["pinned"].allowed_classes == frozenset({"critical", "standard"})
