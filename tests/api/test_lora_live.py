"""LoRA adapters end to end (issue 27, item 4): a run naming one of its tenant's adapters runs
its generate step with it on a real worker (the text differs from the base model's, and equals
what the adapter gives on its own), the bill names the adapter, and an unknown adapter or
another tenant's is refused with a 422 naming ``adapter`` before anything is recorded."""

from __future__ import annotations

import pytest
import pytest_asyncio
import torch

from control.api.settings import GatewayConfig
from control.executor.adapters.generate import GenerateAdapter
from control.executor.protocol import AdapterRef, ModelRef
from control.services.lora_adapters import LoraAdapterService
from tests.api.conftest import ADMIN_TOKEN, client_for
from tests.executor.test_adapters import RecordingCtx
from tests.executor.test_lora_generate import _item
from tests.support.live_gateway import live_app, live_world
from tests.support.lora_adapters import make_adapter

torch.set_num_threads(1)
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]

REFS = {"tiny-gen:1": ModelRef("tiny-gen:1", "generate", "tiny", "gpt2")}
GEN = {
    "inputs": {"prompt": "text"},
    "outputs": {"text": "gen.text"},
    "nodes": [{"id": "gen", "task": "generate", "model": "tiny-gen:1",
               "params": {"max_tokens": 8}}],
    "edges": [{"from": "input.prompt", "to": "gen.prompt"}],
}  # fmt: skip
PROMPT = "the quick brown fox"
RUN = "/v1/workflows/gen/versions/1/runs"


def _seed(services, root):  # noqa: ANN001, ANN202
    node = services.nodes.create("test", name="local")
    services.devices.create("test", name="cpu:0", node_id=node.id, kind="cpu", memory_mib=2048,
                            precisions=["fp32"], is_real=True)  # fmt: skip
    model = services.models.create("test", name="tiny-gen", version="1", task="generate",
                                   weights_source="declared", weights_location="tiny test model",
                                   memory_mib=16, max_batch_size=8, max_batch_tokens=4096)  # fmt: skip
    services.workflows.create("test", name="gen", version="1", spec=GEN, status="active")
    ids = {n: services.tenants.create("test", name=n, weight=1).id for n in ("acme", "globex")}
    adapters = LoraAdapterService(services.factory, source_roots=[root])
    folder = make_adapter(root / "models" / "tiny" / "gpt2", root / "acme-support", seed=3)
    adapters.create("test", tenant_id=ids["acme"], model_id=model.id, name="support",
                    path=str(folder))  # fmt: skip
    return ids, folder


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def live(tmp_path_factory, module_db_url):
    root = tmp_path_factory.mktemp("lora-live")
    world = live_world(root, module_db_url, archs=("gpt2",))
    ids, folder = _seed(world.services, root)
    keys = {n: world.services.api_keys.create_key("test", i).plaintext for n, i in ids.items()}
    app = live_app(world, REFS, GatewayConfig(admin_token=ADMIN_TOKEN, sync_timeout_s=60))
    inference = app.state.gateway.inference
    await inference.start()
    yield app, keys, folder, world
    await inference.stop()


async def test_a_run_with_an_adapter_generates_with_it_and_is_billed_for_it(live):
    app, keys, folder, world = live
    gen = GenerateAdapter(world.cache / "tiny" / "gpt2", torch.device("cpu"), {})
    ref = world.services.lora_adapters.list(name="support")[0]
    (alone,) = gen.run([_item("x", PROMPT, AdapterRef(f"lora-{ref.id}", str(folder)))],
                       RecordingCtx())  # fmt: skip
    async with client_for(app, keys["acme"]) as acme:
        base = await acme.post(RUN, json={"inputs": {"prompt": PROMPT}})
        tuned = await acme.post(RUN, json={"inputs": {"prompt": PROMPT}, "adapter": "support"})
        assert base.status_code == 200 and tuned.status_code == 200, (base.text, tuned.text)
        base_text, tuned_text = base.json()["outputs"]["text"], tuned.json()["outputs"]["text"]
        assert tuned_text != base_text and tuned_text == alone.value["text"]
        usage = (await acme.get("/v1/usage", params={"request_id": tuned.json()["id"]})).json()
        assert [e["adapter"] for e in usage["items"]] == ["support"]
        usage = (await acme.get("/v1/usage", params={"request_id": base.json()["id"]})).json()
        assert [e["adapter"] for e in usage["items"]] == [None]


@pytest.mark.parametrize("tenant", ["acme", "globex"])
async def test_an_unknown_or_foreign_adapter_is_refused_naming_adapter(live, tenant):
    app, keys, _, world = live
    before = len(world.services.requests.list())
    name = "nope" if tenant == "acme" else "support"  # globex has no "support" of its own
    async with client_for(app, keys[tenant]) as client:
        r = await client.post(RUN, json={"inputs": {"prompt": PROMPT}, "adapter": name})
    assert r.status_code == 422 and r.json()["field"] == "adapter", r.text
    assert len(world.services.requests.list()) == before
