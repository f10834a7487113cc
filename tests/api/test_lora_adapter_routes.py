"""LoRA adapters over the API (issue 27, item 4): the admin registers a tenant's PEFT folder on a
base generate model (rank and size read from the folder), lists and retires it, audited; bad
input is a 4xx naming the field with nothing written; a duplicate is a 409; a tenant lists only
its own adapters."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from control.executor import sources
from control.services.catalog import ModelService
from control.services.lora_adapters import LoraAdapterService
from tests.api.conftest import client_for, make_tenant
from tests.services.builders import row_counts
from tests.support.lora_adapters import make_adapter


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("roots")
    base = sources.ensure_tiny("gpt2", root / "models")
    adapter = make_adapter(base, root / "adapters" / "support", seed=1, rank=4)
    alien = root / "adapters" / "alien"
    alien.mkdir()
    config = json.loads((adapter / "adapter_config.json").read_text())
    (alien / "adapter_config.json").write_text(
        json.dumps({**config, "target_modules": ["q_proj", "v_proj"]})
    )
    (alien / "adapter_model.safetensors").write_bytes(
        (adapter / "adapter_model.safetensors").read_bytes()
    )
    return {"root": root, "base": base, "adapter": adapter, "alien": alien}


@pytest.fixture
def roots(stack, folders):
    """The services with the test's folder as the only source root."""
    given = [folders["root"]]
    services = dataclasses.replace(
        stack.services,
        models=ModelService(stack.factory, source_roots=given),
        lora_adapters=LoraAdapterService(stack.factory, source_roots=given),
    )
    stack.app.state.gateway.services = services  # type: ignore[attr-defined]
    return services


async def _model(admin, folders, task="generate", name="gpt2") -> int:
    body = {"name": name, "version": "1", "task": task, "weights_source": "path",
            "weights_location": str(folders["base"]), "memory_mib": 10}  # fmt: skip
    r = await admin.post("/admin/models", json=body)
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def test_register_list_retire_and_tenants_see_only_their_own(stack, roots, admin, folders):
    model = await _model(admin, folders)
    acme, acme_key = await make_tenant(admin, "acme")
    other, other_key = await make_tenant(admin, "other")
    body = {"tenant_id": acme, "model_id": model, "name": "support",
            "path": str(folders["adapter"])}  # fmt: skip
    r = await admin.post("/admin/adapters", json=body)
    assert r.status_code == 201, r.text
    made = r.json()
    assert made["rank"] == 4 and made["memory_mib"] >= 1 and made["status"] == "active"
    r = await admin.post("/admin/adapters", json=body)
    assert r.status_code == 409, r.text  # same tenant, model and name
    assert (
        await admin.post("/admin/adapters", json={**body, "tenant_id": other})
    ).status_code == 201
    assert len((await admin.get("/admin/adapters")).json()["items"]) == 2
    async with client_for(stack.app, acme_key) as acme_client:
        mine = (await acme_client.get("/v1/adapters")).json()
        assert [(a["tenant_id"], a["name"]) for a in mine] == [(acme, "support")]
        assert (await acme_client.get("/admin/adapters")).status_code == 403
    r = await admin.delete(f"/admin/adapters/{made['id']}")
    assert r.status_code in (200, 204), r.text
    assert (await admin.get(f"/admin/adapters/{made['id']}")).json()["status"] == "retired"
    audit = (await admin.get("/admin/audit", params={"entity_type": "lora_adapter"})).json()
    assert [a["action"] for a in audit["items"]].count("create") == 2
    assert roots.lora_adapters.resolve(other, "support").tenant_id == other


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"path": "/etc"}, "path", "must lie under"),
        ({"path": "<base>"}, "path", "adapter_config.json"),  # a model folder, no adapter
        ({"path": "<alien>"}, "path", "does not have"),  # targets another architecture
        ({"model_id": "<encoder>"}, "model_id", "generate model"),
        ({"tenant_id": 999}, "tenant_id", "no tenant"),
        ({"rank": 8}, "body.rank", "Extra inputs"),  # read from the folder, never given
        ({"name": ""}, "body.name", ""),
    ],
)
async def test_bad_registrations_name_the_field_and_write_nothing(
    stack, roots, admin, folders, change, field, words
):
    model = await _model(admin, folders)
    encoder = await _model(admin, folders, task="embed", name="enc")
    tenant, _ = await make_tenant(admin, "acme")
    body = {"tenant_id": tenant, "model_id": model, "name": "support",
            "path": str(folders["adapter"])}  # fmt: skip
    subst = {"<base>": str(folders["base"]), "<alien>": str(folders["alien"]), "<encoder>": encoder}
    body.update({k: subst.get(v, v) if isinstance(v, str) else v for k, v in change.items()})
    before = row_counts(stack.factory)
    r = await admin.post("/admin/adapters", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field and words in r.json()["detail"], r.json()
    assert row_counts(stack.factory) == before
