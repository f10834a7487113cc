"""The database and the services bundle, from settings."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.orm import Session, sessionmaker

from control.services import Services, build_services
from control.services.workflow_validation import make_spec_validator
from control.services.workflows import SpecValidator
from db.session import make_engine, make_session_factory


def session_factory(database_url: str) -> sessionmaker[Session]:
    """Sessions of the database at ``database_url`` (migrated beforehand: nothing here
    changes the schema)."""
    return make_session_factory(make_engine(database_url))


def checked_services(
    factory: sessionmaker[Session], key_pepper: bytes
) -> tuple[Services, SpecValidator]:
    """Every service over ``factory``, workflow specs checked by the core's DAG validator
    over the live model catalogue (returned too: the API's spec check uses it), API-key
    digests keyed by ``key_pepper``."""
    validator = make_spec_validator(factory)
    services = build_services(factory, workflow_validator=validator, key_pepper=key_pepper)
    return services, validator


@contextmanager
def services_at(database_url: str, key_pepper: bytes = b"") -> Iterator[Services]:
    """Services over the database at ``database_url`` for one command's work; the engine's
    connections are closed when the block ends."""
    engine = make_engine(database_url)
    try:
        yield build_services(make_session_factory(engine), key_pepper=key_pepper)
    finally:
        engine.dispose()
