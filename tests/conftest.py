"""Shared database fixtures: every database test runs on SQLite and on PostgreSQL.

PostgreSQL comes from ``LEGATO_TEST_POSTGRES_URL`` (an admin URL; a fresh database with a random
name is created for the session and dropped after) or, failing that, from a throwaway cluster
started here with the server binaries under /usr/lib/postgresql (as user ``postgres``, on a free
port, in a temporary folder, stopped at the end). When neither works the PostgreSQL cases skip
with the reason. The schema is migrated once per backend per session; each test then gets a
copy of the migrated SQLite file or a truncated PostgreSQL database.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from control import native
from db import migrate
from db.base import Base
from db.session import make_engine, make_session_factory, normalize_url

# The suite runs the compiled core when a current native build exists (``make test`` builds it
# first), as the ``legato`` command does: activated before any test imports the core (nothing
# imported above does).
native.install()

BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _as_postgres(*args: str) -> subprocess.CompletedProcess:
    runner = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    return subprocess.run(runner + list(args), capture_output=True, text=True, timeout=60)


class _Cluster:
    """A throwaway PostgreSQL cluster in a temporary folder."""

    def __init__(self) -> None:
        bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        if not bins:
            raise RuntimeError("no PostgreSQL server binaries under /usr/lib/postgresql")
        self.bin = Path(bins[-1]).parent
        self.root = Path(tempfile.mkdtemp(prefix="legato-pg-"))
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        self.data = self.root / "data"
        self.port = _free_port()

    def start(self) -> str:
        done = _as_postgres(
            str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres"
        )
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stderr.strip()[-400:]}")
        options = f"-p {self.port} -F -k {self.root} -c listen_addresses=127.0.0.1"
        done = _as_postgres(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options,
            "-l", str(self.root / "log"), "-w", "start",
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl start failed: {done.stderr.strip()[-400:]}")
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def stop(self) -> None:
        _as_postgres(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[str]:
    """An admin URL of a PostgreSQL server, or a skip saying why there is none."""
    given = os.environ.get("LEGATO_TEST_POSTGRES_URL")
    if given:
        yield normalize_url(given)
        return
    try:
        cluster = _Cluster()
        url = cluster.start()
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        if os.environ.get("LEGATO_REQUIRE_POSTGRES"):
            # CI sets this: there the PostgreSQL cases must run, never quietly skip.
            pytest.fail(f"PostgreSQL required (LEGATO_REQUIRE_POSTGRES) but unavailable: {exc}")
        pytest.skip(f"PostgreSQL unavailable: set LEGATO_TEST_POSTGRES_URL ({exc})")
    try:
        yield url
    finally:
        cluster.stop()


def _admin(admin_url: str, statement: str) -> None:
    engine = make_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text(statement))
    finally:
        engine.dispose()


@pytest.fixture(scope="session")
def pg_database_factory(pg_admin_url: str) -> Iterator:
    """Creates empty PostgreSQL databases with random names; drops them all at the end."""
    created: list[str] = []

    def create() -> str:
        name = f"legato_test_{uuid.uuid4().hex[:12]}"
        _admin(pg_admin_url, f'CREATE DATABASE "{name}"')
        created.append(name)
        return make_url(pg_admin_url).set(database=name).render_as_string(hide_password=False)

    yield create
    for name in created:
        _admin(pg_admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def _sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "legato.db"
    migrate.upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture(scope="session")
def _pg_migrated(pg_database_factory) -> str:
    url = pg_database_factory()
    migrate.upgrade(url)
    return url


def _truncate_all(url: str) -> None:
    tables = ", ".join(f'"{t.name}"' for t in Base.metadata.sorted_tables)
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text(f"TRUNCATE {tables} RESTART IDENTITY CASCADE"))
    finally:
        engine.dispose()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The backend of this test case: "sqlite" or "postgresql"."""
    return request.param


@pytest.fixture
def db_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """URL of a migrated, empty database on each backend (for tests that commit for real).

    On PostgreSQL the database is shared with the rolled-back ``session_factory`` cases, so it
    is emptied before and after each test that commits."""
    if backend == "sqlite":
        path = tmp_path / "legato.db"
        shutil.copyfile(request.getfixturevalue("_sqlite_template"), path)
        yield f"sqlite:///{path}"
        return
    url = request.getfixturevalue("_pg_migrated")
    _truncate_all(url)
    yield url
    _truncate_all(url)


@pytest.fixture(params=BACKENDS)
def empty_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """URL of a database with no schema at all, on each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'empty' / 'legato.db'}"
    return request.getfixturevalue("pg_database_factory")()


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    eng = make_engine(db_url)
    yield eng
    eng.dispose()


@pytest.fixture(scope="session")
def _pg_engine(_pg_migrated: str) -> Iterator[Engine]:
    eng = make_engine(_pg_migrated)
    yield eng
    eng.dispose()


@pytest.fixture
def session_factory(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[sessionmaker[Session]]:
    """Sessions on a migrated, empty database.

    SQLite: a fresh copy of the migrated file, with real commits. PostgreSQL: one connection
    inside an outer transaction that is rolled back after the test; each ``session_scope``
    commits a SAVEPOINT in it. That keeps PostgreSQL cases cheap (no truncation, no fsync)
    while the SQLite cases and the ``db_url`` tests exercise real commits.
    """
    if backend == "sqlite":
        path = tmp_path / "legato.db"
        shutil.copyfile(request.getfixturevalue("_sqlite_template"), path)
        eng = make_engine(f"sqlite:///{path}")
        yield make_session_factory(eng)
        eng.dispose()
        return
    pg_engine: Engine = request.getfixturevalue("_pg_engine")
    with pg_engine.connect() as conn:
        outer = conn.begin()
        yield sessionmaker(
            bind=conn, join_transaction_mode="create_savepoint", expire_on_commit=False
        )
        outer.rollback()


@pytest.fixture(scope="module", params=BACKENDS)
def module_db_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """URL of a migrated, empty database of its own for one test module, on each backend.

    For the live gateway tests (tests/support/live_gateway.py): SQLite gets a copy of the
    migrated template; PostgreSQL a fresh database, migrated here and dropped when the module
    ends, so modules never see each other's rows. Skips without PostgreSQL, fails instead
    when ``LEGATO_REQUIRE_POSTGRES`` is set (see ``pg_admin_url``)."""
    if request.param == "sqlite":
        path = tmp_path_factory.mktemp("module-db") / "legato.db"
        shutil.copyfile(request.getfixturevalue("_sqlite_template"), path)
        yield f"sqlite:///{path}"
        return
    admin_url = request.getfixturevalue("pg_admin_url")
    name = f"legato_mod_{uuid.uuid4().hex[:12]}"
    _admin(admin_url, f'CREATE DATABASE "{name}"')
    try:
        url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)
        migrate.upgrade(url)
        yield url
    finally:
        _admin(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
