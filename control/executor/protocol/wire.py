"""The messages between an executor's host side and a worker process: one vocabulary, both ways.

A message is a tuple ``(kind, *fields)``, pickled whole (:func:`encode`); tuples because they
pickle and dispatch in a fraction of what a class per message costs, once per batch each way.
The kinds and their fields, in order:

Host to worker (a worker runs them in arrival order, except ``cancel``, handled on arrival):

* ``LOAD`` load_id, replica_id, ModelRef: load it (the loader thread; answered ``LOADED`` or
  ``LOAD_FAILED``);
* ``UNLOAD`` replica_id: answered ``UNLOADED``;
* ``BATCH`` Batch, moved, announce: run it; ``moved`` maps (run_id, node_id, field) to the
  packed values of inputs held by other workers; ``announce``: send ``STARTED`` when it starts
  (False: the host timed it from its send to an idle worker);
* ``EXPORT`` request_id, run_id, node_id, field: pack one field of a held output for another
  worker (answered ``EXPORTED``; a tensor travels as a :class:`ShmTensor`);
* ``FETCH`` request_id, run_id, node_id: a plain copy of a held output (answered ``FETCHED``);
* ``RELEASE`` *run_ids: drop the held outputs of these finished runs;
* ``CANCEL`` keys: take these items out of batches not started (answered ``CANCELLED``);
* ``STOP``: end after what came before.

Worker to host:

* ``HEARTBEAT`` pid, busy, replica_ids, used_mib: every interval, from a thread of its own;
* ``LOADED`` load_id, replica_id, load_ms, mib; ``LOAD_FAILED`` load_id, replica_id, error;
* ``UNLOADED`` replica_id, freed_mib;
* ``STARTED`` batch_id: it began (or joined a running decode loop);
* ``RESULTS`` batch_id, [ItemResult]: every item of the batch (its own, when several joined);
* ``DELTA`` idempotency_key, StepKey, index, text: a piece of streamed text;
* ``EXPORTED`` request_id, packed value or None, error or None;
* ``FETCHED`` request_id, value or None, error or None;
* ``CANCELLED`` batch_id, [ItemResult], remaining: items taken out, ``remaining`` still run.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass

LOAD = "load"
UNLOAD = "unload"
BATCH = "batch"
EXPORT = "export"
FETCH = "fetch"
RELEASE = "release"
CANCEL = "cancel"
STOP = "stop"

HEARTBEAT = "hb"
LOADED = "loaded"
LOAD_FAILED = "load_failed"
UNLOADED = "unloaded"
STARTED = "started"
RESULTS = "results"
DELTA = "delta"
EXPORTED = "exported"
FETCHED = "fetched"
CANCELLED = "cancelled"


def encode(msg: tuple) -> bytes:
    """``msg`` pickled as ``Connection.recv`` unpickles it. Plain ``pickle``, not the
    ``ForkingPickler`` that ``Connection.send`` uses: that one copies the whole ``copyreg``
    table per message for reducers of handles (sockets, connections) never sent here, which
    cost half again the pickling itself (~8 us of ~20 for a one-item batch)."""
    return pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)


@dataclass(frozen=True)
class ShmTensor:
    """A tensor in a named shared-memory block, as it crosses between workers (the block holds
    the data; the message only this). Here, not on the worker side, because the host unpickles
    it on the way (without torch)."""

    name: str
    shape: tuple[int, ...]
    dtype: str  # numpy dtype string
