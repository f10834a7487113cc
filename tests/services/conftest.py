from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from control.services import Services, build_services
from tests.services.builders import StepClock, World, build_world


@pytest.fixture
def clock() -> StepClock:
    return StepClock()


@pytest.fixture
def services(session_factory: sessionmaker[Session], clock: StepClock) -> Services:
    # the service tests register local model folders under /models (nothing is read there)
    return build_services(session_factory, clock=clock, key_pepper=b"test-pepper",
                          model_source_roots=[Path("/models")])  # fmt: skip


@pytest.fixture
def world(session_factory: sessionmaker[Session]) -> World:
    return build_world(session_factory)
