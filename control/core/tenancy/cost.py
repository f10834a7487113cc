"""One cost scale for every model of a workflow.

Fair share and quotas must add up embedding, rerank and LLM work of one request as a whole. A
token of a 135M-parameter LLM's output costs far more device time than a token fed to a 22M
embedding model, so each model gets integer weights (milli-units per input token and per output
token) derived from its measured latency profile; a step's cost is the weighted token sum.

The unit is calibrated so that one cost unit is about one input token of the reference model
(the cheapest measured one). All arithmetic is integer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

#: Weight used for a model with no profile yet: a plain token count.
DEFAULT_MILLI_PER_TOKEN = 1000


@dataclass(frozen=True)
class ModelCostWeight:
    """Milli-units charged per input and per output token of one model."""

    input_milli: int = DEFAULT_MILLI_PER_TOKEN
    output_milli: int = DEFAULT_MILLI_PER_TOKEN

    def __post_init__(self) -> None:
        if self.input_milli < 0 or self.output_milli < 0:
            raise ValueError(
                f"cost weights must be >= 0, got input_milli={self.input_milli}, "
                f"output_milli={self.output_milli}"
            )


#: Weight of a model with no measured profile (one unit per token); built once, not per call.
_UNKNOWN_MODEL = ModelCostWeight()


@dataclass(frozen=True)
class CostModel:
    """Maps (model, tokens in, tokens out) to integer cost units.

    ``weights`` is keyed by model key (``name:version`` or any id the caller uses consistently).
    Unknown models cost one unit per token, so a new model is never free.
    """

    weights: Mapping[str, ModelCostWeight] = field(default_factory=dict)

    def cost_units(self, model_key: str, input_tokens: int, output_tokens: int) -> int:
        """Cost of one step, rounded up so that no non-empty step is free."""
        if input_tokens < 0 or output_tokens < 0:
            raise ValueError(
                f"token counts must be >= 0, got input_tokens={input_tokens}, "
                f"output_tokens={output_tokens} for model {model_key!r}"
            )
        w = self.weights.get(model_key) or _UNKNOWN_MODEL
        milli = input_tokens * w.input_milli + output_tokens * w.output_milli
        return -(-milli // 1000)

    @classmethod
    def from_profiles(
        cls,
        input_us_per_token: Mapping[str, int],
        output_us_per_token: Mapping[str, int] | None = None,
    ) -> CostModel:
        """Derive weights from measured microseconds per token.

        The cheapest positive input figure becomes 1000 milli-units (one unit per token); every
        other figure scales against it, so the ratio of costs equals the ratio of device time.
        """
        output_us_per_token = output_us_per_token or {}
        figures = [
            v for v in (*input_us_per_token.values(), *output_us_per_token.values()) if v > 0
        ]
        if not figures:
            return cls({})
        reference = min(figures)
        keys = set(input_us_per_token) | set(output_us_per_token)
        weights = {}
        for key in keys:
            in_us = input_us_per_token.get(key, reference)
            out_us = output_us_per_token.get(key, in_us)
            weights[key] = ModelCostWeight(
                input_milli=max(1, in_us * 1000 // reference),
                output_milli=max(1, out_us * 1000 // reference),
            )
        return cls(weights)
