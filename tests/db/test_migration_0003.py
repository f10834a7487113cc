"""Migration 0003 adds ``models.continuous_batching``: rows written before it read false (static
batching), the column refuses nulls, and the downgrade removes it and keeps the rows and the
table's other checks."""

from __future__ import annotations

import pytest
from sqlalchemy.exc import IntegrityError

from db import migrate
from tests.db.raw import model_columns, run_sql

INSERT = (
    "INSERT INTO models (name, version, task, weights_source, weights_location, memory_mib, "
    "precisions, max_batch_size, max_batch_tokens, tp_degree, cost_weight_milli, status) "
    "VALUES (:name, '1', :task, 'declared', 'x', :mib, '[]', 1, 2048, 1, 1000, 'active')"
)


def test_upgrade_gives_existing_models_false_and_downgrade_drops_the_column(
    empty_db_url: str,
) -> None:
    migrate.upgrade(empty_db_url, "0002")
    assert "continuous_batching" not in model_columns(empty_db_url)
    run_sql(empty_db_url, INSERT, name="old-llm", task="generate", mib=100)

    migrate.upgrade(empty_db_url, "0003")
    assert migrate.current(empty_db_url) == "0003"
    rows = run_sql(empty_db_url, "SELECT name, continuous_batching FROM models")
    assert [(n, bool(c)) for n, c in rows] == [("old-llm", False)]
    with pytest.raises(IntegrityError):
        run_sql(empty_db_url, "UPDATE models SET continuous_batching = NULL")
    run_sql(empty_db_url, "UPDATE models SET continuous_batching = :on", on=True)
    assert bool(run_sql(empty_db_url, "SELECT continuous_batching FROM models")[0][0]) is True

    migrate.downgrade(empty_db_url, "0002")
    assert migrate.current(empty_db_url) == "0002"
    assert "continuous_batching" not in model_columns(empty_db_url)
    assert run_sql(empty_db_url, "SELECT name FROM models") == [("old-llm",)]
    # the table's checks survive the downgrade (SQLite rebuilds the table to drop a column)
    with pytest.raises(IntegrityError):
        run_sql(empty_db_url, INSERT, name="bad", task="generate", mib=0)

    migrate.upgrade(empty_db_url)
    assert migrate.check(empty_db_url) == []
