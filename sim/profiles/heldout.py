"""Held-out checks of the public profiles: fit on part of the measurements, predict the rest.

Every function returns ``{"n": points predicted, "mean": mean |relative error|, "max": max}``
(errors as fractions). The twin's interpolation is the core's ``TableLatencyModel`` over rows
built, as a scenario builds them, from the measurements that were NOT held out; the derivation
rules are checked on the measurements they did not see (another TP degree, family or GPU).
``python bench/twin/profiles_heldout.py`` prints them all; ``tests/sim/test_gpu_profiles.py``
bounds them.
"""

from __future__ import annotations

from control.core.latency import LatencyRow, TableLatencyModel
from sim.profiles.encoders import encoder_profile, measured_points
from sim.profiles.llm import gpu_scaled, slice_means, tp_scaled
from sim.profiles.splitwise import fit_decode, prefill_grid

#: Held out of the Splitwise slices: every other prompt size at batch 1 and batch size at 512.
HELD_PROMPTS = (256, 1024, 4096)
HELD_BATCHES = (2, 8, 32)
#: Held out of the bge-base sweeps: every other point of each sweep (ends kept).
HELD_ENCODER = ((1, 32), (1, 128), (2, 256), (8, 256), (32, 256), (128, 256), (512, 256))


def _stats(pairs: list[tuple[float, float]]) -> dict[str, float]:
    errs = [abs(pred - meas) / meas for pred, meas in pairs]
    return {"n": len(errs), "mean": round(sum(errs) / len(errs), 4), "max": round(max(errs), 4)}


def _is_held(key: tuple[int, int]) -> bool:
    b, p = key
    return (b == 1 and p in HELD_PROMPTS) or (p == 512 and b in HELD_BATCHES)


def splitwise_interpolation(family: str, gpu: str, tp: int) -> dict[str, dict[str, float]]:
    """Prefill: rows from the kept points (filled as ``splitwise_rows`` fills them), the core
    predicts the held-out points. Decode: the line fitted on kept batches predicts the rest."""
    prefill, decode = slice_means(family, gpu, tp)
    kept = {k: [v] for k, v in prefill.items() if not _is_held(k)}
    rows = [("m", "g", b, p, us) for (b, p), us in prefill_grid(kept).items()]
    model = TableLatencyModel([LatencyRow(*r) for r in rows])
    held = [
        (model.forward_us("m", "g", b, p), v) for (b, p), v in prefill.items() if _is_held((b, p))
    ]
    fixed, per_seq = fit_decode([(b, v) for b, v in decode.items() if b not in HELD_BATCHES])
    dec = [(fixed + per_seq * b, v) for b, v in decode.items() if b in HELD_BATCHES]
    return {"prefill": _stats(held), "decode": _stats(dec)}


def encoder_interpolation() -> dict[str, float]:
    """bge-base on A100: grid rows from the kept points; the core predicts the held-out ones."""
    points = measured_points()
    kept = {k: v for k, v in points.items() if k not in HELD_ENCODER}
    rows, _ = encoder_profile("bert-base", "a100", "m", "g", points=kept)
    model = TableLatencyModel(rows)
    return _stats([(model.forward_us("m", "g", b, p), points[(b, p)]) for b, p in HELD_ENCODER])


def _compare(pred: tuple[dict, dict], meas: tuple[dict, dict]) -> dict[str, dict[str, float]]:
    return {
        phase: _stats([(pred[i][k], meas[i][k]) for k in meas[i] if k in pred[i]])
        for i, phase in enumerate(("prefill", "decode"))
    }


def tp_rule(gpu: str) -> dict[str, dict[str, float]]:
    """llama2-70b at TP 4 predicted from its TP 2 and TP 8 measurements on one GPU."""
    return _compare(
        tp_scaled("llama2-70b", gpu, 4, fit_tps=(2, 8)), slice_means("llama2-70b", gpu, 4)
    )


def family_rule(gpu: str) -> dict[str, dict[str, float]]:
    """bloom-176b at TP 8 predicted from llama2-70b's TP 2/4/8 by parameters and layers."""
    return _compare(tp_scaled("bloom-176b", gpu, 8), slice_means("bloom-176b", gpu, 8))


def gpu_rule(tp: int) -> dict[str, dict[str, float]]:
    """H100 predicted from the A100 measurements by the datasheet ratios (the rule that gives
    L4), llama2-70b at ``tp``."""
    pred = gpu_scaled(slice_means("llama2-70b", "a100", tp), "a100", "h100")
    return _compare(pred, slice_means("llama2-70b", "h100", tp))


def report() -> dict[str, object]:
    """Every held-out check, keyed by what it checks."""
    sw = {
        f"{fam}/{gpu}/tp{tp}": splitwise_interpolation(fam, gpu, tp)
        for fam, tps in (("llama2-70b", (2, 4, 8)), ("bloom-176b", (8,)))
        for gpu in ("a100", "h100")
        for tp in tps
    }
    return {
        "interpolation_splitwise": sw,
        "interpolation_encoder_bge_base_a100": encoder_interpolation(),
        "tp_rule_tp4_from_tp2_tp8": {g: tp_rule(g) for g in ("a100", "h100")},
        "family_rule_bloom_from_llama": {g: family_rule(g) for g in ("a100", "h100")},
        "gpu_rule_h100_from_a100": {f"tp{tp}": gpu_rule(tp) for tp in (2, 4, 8)},
    }
