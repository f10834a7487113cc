"""Start-up replicas from the active plan: a multi-device (tensor parallel) replica names its
whole device group, never its first device alone (issue 23, item 3)."""

from __future__ import annotations

from types import SimpleNamespace

from control.executor.protocol import ModelRef
from control.wiring.live import _initial_replicas, tp_group


def _state(placement, models):  # noqa: ANN001, ANN202 - the fields _initial_replicas reads
    devices = [SimpleNamespace(device_id=f"cpu:{i}") for i in range(3)]
    return SimpleNamespace(devices=devices, placement=placement, models=models)


def test_a_tp_replica_starts_on_its_whole_group_and_a_single_one_on_its_device() -> None:
    models = [SimpleNamespace(key="llm:1", tp_degree=2), SimpleNamespace(key="emb:1", tp_degree=1)]
    placement = [
        SimpleNamespace(model_key="llm:1", device_ids=("cpu:1", "cpu:2"), replicas=1, pool="hot"),
        SimpleNamespace(model_key="emb:1", device_ids=("cpu:0",), replicas=1, pool="hot"),
    ]
    refs = {k: ModelRef(k, "embed", "tiny", "bert") for k in ("llm:1", "emb:1")}
    llm, emb = _initial_replicas(_state(placement, models), models, refs)
    assert (llm.device_id, llm.group) == ("cpu:1", ("cpu:1", "cpu:2"))
    assert (emb.device_id, emb.group) == ("cpu:0", ())


def test_a_row_starts_as_many_replicas_as_it_plans() -> None:
    """Issue 24, item 3: start-up loaded one replica per row whatever its ``replicas``."""
    models = [SimpleNamespace(key="emb:1", tp_degree=1), SimpleNamespace(key="gen:1", tp_degree=1)]
    placement = [
        SimpleNamespace(model_key="emb:1", device_ids=("cpu:0",), replicas=3, pool="hot"),
        SimpleNamespace(model_key="gen:1", device_ids=("cpu:1",), replicas=0, pool="cold"),
    ]
    refs = {k: ModelRef(k, "embed", "tiny", "bert") for k in ("emb:1", "gen:1")}
    started = _initial_replicas(_state(placement, models), models, refs)
    assert [(r.model_key, r.device_id) for r in started] == [("emb:1", "cpu:0")] * 3


def test_the_group_is_the_rows_first_tp_degree_devices() -> None:
    assert tp_group(("a", "b", "c", "d"), 2) == ("a", "b")
    assert tp_group(("a", "b"), 1) == ()
