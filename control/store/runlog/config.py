"""The group-commit writer's settings, each fast path with its switch.

The plain path is: every batch in one transaction on the database thread, through the Core
statements (:mod:`.core_sql`). The fast paths, each measured by ``bench/gateway.py`` with it
on and off (``--without NAME``; the JSON says which were on):

* ``raw_sqlite``: a SQLite file's batches run on a raw ``sqlite3`` connection
  (:mod:`.sqlite_sql`) instead of the Core statements;
* ``inline_commits`` (``inline_max_rows > 0``, needs ``raw_sqlite``): a small batch found while
  the database thread is idle commits on the event loop itself (:mod:`.sqlite_file`);
* ``commit_at_turn_end``: the driver's turn starts the commit of what it queued as the turn
  ends (``GroupCommitWriter.commit_now``), not on the loop's next iteration.

What they bought when measured (2-core shared machine, native core; ``bench/runlog.py`` for a
lone caller's commit, ``bench/gateway.py`` for the gateway's single-client overhead):
``raw_sqlite`` ~1 ms of commit wait and ~1 ms of CPU per run (about a third of the Core path's),
and +0.5-2 ms gateway overhead when off; ``inline_commits`` ~0.2 ms of commit wait and ~0.15 ms
of CPU per run, and lower p99 / higher req/s in every gateway round; ``commit_at_turn_end``
+0.5-2.6 ms gateway overhead when off, in every round. Under load (batches of ~190 rows) none
of the three changes the writer's own throughput: they pay where commits are small.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

#: Names of the fast paths, as ``bench/gateway.py --without`` takes them.
FAST_PATHS = ("raw_sqlite", "inline_commits", "commit_at_turn_end")


@dataclass(frozen=True)
class WriterConfig:
    max_rows: int = field(default=512, metadata={"help": "most operations in one transaction"})
    raw_sqlite: bool = field(
        default=True,
        metadata={"help": "on a SQLite file, run the run log's statements on a raw sqlite3 "
                  "connection (false: the Core statements, as on PostgreSQL)"},
    )  # fmt: skip
    inline_max_rows: int = field(
        default=8,
        metadata={"help": "largest batch committed on the event loop itself while the "
                  "database thread is idle (SQLite file with raw_sqlite only; 0: never)"},
    )  # fmt: skip
    checkpoint_every: int = field(
        default=128,
        metadata={"help": "inline commits between two WAL checkpoints, run on the database "
                  "thread (the loop's connection never checkpoints itself)"},
    )  # fmt: skip
    commit_at_turn_end: bool = field(
        default=True,
        metadata={"help": "commit_now starts the scheduled batch at once (false: it waits "
                  "for the loop's next iteration, like any other batch)"},
    )  # fmt: skip

    def __post_init__(self) -> None:
        if self.max_rows < 1:
            raise ValueError(f"max_rows must be >= 1, got {self.max_rows}")
        if self.inline_max_rows < 0:
            raise ValueError(f"inline_max_rows must be >= 0, got {self.inline_max_rows}")
        if self.checkpoint_every < 1:
            raise ValueError(f"checkpoint_every must be >= 1, got {self.checkpoint_every}")

    def fast_paths(self) -> dict[str, bool]:
        """Which fast paths this configuration has on (by the names of ``FAST_PATHS``)."""
        return {
            "raw_sqlite": self.raw_sqlite,
            "inline_commits": self.raw_sqlite and self.inline_max_rows > 0,
            "commit_at_turn_end": self.commit_at_turn_end,
        }

    def without(self, *names: str) -> WriterConfig:
        """This configuration with the fast paths ``names`` switched off. Raises ValueError
        naming an unknown one."""
        unknown = sorted(set(names) - set(FAST_PATHS))
        if unknown:
            raise ValueError(f"unknown fast path(s) {unknown}: expected some of {FAST_PATHS}")
        off: dict[str, object] = {}
        if "raw_sqlite" in names:
            off["raw_sqlite"] = False
        if "inline_commits" in names:
            off["inline_max_rows"] = 0
        if "commit_at_turn_end" in names:
            off["commit_at_turn_end"] = False
        return replace(self, **off)  # type: ignore[arg-type]
