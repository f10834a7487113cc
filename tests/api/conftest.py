"""Fixtures of the API tests: a migrated SQLite database, the real app over it, HTTP clients
for the admin and for tenants (httpx over the ASGI app, no network)."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from control.api.app import create_app
from control.api.auth import KeyCache
from control.api.model_cache import ActiveModels
from control.api.settings import GatewayConfig
from control.services import Services, build_services
from control.services.workflow_validation import make_spec_validator
from db.session import make_engine, make_session_factory

ADMIN_TOKEN = "test-admin-token-0123456789"
PEPPER = b"api-test-pepper"
#: A one-node embedding workflow over model ``e:1`` (the cancel and regression tests' ``w``).
EMBED_SPEC = {
    "inputs": {"text": "text"},
    "outputs": {"vector": "embed.embedding"},
    "nodes": [{"id": "embed", "task": "embed", "model": "e:1"}],
    "edges": [{"from": "input.text", "to": "embed.text"}],
}


@dataclass
class Stack:
    factory: sessionmaker[Session]
    services: Services
    app: object


def build_stack(db_file: Path, template: Path, **app_kwargs) -> Stack:
    """The app over a copy of ``template``; ``model_source_roots`` (default: the settings')
    goes to the services, every other keyword to the app factory."""
    shutil.copyfile(template, db_file)
    factory = make_session_factory(make_engine(f"sqlite:///{db_file}"))
    services = build_services(
        factory, workflow_validator=make_spec_validator(factory), key_pepper=PEPPER,
        model_source_roots=app_kwargs.pop("model_source_roots", None),
    )  # fmt: skip
    config = app_kwargs.pop("config", GatewayConfig(admin_token=ADMIN_TOKEN, max_body_bytes=4096))
    app = create_app(services, config, spec_validator=make_spec_validator(factory), **app_kwargs)
    return Stack(factory, services, app)


@pytest.fixture(scope="session")
def _shared_app(tmp_path_factory: pytest.TempPathFactory, _sqlite_template: Path) -> object:
    """One app for the database-only tests (building the routes costs ~0.3 s); each test
    gives it a fresh database and fresh gateway state."""
    return build_stack(tmp_path_factory.mktemp("shared") / "legato.db", _sqlite_template).app


@pytest.fixture
def stack(db_url: str, _shared_app) -> Iterator[Stack]:
    """The shared app over a migrated, empty database of this test, on each backend
    (``db_url``: a SQLite copy, or the PostgreSQL test database emptied before and after)."""
    engine = make_engine(db_url)
    factory = make_session_factory(engine)
    validator = make_spec_validator(factory)
    services = build_services(factory, workflow_validator=validator, key_pepper=PEPPER)
    gw = _shared_app.state.gateway  # type: ignore[attr-defined]
    gw.services, gw.spec_validator = services, validator
    gw.key_cache = KeyCache(gw.config.key_cache_ttl_s)
    gw.inference = gw.whatif_engine = gw.live_config = None
    gw.models = ActiveModels()
    yield Stack(factory, services, _shared_app)
    engine.dispose()  # before db_url empties the PostgreSQL database


def client_for(app: object, token: str | None) -> httpx.AsyncClient:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
    return httpx.AsyncClient(transport=transport, base_url="http://gw", headers=headers)


@pytest.fixture
async def admin(stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(stack.app, ADMIN_TOKEN) as client:
        yield client


@pytest.fixture
async def anon(stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(stack.app, None) as client:
        yield client


async def make_tenant(admin: httpx.AsyncClient, name: str, **extra) -> tuple[int, str]:
    """Create a tenant through the API and issue it a key; returns (tenant id, plaintext)."""
    r = await admin.post("/admin/tenants", json={"name": name, **extra})
    assert r.status_code == 201, r.text
    tenant_id = r.json()["id"]
    r = await admin.post(f"/admin/tenants/{tenant_id}/keys", json={"label": "test"})
    assert r.status_code == 201, r.text
    return tenant_id, r.json()["key"]
