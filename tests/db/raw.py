"""Raw SQL against a database URL, for the migration tests: each call on its own engine, so a
test sees exactly what the schema at that revision stores."""

from __future__ import annotations

from sqlalchemy import inspect, text

from db.session import make_engine


def run_sql(url: str, sql: str, **params: object) -> list[tuple]:
    """Execute ``sql`` in one transaction; its rows (empty for a statement without rows)."""
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            result = conn.execute(text(sql), params)
            return [tuple(r) for r in result] if result.returns_rows else []
    finally:
        engine.dispose()


def model_columns(url: str) -> set[str]:
    """Column names of the ``models`` table."""
    engine = make_engine(url)
    try:
        return {c["name"] for c in inspect(engine).get_columns("models")}
    finally:
        engine.dispose()
