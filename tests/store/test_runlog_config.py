"""The run log's fast-path switches: each named one turns off, and the configuration says
which are on (``bench/gateway.py --without`` prints it)."""

from __future__ import annotations

import pytest

from control.store.runlog import FAST_PATHS, GroupCommitWriter, WriterConfig
from control.store.runlog import writer as writer_module
from db.session import make_engine, make_session_factory


@pytest.mark.parametrize(
    ("names", "on"),
    [
        ((), {"raw_sqlite": True, "inline_commits": True, "commit_at_turn_end": True}),
        (("raw_sqlite",), {"raw_sqlite": False, "inline_commits": False, "commit_at_turn_end": True}),
        (("inline_commits",), {"raw_sqlite": True, "inline_commits": False, "commit_at_turn_end": True}),
        (FAST_PATHS, {"raw_sqlite": False, "inline_commits": False, "commit_at_turn_end": False}),
    ],
)  # fmt: skip
def test_without_switches_off_exactly_the_named_fast_paths(names, on) -> None:
    assert WriterConfig().without(*names).fast_paths() == on


def test_an_unknown_fast_path_is_named() -> None:
    with pytest.raises(ValueError, match="linger"):
        WriterConfig().without("linger")


@pytest.mark.parametrize("at_turn_end", [True, False])
async def test_commit_now_starts_the_batch_only_when_switched_on(at_turn_end) -> None:
    writer = GroupCommitWriter(make_session_factory(make_engine("sqlite://")),
                               WriterConfig(commit_at_turn_end=at_turn_end))  # fmt: skip
    writer.start()
    flushed = writer.submit(writer_module._FLUSH)
    writer.commit_now()
    assert flushed.done() is at_turn_end  # off: the loop's next iteration starts it
    await flushed
    await writer.stop()
