"""Migration 0004 adds ``models.prefill_chunk_tokens``: rows written before it read 0 (whole
prompts in one iteration), the column refuses nulls, and the downgrade removes it and keeps the
rows."""

from __future__ import annotations

import pytest
from sqlalchemy.exc import IntegrityError

from db import migrate
from tests.db.raw import model_columns, run_sql

INSERT = (
    "INSERT INTO models (name, version, task, weights_source, weights_location, memory_mib, "
    "precisions, max_batch_size, max_batch_tokens, tp_degree, cost_weight_milli, status, "
    "continuous_batching) "
    "VALUES ('old-llm', '1', 'generate', 'declared', 'x', 100, '[]', 1, 2048, 1, 1000, "
    "'active', :on)"
)


def test_upgrade_gives_existing_models_zero_and_downgrade_drops_the_column(
    empty_db_url: str,
) -> None:
    migrate.upgrade(empty_db_url, "0003")
    assert "prefill_chunk_tokens" not in model_columns(empty_db_url)
    run_sql(empty_db_url, INSERT, on=True)

    migrate.upgrade(empty_db_url, "0004")
    assert migrate.current(empty_db_url) == "0004"
    rows = run_sql(empty_db_url, "SELECT name, prefill_chunk_tokens FROM models")
    assert rows == [("old-llm", 0)]
    with pytest.raises(IntegrityError):
        run_sql(empty_db_url, "UPDATE models SET prefill_chunk_tokens = NULL")
    run_sql(empty_db_url, "UPDATE models SET prefill_chunk_tokens = 512")

    migrate.downgrade(empty_db_url, "0003")
    assert migrate.current(empty_db_url) == "0003"
    assert "prefill_chunk_tokens" not in model_columns(empty_db_url)
    rows = run_sql(empty_db_url, "SELECT name, continuous_batching FROM models")
    assert [(n, bool(c)) for n, c in rows] == [("old-llm", True)]

    migrate.upgrade(empty_db_url)
    assert migrate.check(empty_db_url) == []
