"""Embedding and reranker (small encoder) latency rows per (family, GPU).

Measured: ``bert-base`` (BAAI/bge-base-en-v1.5, a 12-layer 768-wide BERT) forward latency on one
A100-SXM4-80GB, ONNX Runtime CUDA provider at optimization level O4 (fp16), from
optimum-benchmark's fast-mteb sweep (``optimum_fast_mteb_short_report.csv``): batch 1 at 16..512
tokens and batch 1..2048 at 256 tokens.

The two sweeps are joined on the batch's total tokens ``N = batch x tokens`` (an encoder's cost
follows N: its matrix products are over all tokens of the batch, and attention over <= 512
tokens is a small share); where both measure one N their times are averaged. Grid rows at
batch 1..256 and 16..512 tokens read that curve piecewise-linearly.

Derived (stated as such; no public per-GPU tables for these were found):

- **Other encoders** (MiniLM-L6/L12, the all-MiniLM embedders and the ms-marco MiniLM
  cross-encoder rerankers): ``t' = floor x L'/L + (t - floor) x F'/F``, where ``floor`` is the
  smallest measured time (launch-bound: kernels per layer), ``L`` the layers and ``F`` the
  per-token FLOPs ``L x (4 h^2 + 2 h f)`` (hidden ``h``, feed-forward ``f``).
- **Other GPUs**: the part above the floor scales by the datasheet TFLOPS ratio
  (``sim.profiles.gpus``); the launch-bound floor does not.

A reranker is a cross-encoder over (query, passage) pairs: the same table, with tokens the
pair's tokens. Encoders run at TP 1 (they fit any of these GPUs many times over).
"""

from __future__ import annotations

import csv
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from control.core.latency import LatencyRow
from sim.profiles.gpus import compute_ratio, gpu_key

TABLE = Path(__file__).with_name("optimum_fast_mteb_short_report.csv")
PROVIDER = "CUDAExecutionProvider"  # the ORT CUDA O4 sweep: the only one measured to batch 2048
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
TOKENS = (16, 32, 64, 128, 256, 512)


@dataclass(frozen=True)
class EncoderFamily:
    key: str
    layers: int
    hidden: int
    ffn: int

    @property
    def flops_per_token(self) -> int:
        return self.layers * (4 * self.hidden**2 + 2 * self.hidden * self.ffn)


ENCODER_FAMILIES: dict[str, EncoderFamily] = {
    f.key: f
    for f in (
        EncoderFamily("bert-base", 12, 768, 3072),
        EncoderFamily("minilm-l12", 12, 384, 1536),
        EncoderFamily("minilm-l6", 6, 384, 1536),
    )
}
MEASURED = ("bert-base", "a100")


def measured_points(path: Path = TABLE) -> dict[tuple[int, int], float]:
    """bert-base on A100: {(batch, tokens): us}, repeated (batch, tokens) averaged."""
    seen: dict[tuple[int, int], list[float]] = defaultdict(list)
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            if row["Provider"] == PROVIDER:
                key = (int(row["Batch Size"]), int(row["Sequence Length"]))
                seen[key].append(float(row["Forward Latency (s)"]) * 1e6)
    return {k: sum(v) / len(v) for k, v in sorted(seen.items())}


def total_token_curve(points: dict[tuple[int, int], float]) -> list[tuple[int, float]]:
    """(N = batch x tokens, us) sorted by N, measurements at one N averaged."""
    by_n: dict[int, list[float]] = defaultdict(list)
    for (b, p), us in points.items():
        by_n[b * p].append(us)
    return [(n, sum(v) / len(v)) for n, v in sorted(by_n.items())]


def read_curve(curve: list[tuple[int, float]], n: int) -> float:
    """Piecewise-linear in N; beyond the ends, the end segment's slope (never below zero)."""
    i = next((j for j, (x, _) in enumerate(curve) if x >= n), len(curve) - 1)
    i = min(max(i, 1), len(curve) - 1)
    (x0, y0), (x1, y1) = curve[i - 1], curve[i]
    slope = max(0.0, (y1 - y0) / (x1 - x0))
    return max(y0 + slope * (n - x0), 1.0)


def encoder_profile(
    family: str,
    gpu: str,
    as_model: str,
    as_accelerator: str,
    points: dict[tuple[int, int], float] | None = None,
) -> tuple[tuple[LatencyRow, ...], str]:
    """Grid rows and a source line for one encoder family on one GPU. ``points`` replaces the
    measured bert-base/A100 points (held-out tests fit on a subset). Raises ValueError for an
    unknown family or GPU."""
    if family not in ENCODER_FAMILIES:
        raise ValueError(f"encoder family {family!r}: known {sorted(ENCODER_FAMILIES)}")
    fam, ref, g = ENCODER_FAMILIES[family], ENCODER_FAMILIES["bert-base"], gpu_key(gpu)
    curve = total_token_curve(points if points is not None else measured_points())
    floor = min(us for _, us in curve)
    layers = fam.layers / ref.layers
    work = fam.flops_per_token / ref.flops_per_token * compute_ratio("a100", g)
    rows = tuple(
        LatencyRow(
            as_model,
            as_accelerator,
            b,
            p,
            round(floor * layers + (read_curve(curve, b * p) - floor) * work),
        )
        for b in BATCHES
        for p in TOKENS
    )
    how = []
    if family != "bert-base":
        how.append(
            f"encoder rule from bert-base (FLOPs x{fam.flops_per_token / ref.flops_per_token:.3f})"
        )
    if g != "a100":
        how.append(f"GPU rule from a100 (x{compute_ratio('a100', g):.2f} above the launch floor)")
    kind = f"derived by {'; '.join(how)}" if how else "measured"
    return rows, f"{kind}: optimum-benchmark fast-mteb bge-base/A100 ORT CUDA O4 (Apache-2.0)"
