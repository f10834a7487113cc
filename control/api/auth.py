"""Authentication: tenant API keys and the admin credential, both as ``Authorization: Bearer``.

Callers get one generic 401 body whatever went wrong (missing, malformed, unknown, wrong secret,
revoked, tenant suspended) so that a probe learns nothing about which keys exist; the detailed
reason from ``verify_key`` is kept for the server log only. The one exception is an expired
key presented with its right secret: its 401 says that it expired (and when), since only the
key's holder can get that answer. The admin token is compared in constant time. A verified key
is cached for a short TTL so that a hot path does not write ``last_used_at`` on every call, but
never past its expiry; revoking a key or changing a tenant through this API clears the cache at
once.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool
from starlette.requests import HTTPConnection

from control.api.errors import ApiError
from control.api.state import Gateway, gateway
from control.clock import monotonic, utcnow

log = logging.getLogger(__name__)

ADMIN_ACTOR = "admin"
_BEARER_HELP = "A tenant API key or the admin token."


@dataclass(frozen=True)
class Principal:
    """Who is calling. ``actor`` is what audit records name; tenants carry their key prefix."""

    kind: str  # "admin" | "tenant"
    actor: str
    tenant_id: int | None = None
    tenant_name: str | None = None
    key_id: int | None = None
    #: When the tenant's key stops working (None: never); a cached principal is not used after.
    expires_at: datetime | None = None

    @property
    def is_admin(self) -> bool:
        return self.kind == "admin"


class KeyCache:
    """Verified keys by digest of the presented text, each trusted until its expiry."""

    def __init__(self, ttl_s: float) -> None:
        self._ttl = ttl_s
        self._entries: dict[str, tuple[Principal, float]] = {}
        self._flights: dict[str, asyncio.Future[Principal]] = {}

    @staticmethod
    def _slot(plaintext: str) -> str:
        return hashlib.sha256(plaintext.encode()).hexdigest()

    def get(self, plaintext: str, now: float) -> Principal | None:
        found = self._entries.get(self._slot(plaintext))
        if found is None or found[1] <= now:
            return None
        return found[0]

    def put(self, plaintext: str, principal: Principal, now: float) -> None:
        if self._ttl > 0:
            self._entries[self._slot(plaintext)] = (principal, now + self._ttl)

    def forget(self, plaintext: str) -> None:
        """Forget one key's verification (it expired while cached)."""
        self._entries.pop(self._slot(plaintext), None)

    def clear(self) -> None:
        """Forget every verification (after a revocation or a tenant change)."""
        self._entries.clear()

    def in_flight(self, plaintext: str) -> asyncio.Future[Principal] | None:
        """The verification of this key now under way, if any."""
        return self._flights.get(self._slot(plaintext))

    def begin(self, plaintext: str) -> asyncio.Future[Principal]:
        future: asyncio.Future[Principal] = asyncio.get_running_loop().create_future()
        self._flights[self._slot(plaintext)] = future
        return future

    def end(
        self,
        plaintext: str,
        future: asyncio.Future[Principal],
        *,
        principal: Principal | None = None,
        error: BaseException | None = None,
    ) -> None:
        """Finish a flight: waiters get the principal or the same error."""
        self._flights.pop(self._slot(plaintext), None)
        if error is not None:
            future.set_exception(error)
            future.exception()  # retrieved here: no "never retrieved" warning without waiters
        else:
            future.set_result(principal)  # type: ignore[arg-type]


def unauthorized(
    detail: str = "missing or invalid credentials: send Authorization: Bearer <key>",
) -> ApiError:
    return ApiError(401, "unauthorized", detail, headers={"WWW-Authenticate": "Bearer"})


def expired(at: datetime) -> ApiError:
    """The 401 of a key presented with its right secret after its expiry."""
    when = at.isoformat(timespec="seconds")
    return unauthorized(f"this API key expired at {when}: ask for a new key")


def _is_admin(gw: Gateway, token: str) -> bool:
    admin = gw.config.admin_token
    return admin is not None and hmac.compare_digest(token.encode(), admin.encode())


