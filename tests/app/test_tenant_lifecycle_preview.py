"""The Tenants page previews what would change scheduling in the twin before it is saved: a quota
edit, a quota's deletion and a tenant's new weight and cohort become what-if runs (the real twin
in a worker process) whose variant holds exactly that change; a preview changes nothing stored,
and a change the API would refuse is refused next to its field without storing a run."""

from __future__ import annotations

from tests.app.conftest import open_page, signed_in
from tests.app.test_headroom_preview import wait_for_twin
from tests.app.test_pages import _rows


def _last_variant(api) -> dict:  # noqa: ANN001
    run = _rows(api, "/admin/whatif")[-1]
    assert run["status"] == "succeeded", run.get("error")
    (variant,) = run["scenario"]["variants"].values()
    return {"baseline": run["scenario"]["baseline"], "variant": variant}


def _deltas_shown(console) -> None:  # noqa: ANN001
    table = next(d.value for d in console.dataframe if "twin_error" in d.value.columns)
    assert {"p99 latency (s)", "throughput (req/s)"} <= set(table["figure"])


def test_quota_edit_and_deletion_are_previewed_in_the_twin(api, console) -> None:
    open_page(signed_in(console), "tenants.py")
    names = {t["id"]: t["name"] for t in _rows(api, "/admin/tenants")}
    quota = _rows(api, "/admin/quotas")[0]
    key = (names[quota["tenant_id"]], quota["resource"])
    console.selectbox(key="qe_pick").select(quota["id"]).run()
    console.number_input(key="qe_nominal").set_value(1).run()
    console.button(key="qe_preview").click().run()
    assert not console.error, [e.value for e in console.error]
    wait_for_twin(console, "quota")
    found = _last_variant(api)
    edited = {(q["tenant_id"], q["resource"]): q for q in found["variant"]["quotas"]}
    assert edited[key]["nominal"] == 1
    assert {(q["tenant_id"], q["resource"]) for q in found["baseline"]["quotas"]} == set(edited)
    _deltas_shown(console)
    console.button(key="qe_preview_delete").click().run()
    wait_for_twin(console, "quota")
    gone = {(q["tenant_id"], q["resource"]) for q in _last_variant(api)["variant"]["quotas"]}
    assert key not in gone and len(gone) == len(edited) - 1
    stored = _rows(api, "/admin/quotas", tenant_id=quota["tenant_id"], resource=quota["resource"])
    assert stored[0]["nominal"] == quota["nominal"]  # previews changed nothing


def test_tenant_weight_change_is_previewed_and_a_bad_quota_refused_on_its_field(api, console):
    open_page(signed_in(console), "tenants.py")
    tenant = _rows(api, "/admin/tenants")[-1]
    console.selectbox(key="te_pick").select(tenant["id"]).run()
    console.number_input(key="te_weight").set_value(tenant["weight"] + 5).run()
    console.selectbox(key="te_class").select("critical").run()
    console.button(key="te_preview").click().run()
    wait_for_twin(console, "tenant")
    found = _last_variant(api)
    after = {t["tenant_id"]: t for t in found["variant"]["tenants"]}[tenant["name"]]
    assert (after["weight"], after["priority_class"]) == (tenant["weight"] + 5, "critical")
    assert _rows(api, "/admin/tenants", name=tenant["name"])[0]["weight"] == tenant["weight"]
    runs = len(_rows(api, "/admin/whatif"))
    quota = _rows(api, "/admin/quotas")[0]
    console.selectbox(key="qe_pick").select(quota["id"]).run()
    console.number_input(key="qe_nominal").set_value(-1).run()
    console.button(key="qe_preview").click().run()
    assert any(e.value.startswith("nominal:") for e in console.error), console.error
    assert len(_rows(api, "/admin/whatif")) == runs
