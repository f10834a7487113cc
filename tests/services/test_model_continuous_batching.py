"""A model's continuous_batching setting: stored per model (default off), allowed only on
generate models on create and on every update (the merged row is checked), refusals write
nothing, and the fleet state hands the stored choice to the core."""

from __future__ import annotations

from typing import Any

import pytest

from control.services import Services
from control.services.errors import ValidationError
from control.services.fleet_state import load_fleet_state
from db.session import session_scope
from tests.services.builders import ACTOR, row_counts


def _model(services: Services, name: str, task: str, **extra: Any):  # noqa: ANN202
    return services.models.create(
        ACTOR, name=name, version="1", task=task, weights_source="declared",
        weights_location="twin only", memory_mib=100, **extra,
    )  # fmt: skip


def test_create_defaults_off_and_keeps_an_explicit_choice(services: Services) -> None:
    assert _model(services, "plain", "generate").continuous_batching is False
    made = _model(services, "llm", "generate", continuous_batching=True)
    assert made.continuous_batching is True
    assert services.models.get(made.id).continuous_batching is True


@pytest.mark.parametrize("task", ["embed", "rerank", "classify", "tool"])
def test_create_refuses_it_on_other_tasks_and_writes_nothing(
    services: Services, session_factory, task: str
) -> None:
    before = row_counts(session_factory)
    with pytest.raises(ValidationError) as caught:
        _model(services, "enc", task, continuous_batching=True)
    assert caught.value.field == "continuous_batching"
    assert repr(task) in caught.value.message and "generate" in caught.value.message
    assert row_counts(session_factory) == before


def test_create_refuses_a_non_boolean(services: Services, session_factory) -> None:
    before = row_counts(session_factory)
    with pytest.raises(ValidationError, match="continuous_batching"):
        _model(services, "llm", "generate", continuous_batching="yes")
    assert row_counts(session_factory) == before


def test_update_turns_it_on_and_off_with_one_audit_record_each(
    services: Services, session_factory
) -> None:
    made = _model(services, "llm", "generate")
    audits = row_counts(session_factory)["audit_records"]
    assert services.models.update(ACTOR, made.id, continuous_batching=True).continuous_batching
    assert not services.models.update(ACTOR, made.id, continuous_batching=False).continuous_batching
    assert row_counts(session_factory)["audit_records"] == audits + 2


@pytest.mark.parametrize(
    ("start", "change", "field"),
    [
        # the flag on an encoder: the stored task decides (only the flag is sent)
        ({"task": "embed"}, {"continuous_batching": True}, "continuous_batching"),
        # both sent in one call, contradictory
        ({"task": "generate"}, {"task": "rerank", "continuous_batching": True},
         "continuous_batching"),
        # the task moves away from generate while the stored flag is on
        ({"task": "generate", "continuous_batching": True}, {"task": "embed"}, "task"),
    ],
)  # fmt: skip
def test_update_refuses_a_contradictory_merged_row_and_writes_nothing(
    services: Services, session_factory, start: dict, change: dict, field: str
) -> None:
    made = _model(services, "m", **start)
    before = row_counts(session_factory)
    with pytest.raises(ValidationError) as caught:
        services.models.update(ACTOR, made.id, **change)
    assert caught.value.field == field
    assert "continuous_batching" in str(caught.value) and "generate" in str(caught.value)
    assert row_counts(session_factory) == before
    assert services.models.get(made.id) == made


def test_task_change_is_accepted_when_the_flag_goes_off_with_it(services: Services) -> None:
    made = _model(services, "m", "generate", continuous_batching=True)
    after = services.models.update(ACTOR, made.id, task="embed", continuous_batching=False)
    assert (after.task, after.continuous_batching) == ("embed", False)


def test_fleet_state_spec_follows_the_stored_setting(services: Services, session_factory) -> None:
    on = _model(services, "llm-on", "generate", continuous_batching=True)
    _model(services, "llm-off", "generate")
    _model(services, "enc", "embed")

    def specs() -> dict[str, bool]:
        with session_scope(session_factory) as session:
            state = load_fleet_state(session, include_declared=True)
        return {m.name: m.continuous_batching for m in state.models}

    assert specs() == {"llm-on": True, "llm-off": False, "enc": False}
    services.models.update(ACTOR, on.id, continuous_batching=False)
    assert specs()["llm-on"] is False


def test_fleet_state_hands_the_chunk_budget_to_the_core_and_the_executor(
    services: Services, session_factory
) -> None:
    from control.services.fleet_state import model_ref
    from db.models import ServedModel

    for name, chunk in (("llm-chunked", 256), ("llm-whole", 0)):
        services.models.create(
            ACTOR, name=name, version="1", task="generate", weights_source="path",
            weights_location="/models/llm", memory_mib=100, continuous_batching=True,
            prefill_chunk_tokens=chunk,
        )  # fmt: skip
    with session_scope(session_factory) as session:
        state = load_fleet_state(session, include_declared=True)
        refs = {r.name: model_ref(r) for r in session.query(ServedModel)}
    chunks = {m.name: m.prefill_chunk_tokens for m in state.models}
    assert chunks == {"llm-chunked": 256, "llm-whole": 0}
    assert refs["llm-chunked"].options == {"prefill_chunk_tokens": 256}
    assert refs["llm-whole"].options == {}  # the adapter prefills whole prompts


def test_update_refuses_chunks_without_the_loop_and_writes_nothing(
    services: Services, session_factory
) -> None:
    made = _model(services, "m", "generate", continuous_batching=True, prefill_chunk_tokens=512)
    before = row_counts(session_factory)
    with pytest.raises(ValidationError) as err:
        services.models.update(ACTOR, made.id, continuous_batching=False)
    assert err.value.field == "continuous_batching"
    assert row_counts(session_factory) == before
    after = services.models.update(
        ACTOR, made.id, continuous_batching=False, prefill_chunk_tokens=0
    )
    assert (after.continuous_batching, after.prefill_chunk_tokens) == (False, 0)
