"""Engines and the unit-of-work scope behave the same on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.exc import IntegrityError, StatementError

from db.models import Device, Node, Tenant
from db.session import make_engine, make_session_factory, normalize_url, session_scope


def test_sqlite_engine_creates_its_folder_and_sets_pragmas(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "legato.db"
    engine = make_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as conn:
            pragmas = {
                name: conn.exec_driver_sql(f"PRAGMA {name}").scalar()
                for name in ("journal_mode", "foreign_keys", "busy_timeout")
            }
    finally:
        engine.dispose()
    assert path.parent.is_dir()
    assert pragmas == {"journal_mode": "wal", "foreign_keys": 1, "busy_timeout": 5000}


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("postgresql://u:p@h:5432/d", "postgresql+psycopg://u:p@h:5432/d"),
        ("postgres://u@h/d", "postgresql+psycopg://u@h/d"),
        ("postgresql+psycopg://u@h/d", "postgresql+psycopg://u@h/d"),
        ("sqlite:////var/x.db", "sqlite:////var/x.db"),
    ],
)
def test_plain_postgresql_urls_use_psycopg(given: str, expected: str) -> None:
    assert normalize_url(given) == expected


def _nodes(factory) -> list[str]:
    with factory() as session:
        return list(session.scalars(select(Node.name).order_by(Node.name)))


def test_session_scope_commits_on_success_and_rolls_back_on_error(engine) -> None:
    factory = make_session_factory(engine)
    with session_scope(factory) as session:
        session.add(Node(name="kept", labels={}))
    with pytest.raises(RuntimeError, match="boom"):
        with session_scope(factory) as session:
            session.add(Node(name="dropped", labels={}))
            session.flush()
            raise RuntimeError("boom")
    assert _nodes(factory) == ["kept"]


def test_a_failed_savepoint_keeps_the_rest_of_the_transaction(engine) -> None:
    factory = make_session_factory(engine)
    with session_scope(factory) as session:
        session.add(Node(name="a", labels={}))
        session.flush()
        with pytest.raises(IntegrityError):
            with session.begin_nested():
                session.add(Node(name="a", labels={}))
        session.add(Node(name="b", labels={}))
    assert _nodes(factory) == ["a", "b"]


@pytest.mark.parametrize(
    ("row", "constraint"),
    [
        (lambda: Tenant(name="t", weight=0), "weight"),
        (lambda: Tenant(name="t", weight=1, priority_class="gold"), "priority_class"),
        (lambda: Device(name="d", node_id=987654, kind="cpu", memory_mib=1), "node"),
        (lambda: Node(name="n", labels={}, status="gone"), "status"),
    ],
)
def test_the_database_itself_refuses_what_the_services_refuse(engine, row, constraint) -> None:
    # Defence in depth: a writer that bypasses the services still cannot store these rows.
    factory = make_session_factory(engine)
    with pytest.raises(IntegrityError, match=constraint):
        with session_scope(factory) as session:
            session.add(row())
    with factory() as session:
        assert session.scalar(select(func.count()).select_from(Tenant)) == 0


def test_timestamps_are_stored_as_utc_and_read_back_aware(engine) -> None:
    factory = make_session_factory(engine)
    plus_two = timezone(timedelta(hours=2))
    with session_scope(factory) as session:
        session.add(Node(name="n", labels={}, created_at=datetime(2026, 3, 1, 14, tzinfo=plus_two)))
        session.add(Node(name="server-default", labels={}))
    with factory() as session:
        stamps = dict(session.execute(select(Node.name, Node.created_at)).tuples().all())
    assert stamps["n"] == datetime(2026, 3, 1, 12, tzinfo=UTC)
    assert stamps["n"].tzinfo is not None
    assert stamps["server-default"].tzinfo is not None


def test_naive_datetimes_are_refused(engine) -> None:
    factory = make_session_factory(engine)
    with pytest.raises(StatementError, match="naive datetime"):
        with session_scope(factory) as session:
            session.add(Node(name="n", labels={}, created_at=datetime(2026, 3, 1, 12)))
            session.flush()


def test_json_columns_round_trip_nested_values(engine) -> None:
    factory = make_session_factory(engine)
    labels = {"pool": "gold", "tags": ["a", "b"], "nested": {"n": 1}}
    with session_scope(factory) as session:
        session.add(Node(name="n", labels=labels))
    with factory() as session:
        assert session.scalar(select(Node.labels)) == labels
        assert session.execute(text("SELECT 1")).scalar() == 1
