"""``legato serve`` reads ``LEGATO_STRICT_PRIORITY_LEAD`` as the gateway does (it used the
default lead whatever the setting said)."""

from __future__ import annotations

from control.wiring.serve import _tenancy_base


def test_serve_takes_the_strict_priority_lead_from_the_settings(monkeypatch) -> None:
    monkeypatch.setenv("LEGATO_STRICT_PRIORITY_LEAD", "123")
    assert _tenancy_base().strict_priority_lead == 123
    monkeypatch.delenv("LEGATO_STRICT_PRIORITY_LEAD")
    assert _tenancy_base().strict_priority_lead == 20000
