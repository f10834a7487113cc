"""Schemathesis over the routes that need the live runtime (the inference routes, the live
snapshot, plan rollout and rollback, workflow test runs): generated, authenticated requests to
the real app over a live runtime and a real executor with tiny models get no 5xx, in positive
mode (also checked against the OpenAPI document) and in negative mode (bad bodies, queries and
path values); the workflow routes are pointed at a seeded workflow. Together with
``test_schema.py`` and ``test_schema_seeded.py`` (every other route, without a runtime) this
covers the whole document. Left out here: starting a fidelity validation
(``POST /admin/fidelity/runs``), which launches a minute-long validation process per call; it
is fuzzed in ``test_schema.py`` against a stand-in runner that starts nothing.

Bounded: a few examples per operation and mode (the whole module well under a minute).
"""

from __future__ import annotations

import asyncio
import shutil

import pytest
import pytest_asyncio
import schemathesis
import uvicorn
from hypothesis import HealthCheck, given, settings
from schemathesis import checks
from schemathesis.generation import GenerationMode

from control.api.settings import GatewayConfig
from tests.api.conftest import ADMIN_TOKEN
from tests.api.test_inference import REFS, _seed
from tests.api.test_schema import CHECKS, NEEDS_RUNTIME, POSTS_NEEDING_RUNTIME
from tests.support.live_gateway import live_app, live_world

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]
FIDELITY_RUN = r"^/admin/fidelity/runs$"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def live_schema(tmp_path_factory, _sqlite_template):
    root = tmp_path_factory.mktemp("schema-live")
    world = live_world(root, _sqlite_template)
    ids = _seed(world.services)
    key = world.services.api_keys.create_key("test", ids["acme"]).plaintext
    app = live_app(world, REFS, GatewayConfig(admin_token=ADMIN_TOKEN, sync_timeout_s=20,
                                              max_wait_s=5))  # fmt: skip
    inference = app.state.gateway.inference
    await inference.start()
    # A real server on this loop (the runtime's): schemathesis's ASGI transport would run the
    # app on a loop of its own per call.
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning",
                                           lifespan="off"))  # fmt: skip
    serving = asyncio.get_running_loop().create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    schema = schemathesis.openapi.from_dict(app.openapi())
    # (the GET siblings of the runtime POSTs come along: they are fuzzed twice, harmlessly)
    runtime_only = schema.include(path_regex=f"{NEEDS_RUNTIME}|{POSTS_NEEDING_RUNTIME}")
    yield runtime_only.exclude(path_regex=FIDELITY_RUN), key, f"http://127.0.0.1:{port}"
    server.should_exit = True
    await serving
    await inference.stop()
    shutil.rmtree(root, ignore_errors=True)


#: the seeded workflow the run routes are pointed at (random names are a plain 404)
WORKFLOW = {"name": "pipe", "version": "1"}


def _fuzz(operation, base_url: str, headers: dict[str, str], mode: GenerationMode):
    chosen = CHECKS if mode is GenerationMode.POSITIVE else [checks.not_a_server_error]
    params = WORKFLOW if "{name}" in operation.path else None

    @settings(max_examples=4, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(operation.as_strategy(generation_mode=mode, path_parameters=params))
    def check(case) -> None:
        case.call_and_validate(base_url=base_url, headers=headers, checks=chosen, timeout=60)

    return check


def _fuzz_all(schema, base_url: str, tenant_key: str, mode) -> tuple[int, list[str]]:
    """Fuzz every operation (blocking: run it off the server's loop); each failure listed."""
    failures: list[str] = []
    count = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        token = ADMIN_TOKEN if operation.path.startswith("/admin") else tenant_key
        try:
            _fuzz(operation, base_url, {"Authorization": f"Bearer {token}"}, mode)()
        except Exception as exc:  # collect every operation's failure, then report them all
            failures.append(f"{operation.method.upper()} {operation.path}: {exc}"[:2000])
        count += 1
    return count, failures


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
async def test_runtime_routes_give_no_server_errors_and_no_schema_violations(live_schema, mode):
    schema, tenant_key, base_url = live_schema
    count, failures = await asyncio.to_thread(_fuzz_all, schema, base_url, tenant_key, mode)
    assert count >= 8
    assert not failures, "\n\n".join(failures)