async def _tenant_principal(gw: Gateway, token: str) -> Principal:
    now = monotonic()
    cached = gw.key_cache.get(token, now)
    if cached is not None and (cached.expires_at is None or utcnow() < cached.expires_at):
        return cached
    if cached is not None:  # expired while cached: verify again, which refuses it
        gw.key_cache.forget(token)
    # Single flight: concurrent first calls with one key share one verification (one database
    # write of last_used_at instead of one per caller, which would contend for the lock).
    flight = gw.key_cache.in_flight(token)
    if flight is not None:
        return await asyncio.shield(flight)
    future = gw.key_cache.begin(token)
    try:
        principal = await _verify(gw, token, now)
    except BaseException as exc:
        gw.key_cache.end(token, future, error=exc)
        raise
    gw.key_cache.end(token, future, principal=principal)
    return principal


async def _verify(gw: Gateway, token: str, now: float) -> Principal:
    check = await run_in_threadpool(gw.services.api_keys.verify_key, token)
    if not check.valid or check.tenant_id is None:
        log.info("refused credential: %s", check.reason)
        raise unauthorized() if check.expires_at is None else expired(check.expires_at)
    tenant = await run_in_threadpool(gw.services.tenants.get, check.tenant_id)
    prefix = token.split("_", 2)[1]
    principal = Principal(
        kind="tenant",
        actor=f"tenant:{tenant.name}/key:{prefix}",
        tenant_id=tenant.id,
        tenant_name=tenant.name,
        key_id=check.key_id,
        expires_at=check.expires_at,
    )
    gw.key_cache.put(token, principal, now)
    return principal


async def authenticate(
    request: HTTPConnection, creds: HTTPAuthorizationCredentials | None
) -> Principal:
    """The caller of ``request`` (an HTTP request or a WebSocket) presenting ``creds``: the
    admin or a tenant; raises the generic 401 for anything else."""
    if creds is None or creds.scheme.lower() != "bearer" or not creds.credentials:
        raise unauthorized()
    gw = gateway(request)
    if _is_admin(gw, creds.credentials):
        return Principal(kind="admin", actor=ADMIN_ACTOR)
    return await _tenant_principal(gw, creds.credentials)


def _anyone(principal: Principal) -> None:
    """The admin or a tenant: any valid credential."""


def _admin_only(principal: Principal) -> None:
    if not principal.is_admin:
        raise ApiError(403, "forbidden", "this route needs the admin credential")


def _tenant_only(principal: Principal) -> None:
    if principal.is_admin:
        raise ApiError(403, "forbidden", "this route needs a tenant API key, not the admin token")


class PrincipalBearer(HTTPBearer):
    """A route's caller: the ``Authorization: Bearer`` credential resolved to a Principal and
    checked by ``allow`` (which raises 403 for a valid credential the route does not take).

    One dependency, not a function depending on an ``HTTPBearer``: FastAPI solves every level
    of a dependency chain separately (path, query, header and cookie parameters, a cache key,
    a response object each), which cost tens of microseconds on every call of the hot routes.
    Being the ``HTTPBearer`` scheme itself (same scheme name and model), it puts the very same
    security requirement into the OpenAPI document. Missing, malformed and non-bearer
    credentials get the one generic 401 (never FastAPI's own 403).
    """

    def __init__(self, allow: Callable[[Principal], None]) -> None:
        super().__init__(auto_error=False, scheme_name="HTTPBearer", description=_BEARER_HELP)
        self._allow = allow

    async def __call__(self, request: HTTPConnection) -> Principal:  # type: ignore[override]
        principal = await authenticate(request, await super().__call__(request))
        self._allow(principal)
        return principal


#: The admin or a tenant; 401 (one generic body) for anything else.
any_principal = PrincipalBearer(_anyone)
#: Admin routes: a tenant key is a valid credential but not allowed here (403).
require_admin = PrincipalBearer(_admin_only)
#: Inference routes spend a tenant's quota, so they need a tenant key (403 for admin).
require_tenant = PrincipalBearer(_tenant_only)
