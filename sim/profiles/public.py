"""Latency tables from public measurements, one entry point for scenarios.

``public_profile(family, gpu, tp, as_model, as_accelerator)`` gives the core's rows for an LLM
family (``sim.profiles.llm``: prefill rows plus a decode row) or an encoder family
(``sim.profiles.encoders``: forward rows, no decode) on H100, A100 or L4, named for the twin's
own model key and accelerator. Its ``source`` says whether the figures are measured or derived
and by which rule. A scenario asks for one in its ``latency.published`` list::

    latency:
      published:
        - {table: public, family: llama2-70b, tp: 2, as_model: "llama-70b:1", as_accelerator: H100-80GB}
        - {table: public, family: minilm-l6, as_model: "minilm-embed:1", as_accelerator: L4-24GB}

``gpu`` defaults to ``as_accelerator`` (any spelling starting a100/h100/l4), ``tp`` to 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from control.core.latency import DecodeRow, LatencyRow
from sim.profiles.encoders import ENCODER_FAMILIES, encoder_profile
from sim.profiles.llm import LLM_FAMILIES, llm_profile


@dataclass(frozen=True)
class PublicProfile:
    rows: tuple[LatencyRow, ...]
    decode: tuple[DecodeRow, ...]  # one row for an LLM, none for an encoder
    source: str


def families() -> list[str]:
    return sorted([*LLM_FAMILIES, *ENCODER_FAMILIES])


def public_profile(
    family: str, gpu: str, tp: int, as_model: str, as_accelerator: str
) -> PublicProfile:
    """Raises ValueError naming what is wrong: an unknown family or GPU, a TP degree an encoder
    does not use, or one whose weights do not fit."""
    if family in LLM_FAMILIES:
        rows, dec, source = llm_profile(family, gpu, tp, as_model, as_accelerator)
        return PublicProfile(rows, (dec,), source)
    if family in ENCODER_FAMILIES:
        if tp != 1:
            raise ValueError(f"encoder family {family!r}: tp={tp}, encoders run at tp 1")
        rows, source = encoder_profile(family, gpu, as_model, as_accelerator)
        return PublicProfile(rows, (), source)
    raise ValueError(f"public profile family {family!r}: known {families()}")
