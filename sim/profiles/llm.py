"""LLM latency rows per (family, GPU, tensor-parallel degree), from the Splitwise measurements.

Measured: ``llama2-70b`` on A100/H100 at TP 2, 4 and 8 and ``bloom-176b`` on A100/H100 at TP 8
are the table's own slices (``splitwise_rows``, unchanged). Everything else is derived by two
rules stated here and in ``README.md``, with their errors on held-out measurements:

- **TP / model-size rule.** Per prefill point (batch, prompt tokens) and per decode batch, the
  reference family's times on one GPU are fitted by least squares as ``t = c + k x P / tp``
  over its measured TP degrees (``P`` the parameters in billions, so ``P / tp`` the weights
  each GPU holds; ``c`` the per-layer fixed cost: kernel launches, all-reduce, scheduling). A
  family or degree without measurements reads ``c x L'/L + k x P'/tp'`` (``L`` the layer
  count). BLOOM-176B's FP16 weights fit these GPUs at TP 8 only, where it is measured.
- **GPU rule** (``sim.profiles.gpus``): L4 figures are the A100 ones scaled by the datasheet
  TFLOPS ratio (prefill) and bandwidth ratio (decode). Checked the one way it can be (H100
  from A100, both measured), this whole-time form erred less than scaling only the part above
  the TP fit's fixed ``c`` (that part is largely TP communication, which H100 also speeds up).

Every table gets rows at 1..64 prompt tokens (``with_short_prompts``). Derived prefill tables
are made monotone (a point is at least every point with no more batch
and no more tokens): latency never shrinks as work grows, whatever the fit's noise.
"""

from __future__ import annotations

from dataclasses import dataclass

from control.core.latency import DecodeRow, LatencyRow
from sim.profiles.gpus import GPUS, bandwidth_ratio, compute_ratio, gpu_key
from sim.profiles.splitwise import fit_decode, measured_means, prefill_grid, splitwise_rows


@dataclass(frozen=True)
class LlmFamily:
    key: str
    params_b: float  # parameters, billions
    layers: int
    measured_tp: tuple[int, ...] = ()  # TP degrees the Splitwise table measured


LLM_FAMILIES: dict[str, LlmFamily] = {
    f.key: f
    for f in (
        LlmFamily("llama2-70b", 69.0, 80, (2, 4, 8)),
        LlmFamily("bloom-176b", 176.2, 70, (8,)),
        LlmFamily("llama2-13b", 13.0, 40),
        LlmFamily("llama2-7b", 6.74, 32),
    )
}
SPLITWISE_HW = {"a100": "a100-80gb", "h100": "h100-80gb"}
REFERENCE = "llama2-70b"  # the one family measured at several TP degrees
SHORT_PROMPTS = (1, 16, 32, 64)  # below the table's smallest prompt (128 tokens)

Points = dict  # key (batch, tokens) for prefill or batch for decode -> microseconds


def slice_means(family: str, gpu: str, tp: int) -> tuple[Points, Points]:
    """Measured means of one Splitwise slice in us: prefill {(batch, tokens)} with the
    inconsistent points dropped as ``prefill_grid`` drops them, and decode {batch}."""
    prefill, decode = measured_means(family, SPLITWISE_HW[gpu], tp)
    kept = {k: float(v) for k, v in prefill_grid(prefill).items() if k in prefill}
    return kept, {b: sum(v) / len(v) for b, v in decode.items()}


def fit_tp(points: dict[int, float], params_b: float) -> tuple[float, float]:
    """Least squares ``t = c + k x params_b / tp`` over {tp: t}; c is clamped at >= 0 (then the
    line goes through the origin) so that no extrapolation turns negative."""
    xs = [params_b / tp for tp in points]
    ys = list(points.values())
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    var = sum((x - mx) ** 2 for x in xs)
    k = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0
    c = my - k * mx
    if c < 0 or k < 0:
        c, k = (0.0, sum(x * y for x, y in zip(xs, ys, strict=True)) / sum(x * x for x in xs))
    return c, k


def scale_points(per_tp: dict[int, Points], fam: LlmFamily, tp: int) -> Points:
    """The TP / model-size rule over the reference family's points {tp: points}: every key
    measured at two or more degrees gets ``c x L'/L + k x P'/tp`` for ``fam`` at ``tp``."""
    ref = LLM_FAMILIES[REFERENCE]
    out: Points = {}
    for key in sorted({k for pts in per_tp.values() for k in pts}):
        seen = {t: pts[key] for t, pts in per_tp.items() if key in pts}
        if len(seen) < 2:
            continue
        c, k = fit_tp(seen, ref.params_b)
        out[key] = c * fam.layers / ref.layers + k * fam.params_b / tp
    return out


def tp_scaled(
    family: str, gpu: str, tp: int, fit_tps: tuple[int, ...] = ()
) -> tuple[Points, Points]:
    """Prefill and decode points of ``family`` at ``tp`` on a Splitwise GPU by the TP rule,
    fitted on the reference family's ``fit_tps`` there (default: all it measured)."""
    fam, ref = LLM_FAMILIES[family], LLM_FAMILIES[REFERENCE]
    slices = {t: slice_means(REFERENCE, gpu, t) for t in (fit_tps or ref.measured_tp)}
    prefill = scale_points({t: s[0] for t, s in slices.items()}, fam, tp)
    return prefill, scale_points({t: s[1] for t, s in slices.items()}, fam, tp)


