"""The SplitwiseSim performance model as core latency rows (see README.md for attribution).

``splitwise_rows`` selects one (model, hardware, tensor-parallel degree) slice of the table and
returns prefill rows keyed by the twin's own model key and accelerator name, plus one decode row.
Prefill: ``prompt_time`` (ms) per (batch size, prompt tokens), the mean of repeated measurements.
Decode: ``token_time`` (ms per iteration) averaged per batch size, then fitted as
``fixed + per_seq x batch`` by least squares, as the core's decode model wants.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

from control.core.latency import DecodeRow, LatencyRow

TABLE = Path(__file__).with_name("splitwise_perf_model.csv")


def fit_decode(points: list[tuple[int, float]]) -> tuple[int, int]:
    """Least-squares line through (batch, us); slope and intercept clamped at >= 0 / >= 1."""
    n = len(points)
    mx = sum(b for b, _ in points) / n
    my = sum(y for _, y in points) / n
    var = sum((b - mx) ** 2 for b, _ in points)
    slope = sum((b - mx) * (y - my) for b, y in points) / var if var else 0.0
    slope = max(0.0, slope)
    return max(1, round(my - slope * mx)), round(slope)


def prefill_grid(prefill: dict[tuple[int, int], list[float]]) -> dict[tuple[int, int], int]:
    """Measured means, made usable for interpolation over both batch and tokens.

    The table measures batch > 1 only at a 512-token prompt, so a batch curve would be flat in
    tokens. Prefill cost follows the batch's total tokens, so a missing (b, p) point is taken
    from the batch-1 curve at ``b x p`` tokens (within the measured range). A measurement that
    is lower than a smaller batch at the same prompt size (batch 64 in the table) is dropped as
    inconsistent.
    """
    mean = {k: sum(v) / len(v) for k, v in prefill.items()}
    single = {p: us for (b, p), us in mean.items() if b == 1}
    out: dict[tuple[int, int], int] = {}
    for (b, p), us in sorted(mean.items()):
        smaller = [v for (b2, p2), v in out.items() if p2 == p and b2 < b]
        if smaller and us < max(smaller):
            continue
        out[(b, p)] = round(us)
    for b in sorted({b for b, _ in out}):
        for p in sorted(single):
            if (b, p) not in out and b * p in single:
                out[(b, p)] = round(single[b * p])
    return dict(sorted(out.items()))


def measured_means(
    model: str, hardware: str, tp: int, path: Path = TABLE
) -> tuple[dict[tuple[int, int], list[float]], dict[int, list[float]]]:
    """The table's measurements of one slice in microseconds: prefill per (batch, prompt tokens)
    and decode iteration time per batch, each a list of the repeated measurements. Raises
    ValueError naming the slice when the table has no such rows."""
    prefill: dict[tuple[int, int], list[float]] = defaultdict(list)
    decode: dict[int, list[float]] = defaultdict(list)
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            if (row["model"], row["hardware"], int(row["tensor_parallel"])) != (
                model,
                hardware,
                tp,
            ):
                continue
            b, p = int(row["batch_size"]), int(row["prompt_size"])
            prefill[(b, p)].append(float(row["prompt_time"]) * 1000)
            decode[b].append(float(row["token_time"]) * 1000)
    if not prefill:
        raise ValueError(
            f"splitwise table has no rows for model={model!r} hardware={hardware!r} tp={tp}"
        )
    return dict(prefill), dict(decode)


def splitwise_rows(
    model: str, hardware: str, tp: int, as_model: str, as_accelerator: str, path: Path = TABLE
) -> tuple[tuple[LatencyRow, ...], DecodeRow]:
    """Rows for ``model``/``hardware``/``tp`` of the table, renamed ``as_model`` on
    ``as_accelerator``. Raises ValueError naming the slice when the table has no such rows."""
    prefill, decode = measured_means(model, hardware, tp, path)
    rows = tuple(
        LatencyRow(as_model, as_accelerator, b, p, us)
        for (b, p), us in prefill_grid(prefill).items()
    )
    fixed, per_seq = fit_decode([(b, sum(v) / len(v)) for b, v in sorted(decode.items())])
    return rows, DecodeRow(as_model, as_accelerator, fixed, per_seq)
