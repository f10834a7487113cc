"""The Tenants page's whole lifecycle in AppTest against the real API: a tenant created and moved
between cohorts, quotas of several kinds created, edited and deleted, keys issued with an expiry
and revoked, cohorts created and deleted; each refused input is shown next to its field and
changes nothing."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

from streamlit.testing.v1 import AppTest

from tests.app.conftest import open_page, signed_in
from tests.app.test_pages import _rows


def _errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


def _pick_new(console: AppTest, key: str) -> None:
    """Pick the editor's "New ..." entry (the last option, 0)."""
    picker = console.selectbox(key=key)
    picker.select_index(len(picker.options) - 1).run()
    assert console.selectbox(key=key).value == 0


def _tenants_page(console: AppTest) -> AppTest:
    return open_page(signed_in(console), "tenants.py")


def _new_tenant(console: AppTest, name: str, weight: int = 2) -> dict:
    _pick_new(console, "te_pick")
    console.text_input(key="te_name").input(name)
    console.number_input(key="te_weight").set_value(weight)
    console.button(key="te_save").click().run()
    (made,) = _rows(console.api, "/admin/tenants", name=name)
    assert console.selectbox(key="te_pick").value == made["id"]  # the editor shows the new one
    return made


def _quota_fields(console: AppTest, **fields) -> None:  # noqa: ANN003
    """Set the quota editor's widgets in order, each followed by a run (as a browser would:
    unticking "without limit" enables its number)."""
    for key, value in fields.items():
        if key in ("qe_tenant", "qe_resource"):
            console.selectbox(key=key).select(value).run()
        elif key.endswith("_any"):
            box = console.checkbox(key=key)
            (box.check() if value else box.uncheck()).run()
        else:
            console.number_input(key=key).set_value(value).run()


def test_new_tenant_gets_quotas_of_several_kinds_edited_and_deleted(api, console) -> None:
    console.api = api
    _tenants_page(console)
    tenant = _new_tenant(console, "ui-lifecycle")
    assert tenant["weight"] == 2
    _pick_new(console, "qe_pick")
    _quota_fields(console, qe_tenant=tenant["id"], qe_resource="concurrent_requests",
                  qe_nominal=4, qe_borrow_any=False, qe_borrow=3, qe_lend_any=False, qe_lend=1)  # fmt: skip
    console.button(key="qe_save").click().run()
    assert not _errors(console), _errors(console)
    (conc,) = _rows(api, "/admin/quotas", tenant_id=tenant["id"])
    assert (conc["resource"], conc["nominal"], conc["borrowing_limit"], conc["lending_limit"]) == \
        ("concurrent_requests", 4, 3, 1)  # fmt: skip
    _pick_new(console, "qe_pick")
    _quota_fields(console, qe_tenant=tenant["id"], qe_resource="token_burst", qe_nominal=500,
                  qe_period=30)  # fmt: skip
    console.button(key="qe_save").click().run()
    burst = _rows(api, "/admin/quotas", tenant_id=tenant["id"], resource="token_burst")[0]
    assert (burst["nominal"], burst["period_s"], burst["borrowing_limit"]) == (500, 30, None)
    # edit: the picker shows the new quota; the change is a PATCH of the changed fields only
    assert console.selectbox(key="qe_pick").value == burst["id"]
    _quota_fields(console, qe_nominal=900)
    console.button(key="qe_save").click().run()
    assert _rows(api, "/admin/quotas", resource="token_burst", tenant_id=tenant["id"])[0][
        "nominal"] == 900  # fmt: skip
    console.selectbox(key="qe_pick").select(conc["id"]).run()
    _quota_fields(console, qe_borrow_any=True)
    console.button(key="qe_save").click().run()
    assert _rows(api, "/admin/quotas", resource="concurrent_requests",
                 tenant_id=tenant["id"])[0]["borrowing_limit"] is None  # fmt: skip
    console.button(key="qe_delete").click().run()
    assert [q["resource"] for q in _rows(api, "/admin/quotas", tenant_id=tenant["id"])] == \
        ["token_burst"]  # fmt: skip
    assert any("deleted" in s.value for s in console.success)