def gpu_scaled(points: tuple[Points, Points], source: str, target: str) -> tuple[Points, Points]:
    """The GPU rule: prefill times x the TFLOPS ratio, decode times x the bandwidth ratio."""
    pre, dec = compute_ratio(source, target), bandwidth_ratio(source, target)
    return {k: v * pre for k, v in points[0].items()}, {k: v * dec for k, v in points[1].items()}


def monotone(points: dict[tuple[int, int], int]) -> dict[tuple[int, int], int]:
    """Each (batch, tokens) point raised to the largest point with no more batch and tokens."""
    return {
        (b, p): max(v for (b2, p2), v in points.items() if b2 <= b and p2 <= p)
        for (b, p) in sorted(points)
    }


def with_short_prompts(points: dict[tuple[int, int], int]) -> dict[tuple[int, int], int]:
    """``points`` plus rows at 1..64 prompt tokens for every batch size it has (the table starts
    at 128), so the twin never extrapolates a batch's curve below its measured range (where a
    steep curve would reach zero). Prefill cost follows the batch's total tokens ``b x p``:
    read from the batch-1 curve, and below its smallest prompt, its smallest time (the fixed
    per-iteration cost dominates there)."""
    single = sorted((p, us) for (b, p), us in points.items() if b == 1)
    out = dict(points)
    for b in sorted({b for b, _ in points}):
        for p in SHORT_PROMPTS:
            out.setdefault((b, p), round(_on_curve(single, b * p)))
    return dict(sorted(out.items()))


def _on_curve(curve: list[tuple[int, int]], n: int) -> float:
    """Piecewise-linear in n within the curve, its first value below, its last slope above."""
    if n <= curve[0][0]:
        return curve[0][1]
    i = next((j for j, (x, _) in enumerate(curve) if x >= n), len(curve) - 1)
    (x0, y0), (x1, y1) = curve[i - 1], curve[i]
    return y0 + (y1 - y0) * (n - x0) / (x1 - x0)


def check_fits(fam: LlmFamily, gpu: str, tp: int) -> None:
    """Refuse a degree whose FP16 weights (2 bytes a parameter) exceed 90% of a GPU's memory."""
    if tp < 1:
        raise ValueError(f"{fam.key}: tp={tp} must be >= 1")
    per_gpu_gib = 2 * fam.params_b * 1e9 / tp / 2**30
    if per_gpu_gib > 0.9 * GPUS[gpu].memory_gib:
        raise ValueError(
            f"{fam.key} at tp={tp} on {gpu}: {per_gpu_gib:.1f} GiB of weights per GPU do not fit "
            f"in {GPUS[gpu].memory_gib:g} GiB; use a larger tp"
        )


def llm_profile(
    family: str, gpu: str, tp: int, as_model: str, as_accelerator: str
) -> tuple[tuple[LatencyRow, ...], DecodeRow, str]:
    """Rows, decode row and a source line (saying measured or derived, and how) for one LLM
    family on one GPU at one TP degree. Raises ValueError for an unknown family or GPU, or a
    degree whose weights do not fit."""
    if family not in LLM_FAMILIES:
        raise ValueError(f"llm family {family!r}: known {sorted(LLM_FAMILIES)}")
    fam, g = LLM_FAMILIES[family], gpu_key(gpu)
    check_fits(fam, g, tp)
    if g in SPLITWISE_HW and tp in fam.measured_tp:
        rows, dec = splitwise_rows(family, SPLITWISE_HW[g], tp, as_model, as_accelerator)
        grid = with_short_prompts({(r.batch_size, r.tokens): r.latency_us for r in rows})
        rows = tuple(LatencyRow(as_model, as_accelerator, b, p, us) for (b, p), us in grid.items())
        source = "measured (short-prompt rows by total tokens)"
        return rows, dec, f"{source}: Splitwise {family}/{SPLITWISE_HW[g]}/tp{tp} (MIT)"
    base = g if g in SPLITWISE_HW else "a100"
    measured = tp in fam.measured_tp
    how = [] if measured else [f"TP/model-size rule from {REFERENCE} TP 2/4/8"]
    points = slice_means(family, base, tp) if measured else tp_scaled(family, base, tp)
    if base != g:
        how.append(f"GPU rule from {base} (prefill x{compute_ratio(base, g):.2f}, "
                   f"decode x{bandwidth_ratio(base, g):.2f})")  # fmt: skip
        points = gpu_scaled(points, base, g)
    prefill, decode = points
    grid = monotone(with_short_prompts(prefill_grid({k: [v] for k, v in prefill.items()})))
    rows = tuple(LatencyRow(as_model, as_accelerator, b, p, us) for (b, p), us in grid.items())
    fixed, per_seq = fit_decode(sorted(decode.items()))
    source = f"derived: Splitwise (MIT) by {'; '.join(how)}"
    return rows, DecodeRow(as_model, as_accelerator, fixed, per_seq), source
