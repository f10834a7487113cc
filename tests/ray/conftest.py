"""One two-node Ray cluster on this machine per test module (``ray.cluster_utils.Cluster``,
one CPU slot per node, the object store capped) and a RayExecutor over it."""

from __future__ import annotations

import os

import pytest

ray = pytest.importorskip("ray")

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

from ray.cluster_utils import Cluster  # noqa: E402

from control.executor.ray import RayExecutor, RayExecutorConfig  # noqa: E402
from tests.executor.conftest import model_cache, wait_for  # noqa: E402,F401,F811

STORE = 80 * 1024 * 1024  # object store of each node


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "object_store_memory": STORE,
                                                      "include_dashboard": False})  # fmt: skip
    second = c.add_node(num_cpus=1, object_store_memory=STORE)
    ray.init(address=c.address, log_to_driver=False)
    c.wait_for_nodes()
    yield c, second
    ray.shutdown()
    c.shutdown()


@pytest.fixture(scope="module")
def rex(cluster, model_cache):  # noqa: F811
    ex = RayExecutor(RayExecutorConfig(heartbeat_s=0.4, cache_dir=str(model_cache)))
    ex.start()
    assert ex.wait_ready(120), "actors did not start"
    yield ex
    ex.stop()


def remote_device(ex) -> str:
    """The device on the node that is not the driver's."""
    return next(d.device_id for d in ex.devices() if "/" in d.device_id)


def wait_until(ex, predicate, timeout: float = 60.0) -> list:
    """The executor tests' :func:`wait_for`, with the longer wait a Ray actor may need."""
    return wait_for(ex, predicate, timeout)
