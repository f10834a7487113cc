"""ServeGen per-client arrival fits and token-length quantiles -> per-tenant trace requests.

ServeGen (Xiang et al., arXiv 2505.09999; Apache-2.0, see data/servegen/README.md) describes each
client by 600 s windows: a rate, a coefficient of variation and a fitted inter-arrival
distribution (``Gamma`` or ``Weibull`` with (shape, scale)); the CSVs have no header. Token
counts come as quantiles (q01..q100) per client and window. :func:`generate_servegen` draws
inter-arrival times from each window's fit, rescales them so the window keeps its measured rate
(as upstream's generator does), and draws token lengths by inverse-CDF over the quantiles.
"""

from __future__ import annotations

import bisect
import csv
import random
from dataclasses import dataclass
from pathlib import Path

from sim.traces.records import DATA_DIR, TraceRequest

SERVEGEN_DIR = DATA_DIR / "servegen"
_QUANTILES = ("q01", "q05", "q10", "q25", "q50", "q75", "q90", "q95", "q99", "q100")
_Q_AT = (0.01, 0.05, 0.10, 0.25, 0.50, 0.75, 0.90, 0.95, 0.99, 1.0)


@dataclass(frozen=True)
class ArrivalWindow:
    start_s: float
    rate_rps: float
    cv: float
    dist: str  # "Gamma" | "Weibull" | "" (idle)
    shape: float
    scale: float


def read_windows(path: Path | str) -> list[ArrivalWindow]:
    """One client's windows (headerless ``start, rate, cv, dist, shape, scale``)."""
    out = []
    with open(path, newline="") as fh:
        for line_no, row in enumerate(csv.reader(fh), start=1):
            if not row:
                continue
            try:
                start, rate = float(row[0]), float(row[1] or 0)
                cv = float(row[2] or 0)
                dist = row[3].strip() if len(row) > 3 else ""
                shape = float(row[4]) if len(row) > 4 and row[4] else 0.0
                scale = float(row[5]) if len(row) > 5 and row[5] else 0.0
            except ValueError as exc:
                raise ValueError(f"{path}:{line_no}: not a ServeGen window ({exc})") from None
            out.append(ArrivalWindow(start, rate, cv, dist, shape, scale))
    return sorted(out, key=lambda w: w.start_s)


def read_token_quantiles(path: Path | str) -> dict[tuple[int, str], list[tuple[float, list[int]]]]:
    """(client, field) -> [(window start, quantile values)] sorted by window start."""
    out: dict[tuple[int, str], list[tuple[float, list[int]]]] = {}
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            key = (int(row["client_id"]), row["field"])
            qs = [int(float(row[q])) for q in _QUANTILES]
            out.setdefault(key, []).append((float(row["window_start_s"]), qs))
    for v in out.values():
        v.sort(key=lambda x: x[0])
    return out


def _draw_tokens(qs: list[int], rng: random.Random) -> int:
    """Inverse CDF, linear between the quantile points (q01 holds below 1%)."""
    u = rng.random()
    i = bisect.bisect_left(_Q_AT, u)
    if i == 0:
        return max(0, qs[0])
    lo, hi = _Q_AT[i - 1], _Q_AT[i]
    return max(0, round(qs[i - 1] + (qs[i] - qs[i - 1]) * (u - lo) / (hi - lo)))


def _window_arrivals(w: ArrivalWindow, length: float, rng: random.Random) -> list[float]:
    if w.rate_rps <= 0 or w.dist not in ("Gamma", "Weibull") or w.shape <= 0 or w.scale <= 0:
        return []
    draw = (
        (lambda: rng.gammavariate(w.shape, w.scale))
        if w.dist == "Gamma"
        else (lambda: rng.weibullvariate(w.scale, w.shape))
    )
    gaps = [draw() for _ in range(max(1, round(w.rate_rps * length)))]
    factor = length / sum(gaps) if sum(gaps) > 0 else 1.0  # keep the window's measured rate
    out, t = [], 0.0
    for g in gaps:
        t += g * factor
        if t >= length:
            break
        out.append(w.start_s + t)
    return out


def generate_servegen(
    clients: dict[int, str], span_s: float, rng: random.Random, data_dir: Path = SERVEGEN_DIR
) -> list[TraceRequest]:
    """Arrivals over ``[0, span_s)`` for each client id, tagged with its tenant name."""
    tokens = read_token_quantiles(data_dir / "token_stats.csv")
    out: list[TraceRequest] = []
    for client, tenant in sorted(clients.items()):
        windows = [
            w for w in read_windows(data_dir / f"chunk-{client}-trace.csv") if w.start_s < span_s
        ]
        ins, outs = tokens.get((client, "input_tokens")), tokens.get((client, "output_tokens"))
        if not ins or not outs:
            raise ValueError(f"servegen client {client}: no token quantiles in token_stats.csv")
        for i, w in enumerate(windows):
            end = windows[i + 1].start_s if i + 1 < len(windows) else w.start_s + 600.0
            for t in _window_arrivals(w, min(end, span_s) - w.start_s, rng):
                out.append(
                    TraceRequest(
                        t,
                        _draw_tokens(ins[0][1], rng),
                        _draw_tokens(outs[0][1], rng),
                        tenant=tenant,
                    )
                )
    out.sort(key=lambda r: r.arrival_s)
    return out