def test_refused_quota_and_tenant_input_is_shown_on_its_field(api, console) -> None:
    console.api = api
    _tenants_page(console)
    quota = _rows(api, "/admin/quotas")[0]
    console.selectbox(key="qe_pick").select(quota["id"]).run()
    _quota_fields(console, qe_nominal=-5)
    console.button(key="qe_save").click().run()
    assert any(e.startswith("nominal:") for e in _errors(console)), _errors(console)
    assert _rows(api, "/admin/quotas", tenant_id=quota["tenant_id"],
                 resource=quota["resource"])[0]["nominal"] == quota["nominal"]  # fmt: skip
    # a second quota of the same kind for the same tenant: refused on the kind
    _pick_new(console, "qe_pick")
    _quota_fields(console, qe_tenant=quota["tenant_id"], qe_resource=quota["resource"])
    console.button(key="qe_save").click().run()
    assert any(e.startswith("resource:") for e in _errors(console)), _errors(console)
    assert len(_rows(api, "/admin/quotas", tenant_id=quota["tenant_id"],
                     resource=quota["resource"])) == 1  # fmt: skip
    tenant = _rows(api, "/admin/tenants")[0]
    console.selectbox(key="te_pick").select(tenant["id"]).run()
    console.number_input(key="te_weight").set_value(0).run()
    console.button(key="te_save").click().run()
    assert any(e.startswith("weight:") for e in _errors(console)), _errors(console)
    assert _rows(api, "/admin/tenants", name=tenant["name"])[0]["weight"] == tenant["weight"]
    _pick_new(console, "te_pick")
    console.text_input(key="te_name").input(tenant["name"]).run()
    console.button(key="te_save").click().run()
    assert any(e.startswith("name:") for e in _errors(console)), _errors(console)


def test_tenant_moves_between_cohorts_and_cohorts_are_created_and_deleted(api, console) -> None:
    console.api = api
    _tenants_page(console)
    console.text_input(key="co_name").input("ui-research")
    console.button[[b.label for b in console.button].index("Create cohort")].click().run()
    (cohort,) = _rows(api, "/admin/cohorts", name="ui-research")
    tenant = _new_tenant(console, "ui-mover", weight=1)
    console.selectbox(key="te_cohort").select(cohort["id"]).run()
    console.button(key="te_save").click().run()
    assert _rows(api, "/admin/tenants", name="ui-mover")[0]["cohort_id"] == cohort["id"]
    # a cohort with tenants in it is not deleted; the refusal says why
    console.selectbox(key="co_delete_pick").select(cohort["id"]).run()
    console.button(key="co_delete").click().run()
    assert _rows(api, "/admin/cohorts", name="ui-research")
    assert any("Refused by the API (409" in e for e in _errors(console)), _errors(console)
    console.selectbox(key="te_pick").select(tenant["id"]).run()
    console.selectbox(key="te_cohort").select(0).run()  # "no cohort"
    console.button(key="te_save").click().run()
    assert _rows(api, "/admin/tenants", name="ui-mover")[0]["cohort_id"] is None
    console.selectbox(key="co_delete_pick").select(cohort["id"]).run()
    console.button(key="co_delete").click().run()
    assert not _rows(api, "/admin/cohorts", name="ui-research")
    console.text_input(key="co_name").input("x" * 101)  # in a form: sent by its submit
    console.button[[b.label for b in console.button].index("Create cohort")].click().run()
    assert any(e.startswith("name:") for e in _errors(console)), _errors(console)
    assert not _rows(api, "/admin/cohorts", name="x" * 101)


def test_key_issued_with_an_expiry_then_revoked_and_a_past_expiry_refused(api, console) -> None:
    console.api = api
    _tenants_page(console)
    tenant = console.selectbox(key="key_tenant").value
    day = (datetime.now(UTC) + timedelta(days=3)).date()
    console.text_input(key="key_label").input("ui-expiring")
    console.checkbox(key="key_expires").check().run()
    console.date_input(key="key_exp_day").set_value(day)
    console.time_input(key="key_exp_time").set_value(time(12, 30)).run()
    console.button(key="key_issue").click().run()
    assert [c.value for c in console.code][0].startswith("lg_")
    (key,) = [k for k in _rows(api, "/admin/keys", tenant_id=tenant) if k["label"] == "ui-expiring"]
    assert datetime.fromisoformat(key["expires_at"]) == datetime.combine(day, time(12, 30), UTC)
    table = next(d.value for d in console.dataframe if "state" in d.value.columns)
    assert table[table["id"] == key["id"]]["state"].iloc[0] == "active"
    console.date_input(key="key_exp_day").set_value((datetime.now(UTC) - timedelta(days=1)).date())
    console.text_input(key="key_label").input("ui-born-expired").run()
    console.button(key="key_issue").click().run()
    assert any(e.startswith("expires_at:") for e in _errors(console)), _errors(console)
    assert not [k for k in _rows(api, "/admin/keys", tenant_id=tenant)
                if k["label"] == "ui-born-expired"]  # fmt: skip
    console.selectbox(key="key_revoke_pick").select(key["id"])
    console.button(key="key_revoke").click().run()
    (key,) = [k for k in _rows(api, "/admin/keys", tenant_id=tenant) if k["label"] == "ui-expiring"]
    assert key["revoked_at"] is not None
