"""The actuator carries out a plan in order, except that run ends come after everything else:
a replica's next batch goes out before the callers of the batch just finished are answered."""

from __future__ import annotations

from control.core.actions import Dispatch, Reject, RunFinished
from control.runtime.actuator import Actuator
from control.runtime.completions import Completions


def _actuator(done: list[str]) -> Actuator:
    completions = Completions({}, None, None, None, lambda *_: None, lambda *_: None)  # type: ignore[arg-type]
    act = Actuator(None, completions, {}, {}, {}, None, done.append)  # type: ignore[arg-type]

    def record(name: str):  # noqa: ANN202
        def handler(action, now: float) -> None:  # noqa: ANN001
            if getattr(action, "request_id", None) == "boom":
                raise RuntimeError("a bad action")
            done.append(f"{name}:{getattr(action, 'request_id', None) or action.batch_id}")

        return handler

    act._apply = {Dispatch: record("dispatch"), Reject: record("reject"),
                  RunFinished: record("end")}  # fmt: skip
    return act


def _end(request_id: str) -> RunFinished:
    return RunFinished(request_id, "succeeded", {}, None, "done")


def _dispatch(batch_id: str) -> Dispatch:
    return Dispatch(batch_id, "r1", "m:1", None, ("cpu:0",), (), 0, 0, "next batch")


def test_run_ends_wait_for_the_plans_other_actions_in_their_own_order() -> None:
    done: list[str] = []
    plan = (_end("a"), Reject("x", "over quota", 1.0), _end("b"), _dispatch("b7"))
    _actuator(done).apply(plan, 0.0)
    assert done == ["reject:x", "dispatch:b7", "end:a", "end:b"]


def test_a_failing_action_does_not_stop_the_others(caplog) -> None:  # noqa: ANN001
    done: list[str] = []
    _actuator(done).apply((_end("boom"), _dispatch("b1"), _end("c")), 0.0)
    assert done == ["dispatch:b1", "end:c"]
    assert "could not carry out" in caplog.text
