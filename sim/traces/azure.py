"""Reader for the Azure LLM inference traces (2023: TIMESTAMP, ContextTokens, GeneratedTokens)."""

from __future__ import annotations

import csv
from datetime import datetime
from pathlib import Path

from sim.traces.records import TraceRequest

_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


def parse_azure_timestamp(text: str) -> datetime:
    """Parse ``2023-11-16 18:17:03.9799600``.

    The trace writes 7 fractional digits and Python's ``%f`` takes at most 6, so the fraction is
    cut to microseconds. A ``+00:00`` offset (the 2024 traces) is accepted too.
    """
    text = text.strip()
    offset = ""
    if len(text) > 6 and text[-6] in "+-" and text[-3] == ":":
        text, offset = text[:-6], text[-6:]
    if "." in text:
        head, frac = text.split(".", 1)
        text = f"{head}.{frac[:6]}"
        fmt = "%Y-%m-%d %H:%M:%S.%f"
    else:
        fmt = "%Y-%m-%d %H:%M:%S"
    if offset:
        return datetime.strptime(text + offset, fmt + "%z")
    return datetime.strptime(text, fmt)


def read_azure_csv(path: Path | str, max_requests: int | None = None) -> list[TraceRequest]:
    """Read an Azure LLM trace CSV; arrivals relative to the first row, sorted by time."""
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in _COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: not an Azure LLM trace, missing columns {missing}")
        rows = []
        for line_no, row in enumerate(reader, start=2):
            if max_requests is not None and len(rows) >= max_requests:
                break
            try:
                rows.append(
                    (
                        parse_azure_timestamp(row["TIMESTAMP"]),
                        int(row["ContextTokens"]),
                        int(row["GeneratedTokens"]),
                    )
                )
            except ValueError as exc:
                raise ValueError(f"{path}:{line_no}: {exc}") from None
    if not rows:
        return []
    rows.sort(key=lambda r: r[0])
    start = rows[0][0]
    return [
        TraceRequest(arrival_s=(ts - start).total_seconds(), input_tokens=ctx, output_tokens=gen)
        for ts, ctx, gen in rows
    ]
