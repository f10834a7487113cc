"""API keys: the plaintext is returned once and stored nowhere; verification and revocation."""

from __future__ import annotations

import re

import pytest

from control.services import Services
from control.services.errors import Conflict, DomainError, UnknownReference, ValidationError
from tests.services.builders import ACTOR, World, all_cell_text, row_counts

KEY_FORMAT = re.compile(r"^lg_([0-9a-f]{12})_([A-Za-z0-9_-]{40,})$")


def test_issued_key_has_the_documented_format_and_is_stored_only_as_a_digest(
    services: Services, world: World, session_factory
) -> None:
    issued = services.api_keys.create_key(ACTOR, world.tenant, label="ci")
    match = KEY_FORMAT.match(issued.plaintext)
    assert match is not None, issued.plaintext
    prefix, secret = match.groups()
    assert issued.record.prefix == prefix
    assert issued.record.key_digest == services.api_keys.digest(issued.plaintext)
    services.api_keys.verify_key(issued.plaintext)  # touches the row again
    cells = all_cell_text(session_factory)
    assert not any(secret in cell for cell in cells)
    assert not any(issued.plaintext in cell for cell in cells)


def test_two_keys_never_share_prefix_or_secret(services: Services, world: World) -> None:
    keys = [services.api_keys.create_key(ACTOR, world.tenant).plaintext for _ in range(5)]
    assert len({k.split("_")[1] for k in keys}) == 5
    assert len(set(keys)) == 5


def test_verify_accepts_the_key_and_stamps_last_use(services: Services, world: World) -> None:
    issued = services.api_keys.create_key(ACTOR, world.tenant)
    assert services.api_keys.get(issued.record.id).last_used_at is None
    check = services.api_keys.verify_key(issued.plaintext)
    assert (check.valid, check.tenant_id, check.key_id) == (True, world.tenant, issued.record.id)
    first_use = services.api_keys.get(issued.record.id).last_used_at
    assert first_use is not None
    services.api_keys.verify_key(issued.plaintext)
    assert services.api_keys.get(issued.record.id).last_used_at > first_use


@pytest.mark.parametrize(
    ("mangle", "reason"),
    [
        (lambda k: k[:-1] + ("A" if k[-1] != "A" else "B"), "wrong secret"),
        (lambda k: "lg_000000000000_" + k.split("_", 2)[2], "no key with prefix"),
        (lambda k: k.replace("lg_", "sk_", 1), "malformed"),
        (lambda k: "lg_only-two-parts", "malformed"),
        (lambda k: "", "malformed"),
    ],
)
def test_verify_refuses_altered_keys_with_a_reason(
    services: Services, world: World, mangle, reason: str
) -> None:
    issued = services.api_keys.create_key(ACTOR, world.tenant)
    check = services.api_keys.verify_key(mangle(issued.plaintext))
    assert not check.valid and reason in check.reason and check.tenant_id is None
    assert services.api_keys.get(issued.record.id).last_used_at is None


def test_a_key_issued_under_another_pepper_does_not_verify(
    services: Services, world: World, session_factory, clock
) -> None:
    from control.services.api_keys import ApiKeyService

    issued = services.api_keys.create_key(ACTOR, world.tenant)
    other = ApiKeyService(session_factory, clock, pepper=b"another-secret")
    assert not other.verify_key(issued.plaintext).valid


def test_revoked_key_no_longer_verifies_and_revocation_is_audited(
    services: Services, world: World
) -> None:
    issued = services.api_keys.create_key(ACTOR, world.tenant)
    revoked = services.api_keys.revoke_key(ACTOR, issued.record.id)
    assert revoked.revoked_at is not None
    check = services.api_keys.verify_key(issued.plaintext)
    assert not check.valid and "revoked" in check.reason
    assert services.api_keys.revoke_key(ACTOR, issued.record.id) == revoked  # idempotent
    trail = services.audit.list(entity_type="api_key", entity_id=issued.record.id)
    assert [a.action for a in trail] == ["create", "revoke"]
    assert trail[1].before["revoked_at"] is None and trail[1].after["revoked_at"]
    assert all("key_digest" not in (a.after or {}) for a in trail)


def test_keys_of_a_suspended_tenant_do_not_verify(services: Services, world: World) -> None:
    issued = services.api_keys.create_key(ACTOR, world.tenant)
    services.tenants.update(ACTOR, world.tenant, status="suspended")
    check = services.api_keys.verify_key(issued.plaintext)
    assert not check.valid and "suspended" in check.reason


@pytest.mark.parametrize(
    ("tenant", "label", "error", "field"),
    [
        (987654, "", UnknownReference, "tenant_id"),
        (0, "", ValidationError, "tenant_id"),
        ("acme", "", ValidationError, "tenant_id"),
        (None, "", ValidationError, "tenant_id"),
        ("world", 42, ValidationError, "label"),
    ],
)
def test_key_refused_for_bad_tenant_or_label_writes_nothing(
    services: Services, world: World, session_factory, tenant, label, error, field: str
) -> None:
    tenant_id = world.tenant if tenant == "world" else tenant
    before = row_counts(session_factory)
    with pytest.raises(error, match=field):
        services.api_keys.create_key(ACTOR, tenant_id, label=label)
    assert row_counts(session_factory) == before


def test_key_refused_for_a_retired_tenant(services: Services, world: World, session_factory):
    services.tenants.retire(ACTOR, world.tenant)
    before = row_counts(session_factory)
    with pytest.raises(ValidationError, match="retired"):
        services.api_keys.create_key(ACTOR, world.tenant)
    assert row_counts(session_factory) == before


def test_keys_are_not_created_generically_nor_deleted(services: Services, world: World) -> None:
    with pytest.raises(DomainError, match="create_key"):
        services.api_keys.create(ACTOR, tenant_id=world.tenant, prefix="x", key_digest="y")
    issued = services.api_keys.create_key(ACTOR, world.tenant)
    with pytest.raises(Conflict, match="revoke"):
        services.api_keys.delete(ACTOR, issued.record.id)
    relabelled = services.api_keys.update(ACTOR, issued.record.id, label="prod")
    assert relabelled.label == "prod"
    with pytest.raises(ValidationError, match="key_digest"):
        services.api_keys.update(ACTOR, issued.record.id, key_digest="0" * 64)
