"""Schemathesis over the OpenAPI document: generated requests to the admin and tenant routes
get no 5xx and no response that contradicts the document (status, content type, body schema,
headers). Bounded: a few examples per operation, a few hundred in all.

Routes that need the live runtime (inference runs, the snapshot, rollout, canaries and test
runs) are left out here: without it they answer 503 by design; ``test_schema_live.py`` fuzzes them over a
live runtime with tiny models, so that the two together cover the whole document (tenant and
admin routes, each with its credential). The twin's engine is a fake.
"""

from __future__ import annotations

import shutil

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import checks

from control.services.fidelity.runner import FidelityRequest
from control.services.fidelity.validate import config_dict
from tests.api.conftest import ADMIN_TOKEN, build_stack

NEEDS_RUNTIME = (
    r"^/(v1/(embeddings|chat/completions|completions|rerank|workflows/.*)|admin/snapshot"
    r"|admin/policies|admin/placement-plans/rollback|admin/models/\{name\}/canary)$"
)
# POSTs that start work only a live runtime (or a validation runner) can do: 503 without one.
# Their GET siblings (rollout progress) work without a runtime and stay fuzzed. Starting a
# fidelity validation (POST /admin/fidelity/runs) is fuzzed here against FakeFidelityRunner,
# a plan's simulation (POST /admin/placement-plans/{id}/simulate) against FakePlanSimulator.
POSTS_NEEDING_RUNTIME = (
    r"^/admin/(placement-plans/\{item_id\}/(rollout|rollback)"
    r"|workflows/\{name\}/versions/\{version\}/test-runs)$"
)
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
    checks.response_headers_conformance,
]


class FakeTwin:
    """Stands in for the twin's engine: accepts a run and marks it running."""

    def __init__(self, services) -> None:
        self.services = services
        self.submitted: list[int] = []

    def submit(self, actor: str, run_id: int) -> None:
        self.submitted.append(run_id)
        self.services.whatif.update(actor, run_id, status="running")


class FakePlanSimulator:
    """Stands in for the twin's plan simulator: marks the plan's simulation running (404 for an
    unknown plan, as the real one) and spawns nothing."""

    def __init__(self, services) -> None:
        self.services = services

    def start(self, actor: str, plan_id: int, window_s: float) -> dict:
        self.services.plans.get(plan_id)
        running = {"state": "running", "window_s": window_s}
        self.services.plans.update(actor, plan_id, simulation=running)
        return running


class FakeFidelityRunner:
    """Stands in for the fidelity runner: builds the validation's settings as the real one does
    before it spawns the minute-long validation process, and starts nothing."""

    def __init__(self) -> None:
        self.started: list[dict] = []

    def start(self, request: FidelityRequest) -> None:
        self.started.append(config_dict(request.config()))


@pytest.fixture(scope="module")
def api(tmp_path_factory, _sqlite_template):
    root = tmp_path_factory.mktemp("schema")
    stack = build_stack(root / "legato.db", _sqlite_template)
    stack.app.state.gateway.whatif_engine = FakeTwin(stack.services)
    stack.app.state.gateway.extras["fidelity_runner"] = FakeFidelityRunner()
    stack.app.state.gateway.extras["plan_simulator"] = FakePlanSimulator(stack.services)
    services = stack.services
    node = services.nodes.create("seed", name="local")
    services.devices.create("seed", name="cpu:0", node_id=node.id, kind="cpu", memory_mib=1024)
    tenant = services.tenants.create("seed", name="acme")
    key = services.api_keys.create_key("seed", tenant.id).plaintext
    schema = schemathesis.openapi.from_asgi("/openapi.json", stack.app)
    yield (
        schema.exclude(path_regex=NEEDS_RUNTIME).exclude(
            method="POST", path_regex=POSTS_NEEDING_RUNTIME
        ),
        key,
    )
    shutil.rmtree(root, ignore_errors=True)


def _operations(schema):
    for result in schema.get_all_operations():
        yield result.ok()


def _fuzz(operation, headers: dict[str, str]):
    """A hypothesis test of one operation, calling the app with ``headers``."""

    @settings(max_examples=6, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(operation.as_strategy())
    def check(case) -> None:
        case.call_and_validate(headers=headers, checks=CHECKS)

    return check


def test_no_server_errors_and_no_schema_violations(api):
    schema, tenant_key = api
    failures: list[str] = []
    count = 0
    for operation in _operations(schema):
        token = ADMIN_TOKEN if operation.path.startswith("/admin") else tenant_key
        try:
            _fuzz(operation, {"Authorization": f"Bearer {token}"})()
        except Exception as exc:  # collect every operation's failure, then report them all
            failures.append(f"{operation.method.upper()} {operation.path}: {exc}"[:2000])
        count += 1
    assert count >= 40
    assert not failures, "\n\n".join(failures)


def test_document_lists_every_route_family(api):
    paths = set(api[0].raw_schema["paths"])
    for expected in ("/v1/embeddings", "/v1/chat/completions", "/v1/rerank", "/v1/models",
                     "/v1/runs/{run_id}", "/admin/audit", "/admin/usage", "/metrics"):  # fmt: skip
        assert expected in paths, expected
