"""Fixtures of the console tests: one real API (demo fleet on SQLite) served on a loopback
port for the whole module, and AppTest instances of the console signed in to it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.stack import Served, build_app, seed, serve_in_thread

ADMIN_TOKEN = "console-admin-token-0123456789"
MAIN = Path(__file__).resolve().parents[2] / "app" / "main.py"


@pytest.fixture(scope="session")
def api_db_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The seeded SQLite database under :func:`api` (for facts no admin route writes)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('console') / 'legato.db'}"
    seed(url)
    return url


@pytest.fixture(scope="session")
def api(api_db_url: str) -> Iterator[Served]:
    """The real admin API over a seeded SQLite database (no live runtime, the twin's what-if
    engine in worker processes)."""
    served = serve_in_thread(build_app(api_db_url, ADMIN_TOKEN))
    yield served
    served.stop()


@pytest.fixture
def console(api: Served, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    """The console, configured for the test API with no stored credential (sign in first)."""
    monkeypatch.setenv("LEGATO_API_URL", api.url)
    monkeypatch.delenv("LEGATO_ADMIN_TOKEN", raising=False)
    monkeypatch.setenv("LEGATO_VAR_DIR", "/nonexistent-legato-var")
    at = AppTest.from_file(str(MAIN), default_timeout=30)
    return at


def signed_in(at: AppTest) -> AppTest:
    at.run()
    at.text_input(key="sign_in_token").input(ADMIN_TOKEN)
    at.button[0].click().run()
    assert not at.exception, at.exception
    return at


def open_page(at: AppTest, page: str) -> AppTest:
    at.switch_page(f"views/{page}").run()
    assert not at.exception, [e.message for e in at.exception]
    return at
