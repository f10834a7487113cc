"""DTOs of the tenant inference API: workflow runs and the OpenAI-compatible routes."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from control.api.schemas.common import Body

MAX_TOKENS = 4096
#: stop strings of one generate call, and the longest (as OpenAI's API allows)
MAX_STOPS, MAX_STOP_CHARS = 4, 200
Text = str


class RunCreate(Body):
    """Run a workflow. ``mode``: sync (wait up to ``timeout_s``), async (answer 202 with the
    run id at once) or stream (server-sent events of tokens, then the result)."""

    inputs: dict[str, Any] = Field(description="the workflow's inputs by name")
    mode: Literal["sync", "async", "stream"] = "sync"
    timeout_s: float | None = Field(None, gt=0, le=600, description="sync: 504 after this")
    max_output_tokens: int = Field(0, ge=0, le=MAX_TOKENS, description="0: the node's default")
    session_id: str | None = Field(None, max_length=200, description="routing affinity")
    adapter: str | None = Field(
        None, min_length=1, max_length=100,
        description="one of the tenant's LoRA adapters (GET /v1/adapters): the workflow's "
        "generate steps on the adapter's base model run with it",
    )  # fmt: skip
    quality: Literal["exact", "balanced", "fast"] | None = Field(
        None, description="which precision variant may serve it (None: the tenant's default)"
    )


class RunUsage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0
    device_ms: int = 0
    cost_units: int = 0


class NodeRun(BaseModel):
    """One node of a finished run: the step's bill, when it ended and what it produced (the
    workflow outputs it feeds; long values summarised)."""

    model: str | None = None
    device: str | None = None
    attempt: int | str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    device_ms: int = 0
    done_ms: int | None = Field(None, description="ms after the run was accepted")
    batch_size: int | None = None
    prefix_hit_tokens: int | None = Field(
        None, description="generate: prompt tokens served from the replica's KV prefix cache"
    )
    ttft_ms: float | None = Field(
        None, description="generate: ms from the run's submission to the step's first token"
    )
    outputs: dict[str, Any] | None = None


class VariantNote(BaseModel):
    """A step that ran on another precision variant than its quality class preferred."""

    node: str
    wanted: str = Field(description="the model key its quality class preferred")
    ran: str = Field(description="the model key (variant) that ran it")
    kind: str = Field(description="upgrade (no replica of the preferred) or degrade (saturated)")
    reason: str


class RunOut(BaseModel):
    """A run as its tenant sees it: status, outputs when it succeeded, error otherwise, and
    per-node figures once it ended."""

    id: str
    workflow: str
    version: str
    status: str
    outputs: dict[str, Any] | None = None
    error: str | None = None
    usage: RunUsage | None = None
    nodes: dict[str, NodeRun] | None = None
    retry_after_s: float | None = None
    received_at: datetime
    finished_at: datetime | None = None
    quality: str | None = Field(None, description="the quality class asked for (None: default)")
    degradations: list[VariantNote] | None = Field(
        None, description="steps run on another precision variant than their class preferred"
    )


class WorkflowTrialCreate(RunCreate):
    """A workflow test run the admin starts on behalf of ``tenant_id`` (billed to it)."""

    tenant_id: int = Field(ge=1, le=2**53 - 1, description="the tenant that runs and pays")
    mode: Literal["sync", "async"] = "sync"  # type: ignore[assignment]


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "legato"
    task: str


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class EmbeddingsCreate(BaseModel):
    model: str = Field(min_length=1, max_length=300, description="name or name:version")
    input: str | list[str] = Field(description="a text or up to 64 texts")
    encoding_format: Literal["float"] = "float"
    user: str | None = Field(None, max_length=200)


class Embedding(BaseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float]


class TokenUsage(BaseModel):
    prompt_tokens: int
    completion_tokens: int = 0
    total_tokens: int


class EmbeddingList(BaseModel):
    object: Literal["list"] = "list"
    data: list[Embedding]
    model: str
    usage: TokenUsage


class ChatMessage(BaseModel):
    role: Literal["system", "user", "assistant", "tool"]
    content: str = Field(max_length=200_000)


class GenerateOptions(BaseModel):
    """Sampling per request, each honoured or refused, never ignored: ``temperature`` (0 or
    absent: greedy), ``top_p`` and ``seed`` reach the model's generate step; ``stop`` strings
    end the text before the first of them; ``max_tokens`` bounds the output; ``n`` other than 1
    is refused (one choice per request). ``finish_reason`` says what really ended the text:
    "stop" (end of sequence or a stop string) or "length" (``max_tokens``, or the model's
    context full)."""

    model: str = Field(min_length=1, max_length=300)
    max_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    seed: int | None = Field(None, ge=0, le=2**63 - 1)
    stop: str | list[str] | None = Field(
        None, description="up to 4 strings; the text ends before the first one produced"
    )
    n: int = Field(1, description="choices per request: only 1 is served (more: a 422 naming n)",
                   json_schema_extra={"minimum": 1, "maximum": 1})  # fmt: skip
    stream: bool = False
    user: str | None = Field(None, max_length=200)

    @field_validator("n")
    @classmethod
    def _one_choice(cls, value: int) -> int:
        if value != 1:  # refused, not ignored
            raise ValueError(f"n={value}: only one choice per request is served (n=1); send n "
                             "requests for n choices")  # fmt: skip
        return value

    @field_validator("stop")
    @classmethod
    def _stops(cls, value: str | list[str] | None) -> list[str] | None:
        stops = [value] if isinstance(value, str) else value
        if stops is None:
            return None
        if len(stops) > MAX_STOPS or any(not 1 <= len(x) <= MAX_STOP_CHARS for x in stops):
            raise ValueError(f"at most {MAX_STOPS} stop strings of 1 to {MAX_STOP_CHARS} "
                             "characters each")  # fmt: skip
        return stops


class ChatCompletionCreate(GenerateOptions):
    messages: list[ChatMessage] = Field(min_length=1, max_length=256)


class CompletionCreate(GenerateOptions):
    prompt: str = Field(max_length=200_000)


class ChatChoice(BaseModel):
    index: int
    message: ChatMessage
    finish_reason: str


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    usage: TokenUsage


class CompletionChoice(BaseModel):
    index: int
    text: str
    finish_reason: str


class Completion(BaseModel):
    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: TokenUsage


class RerankCreate(BaseModel):
    model: str = Field(min_length=1, max_length=300)
    query: str = Field(min_length=1, max_length=50_000)
    documents: list[str] = Field(min_length=1, max_length=256)
    top_n: int | None = Field(None, ge=1, le=256)
    return_documents: bool = True


class RerankResult(BaseModel):
    """``relevance_score`` is the model's score when the one-model rerank workflow exposes
    the node's ``scores`` port (the core must declare it); null otherwise, with the documents
    still in the model's order."""

    index: int
    relevance_score: float | None = None
    document: dict[str, str] | None = None


class RerankResponse(BaseModel):
    id: str
    model: str
    results: list[RerankResult]
    usage: TokenUsage
