"""Reader for the Mooncake FAST'25 JSONL traces (timestamp ms, lengths, prefix block hashes)."""

from __future__ import annotations

import json
from pathlib import Path

from sim.traces.records import TraceRequest

#: Tokens per prefix block in the Mooncake traces.
MOONCAKE_BLOCK_TOKENS = 512


def read_mooncake_jsonl(path: Path | str, max_requests: int | None = None) -> list[TraceRequest]:
    """Read a Mooncake trace; ``timestamp`` is milliseconds from the trace start."""
    out: list[TraceRequest] = []
    with open(path) as fh:
        for line_no, line in enumerate(fh, start=1):
            if max_requests is not None and len(out) >= max_requests:
                break
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                out.append(
                    TraceRequest(
                        arrival_s=int(obj["timestamp"]) / 1000.0,
                        input_tokens=int(obj["input_length"]),
                        output_tokens=int(obj["output_length"]),
                        block_hashes=tuple(int(h) for h in obj.get("hash_ids", ())),
                    )
                )
            except (KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"{path}:{line_no}: not a Mooncake record ({exc!r})") from None
    out.sort(key=lambda r: r.arrival_s)
    return out
