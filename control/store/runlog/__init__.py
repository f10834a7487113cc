"""The run log: request records, their ends and the usage ledger, written by group commit.

* :mod:`.ops`: the operations (plain data) and their outcomes;
* :mod:`.apply`: a batch of operations -> outcomes, over one database kind's statements;
* :mod:`.core_sql` (PostgreSQL; the plain path) and :mod:`.sqlite_sql` (a SQLite file): the
  statements, one SQL path per database kind;
* :mod:`.writer`: the group-commit writer; :mod:`.backends` and :mod:`.sqlite_file`: where its
  transactions run; :mod:`.config`: its settings, each fast path with its switch.
"""

from control.store.runlog.backends import backend_for
from control.store.runlog.config import FAST_PATHS, WriterConfig
from control.store.runlog.ops import (
    TERMINAL,
    AcceptRequest,
    BillStep,
    FinishRequest,
    KeyReused,
    Submission,
)
from control.store.runlog.writer import GroupCommitWriter

__all__ = [
    "FAST_PATHS",
    "TERMINAL",
    "AcceptRequest",
    "BillStep",
    "FinishRequest",
    "GroupCommitWriter",
    "KeyReused",
    "Submission",
    "WriterConfig",
    "backend_for",
]
