"""API keys: issued once in plaintext, stored only as a keyed digest, verified in constant time.

A key reads ``lg_<prefix>_<secret>``. The prefix is public and unique (it finds the row); the
secret comes from ``secrets`` and never reaches the database, the audit log or a record.
A key may carry ``expires_at``: from then on it is refused, like a revoked one.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from control.clock import utcnow
from control.services import rules as r
from control.services.base import CrudService, Reference
from control.services.errors import Conflict, DomainError, UnknownReference, ValidationError
from control.store import records as rec
from control.store import repositories as repo

KEY_SCHEME = "lg"
_PREFIX_BYTES = 6  # 12 hex characters: collisions are retried, not expected
_SECRET_BYTES = 32


@dataclass(frozen=True)
class IssuedKey:
    """A new key: ``plaintext`` is shown to the caller once and kept nowhere."""

    record: rec.ApiKeyRecord
    plaintext: str


@dataclass(frozen=True)
class KeyCheck:
    """Outcome of verifying a presented key; ``reason`` says why a key was refused."""

    valid: bool
    reason: str
    tenant_id: int | None = None
    key_id: int | None = None
    #: When the key stops working (None: never); on a refusal, set only when the key expired
    #: (the caller proved it holds the secret, so telling it the key expired reveals nothing).
    expires_at: datetime | None = None


class ApiKeyService(CrudService[rec.ApiKeyRecord]):
    """Issue, verify and revoke keys. ``pepper`` keys the HMAC (keep it out of the database)."""

    entity = "api_key"
    repository = repo.ApiKeyRepository
    rules = (r.free_text("label"),)
    references = (Reference("tenant_id", repo.TenantRepository, "tenant"),)
    updatable = frozenset({"label"})
    audit_exclude = frozenset({"key_digest"})

    def __init__(
        self,
        factory: sessionmaker[Session],
        clock: Callable[[], datetime] = utcnow,
        pepper: bytes = b"",
    ) -> None:
        super().__init__(factory, clock)
        self._pepper = pepper

    def digest(self, plaintext: str) -> str:
        """Hex HMAC-SHA256 of a presented key under this service's pepper."""
        return hmac.new(self._pepper, plaintext.encode(), hashlib.sha256).hexdigest()

    def create(self, actor: str, **values: Any) -> rec.ApiKeyRecord:
        raise DomainError("api keys are issued with create_key, which returns the plaintext")

    def create_key(
        self, actor: str, tenant_id: int, label: str = "", expires_at: datetime | None = None
    ) -> IssuedKey:
        """Issue a key for an active tenant, refused from ``expires_at`` on (None: never; a
        naive time is UTC; a time not in the future is a ValidationError); audited as
        ``create`` (without the digest, with the expiry)."""
        if tenant_id is None:
            raise ValidationError("tenant_id", None, "is required")
        r.validate((*self.rules, r.positive("tenant_id")), {"tenant_id": tenant_id, "label": label})
        expires_at = _expiry(expires_at, self._clock())

        def work(session: Session) -> IssuedKey:
            tenant = repo.TenantRepository(session).get(tenant_id)
            if tenant is None:
                raise UnknownReference("tenant_id", tenant_id, "tenant")
            if tenant.status != "active":
                raise ValidationError("tenant_id", tenant_id, f"tenant is {tenant.status}")
            keys = repo.ApiKeyRepository(session)
            prefix = secrets.token_hex(_PREFIX_BYTES)
            while keys.find_one(prefix=prefix) is not None:
                prefix = secrets.token_hex(_PREFIX_BYTES)
            plaintext = f"{KEY_SCHEME}_{prefix}_{secrets.token_urlsafe(_SECRET_BYTES)}"
            record = keys.add(
                tenant_id=tenant_id,
                prefix=prefix,
                key_digest=self.digest(plaintext),
                label=label,
                created_at=self._clock(),
                expires_at=expires_at,
            )
            self._audit(session, actor, "create", record, None, record)
            return IssuedKey(record=record, plaintext=plaintext)

        return self._run(work, self.entity)

    def verify_key(self, plaintext: str) -> KeyCheck:
        """Check a presented key. On success records ``last_used_at``.

        The use stamp is not audited: it is telemetry written on every authenticated call,
        not a change anybody made.
        """
        parts = plaintext.split("_", 2) if isinstance(plaintext, str) else []
        if len(parts) != 3 or parts[0] != KEY_SCHEME or not parts[1] or not parts[2]:
            return KeyCheck(False, "malformed key: expected lg_<prefix>_<secret>")

        def work(session: Session) -> KeyCheck:
            keys = repo.ApiKeyRepository(session)
            found = keys.find_one(prefix=parts[1])
            if found is None:
                return KeyCheck(False, f"no key with prefix {parts[1]}")
            if not hmac.compare_digest(found.key_digest, self.digest(plaintext)):
                return KeyCheck(False, f"wrong secret for key prefix {parts[1]}")
            if found.revoked_at is not None:
                return KeyCheck(False, f"key {parts[1]} was revoked at {found.revoked_at}")
            if found.expires_at is not None and found.expires_at <= self._clock():
                return KeyCheck(False, f"key {parts[1]} expired at {found.expires_at.isoformat()}",
                                expires_at=found.expires_at)  # fmt: skip
            tenant = repo.TenantRepository(session).get(found.tenant_id)
            if tenant is None or tenant.status != "active":
                status = "gone" if tenant is None else tenant.status
                return KeyCheck(False, f"tenant of key {parts[1]} is {status}")
            keys.update(found.id, last_used_at=self._clock())
            return KeyCheck(True, "valid", tenant_id=found.tenant_id, key_id=found.id,
                            expires_at=found.expires_at)  # fmt: skip

        return self._run(work, self.entity)

    def revoke_key(self, actor: str, key_id: int) -> rec.ApiKeyRecord:
        """Revoke a key (no-op, no audit, when it is already revoked); audited as ``revoke``."""

        def work(session: Session) -> rec.ApiKeyRecord:
            before = self._require(session, key_id)
            if before.revoked_at is not None:
                return before
            after = repo.ApiKeyRepository(session).update(key_id, revoked_at=self._clock())
            self._audit(session, actor, "revoke", after, before, after)
            return after

        return self._run(work, self.entity)

    def retire(self, actor: str, id_: Any) -> rec.ApiKeyRecord:
        """Retiring a key is revoking it."""
        return self.revoke_key(actor, id_)

    def delete(self, actor: str, id_: Any) -> None:
        raise Conflict("api keys are revoked, never deleted: call revoke_key")


def _expiry(expires_at: datetime | None, now: datetime) -> datetime | None:
    """``expires_at`` as an aware UTC time (naive: taken as UTC); ValidationError unless it is
    after ``now``: a key that would be born expired is a mistake, not a key."""
    if expires_at is None:
        return None
    if not isinstance(expires_at, datetime):
        raise ValidationError("expires_at", expires_at, "must be a date and time")
    aware = expires_at.replace(tzinfo=UTC) if expires_at.tzinfo is None else expires_at
    if aware <= now:
        raise ValidationError("expires_at", expires_at.isoformat(), "must be in the future")
    return aware.astimezone(UTC)
