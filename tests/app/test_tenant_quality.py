"""The tenant editor sets a tenant's default quality class and whether its runs may be degraded
to a cheaper precision variant (issue 27), over the real admin API; "from priority class" sends
None (the core maps the priority class)."""

from __future__ import annotations

from tests.app.conftest import open_page, signed_in
from tests.app.test_pages import _rows


def test_quality_and_allow_degrade_are_saved_from_the_editor(api, console) -> None:
    console.api = api
    open_page(signed_in(console), "tenants.py")
    tenant = _rows(api, "/admin/tenants")[0]
    console.selectbox(key="te_pick").select(tenant["id"]).run()
    assert console.selectbox(key="te_quality").value == (tenant["quality"] or "from priority class")
    console.selectbox(key="te_quality").select("fast").run()
    console.checkbox(key="te_degrade").check().run()
    console.button(key="te_save").click().run()
    assert not console.error, [e.value for e in console.error]
    saved = _rows(api, "/admin/tenants", name=tenant["name"])[0]
    assert (saved["quality"], saved["allow_degrade"]) == ("fast", True)
    table = next(d.value for d in console.dataframe if "allow_degrade" in d.value.columns)
    assert table.loc[table["name"] == tenant["name"], "quality"].item() == "fast"
    console.selectbox(key="te_quality").select("from priority class").run()
    console.button(key="te_save").click().run()
    assert _rows(api, "/admin/tenants", name=tenant["name"])[0]["quality"] is None
