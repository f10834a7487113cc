"""Trace readers: public request traces turned into one record type for replay.

Every reader returns a list of :class:`TraceRequest` sorted by arrival, arrivals in seconds from
the start of the trace. The twin replays them, ``legato loadgen`` sends them to the API.
"""

from sim.traces.records import TraceRequest, scale_time, shipped_trace_path

__all__ = ["TraceRequest", "scale_time", "shipped_trace_path"]
