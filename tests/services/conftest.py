from __future__ import annotations

import pytest
from sqlalchemy.orm import Session, sessionmaker

from control.services import Services, build_services
from tests.services.builders import StepClock, World, build_world


@pytest.fixture
def clock() -> StepClock:
    return StepClock()


@pytest.fixture
def services(session_factory: sessionmaker[Session], clock: StepClock) -> Services:
    return build_services(session_factory, clock=clock, key_pepper=b"test-pepper")


@pytest.fixture
def world(session_factory: sessionmaker[Session]) -> World:
    return build_world(session_factory)
