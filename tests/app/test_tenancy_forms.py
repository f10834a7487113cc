"""The Tenants page's pure request builders: quota bodies with "no limit" as None, PATCHes of
the changed fields only, key expiries in UTC and key states as authentication judges them."""

from __future__ import annotations

from datetime import UTC, date, datetime, time

from app import tenancy_forms as tf

VALUES = {"tenant_id": 3, "resource": "token_burst", "nominal": 500.0, "borrow_any": True,
          "borrowing_limit": 7, "lend_any": False, "lending_limit": 2.0, "period_s": 30}  # fmt: skip


def test_quota_body_for_create_and_update() -> None:
    assert tf.quota_body(VALUES, True) == {"tenant_id": 3, "resource": "token_burst",
                                           "nominal": 500, "borrowing_limit": None,
                                           "lending_limit": 2, "period_s": 30}  # fmt: skip
    body = tf.quota_body(VALUES, False)
    assert "tenant_id" not in body and "resource" not in body
    stored = {"nominal": 500, "borrowing_limit": 4, "lending_limit": 2, "period_s": 30}
    assert tf.changed(stored, body) == {"borrowing_limit": None}


def test_every_quota_kind_of_the_api_is_offered() -> None:
    assert set(tf.RESOURCES) == {"tokens_per_min", "requests_per_min", "concurrent_requests",
                                 "device_seconds_per_hour", "request_burst", "token_burst",
                                 "queued_runs"}  # fmt: skip
    assert tf.NOT_BORROWABLE < set(tf.RESOURCES)


def test_tenant_changes_that_schedule() -> None:
    assert not tf.schedules({"id": 1, "name": "renamed"})
    assert tf.schedules({"id": 1, "cohort_id": None})


def test_expiry_and_key_state() -> None:
    assert tf.expiry(False, date(2030, 1, 2), time(3, 4)) is None
    assert tf.expiry(True, date(2030, 1, 2), time(3, 4)) == "2030-01-02T03:04:00+00:00"
    now = datetime(2030, 1, 2, 3, 4, tzinfo=UTC)
    assert tf.key_state({"revoked_at": "x", "expires_at": None}, now) == "revoked"
    assert (
        tf.key_state({"revoked_at": None, "expires_at": "2030-01-02T03:04:00Z"}, now) == "expired"
    )
    assert tf.key_state({"revoked_at": None, "expires_at": "2030-01-02T03:05:00Z"}, now) == "active"
    assert tf.key_state({"revoked_at": None, "expires_at": None}, now) == "active"
