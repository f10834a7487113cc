"""OpenAI-compatible routes (and a rerank route in the common query/documents/top_n shape).

Each call runs the model's one-node workflow (``model.<name>``) through the same core,
admission and ledger as any workflow. ``model`` is ``name`` (the newest active version) or
``name:version``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import StreamingResponse

from control.api.auth import Principal
from control.api.deps import GatewayDep, TenantDep
from control.api.errors import ERROR_RESPONSES, ApiError
from control.api.prompts import chat_prompt
from control.api.running import (
    IdempotencyKey,
    body_hash,
    inference_of,
    raise_for_outcome,
    settled,
    start_run,
)
from control.api.schemas import inference as s
from control.api.state import Gateway, gateway
from control.runtime.mapping import DEFAULT_MAX_TOKENS
from control.services.single_model import single_model_name
from control.store.records import ModelRecord, RequestRecord

router = APIRouter(
    tags=["openai"],
    responses={k: ERROR_RESPONSES[k] for k in (401, 403, 404, 409, 413, 422, 429, 502, 503, 504)},
)
MAX_EMBED_INPUTS = 64
RUN_HEADER = "X-Legato-Run-Id"


async def _find_model(gw: Gateway, wanted: str, task: str) -> ModelRecord:
    """The active model ``name`` (newest version) or ``name:version`` doing ``task``."""
    name, _, version = wanted.partition(":")
    assert gw.models is not None
    named = await gw.models.named(name, lambda: gw.services.models.list(status="active"))
    found = [m for m in named if (not version or m.version == version)]
    if not found:
        raise ApiError(404, "not_found", f"no active model {wanted!r}", field="model")
    model = found[-1]
    if model.task != task:
        raise ApiError(422, "wrong_task", f"model {wanted!r} does {model.task}, not {task}",
                       field="model")  # fmt: skip
    return model


async def _one(
    gw: Gateway, who: Principal, model: ModelRecord, payload: Mapping[str, Any],
    digest: str, key: str | None, max_tokens: int = 0, fields: dict[str, str] | None = None,
) -> RequestRecord:  # fmt: skip
    started = await start_run(gw, who, (single_model_name(model.name), model.version), payload,
                              digest, key, max_output_tokens=max_tokens,
                              announce_at_end=True,
                              timeout_s=gw.config.sync_timeout_s)  # fmt: skip
    record = await settled(gw, started.request.id, gw.config.sync_timeout_s)
    raise_for_outcome(record, fields)  # a bad input is named as this route's field
    return record


def _usage(records: list[RequestRecord]) -> s.TokenUsage:
    ins = sum(((r.result or {}).get("usage") or {}).get("input_tokens", 0) for r in records)
    outs = sum(((r.result or {}).get("usage") or {}).get("output_tokens", 0) for r in records)
    return s.TokenUsage(prompt_tokens=ins, completion_tokens=outs, total_tokens=ins + outs)


def _outputs(record: RequestRecord) -> dict[str, Any]:
    return (record.result or {}).get("outputs") or {}


def _created(record: RequestRecord) -> int:
    return int(record.received_at.timestamp())


@router.get("/v1/models")
def list_models(gw: GatewayDep, who: TenantDep) -> s.ModelList:
    """Active models that the one-model routes can run here (with a live runtime: only the
    models it has local weights for)."""
    models = gw.services.models.list(status="active")
    if gw.inference is not None:
        live = set(gw.inference.catalog.models)
        models = [m for m in models if f"{m.name}:{m.version}" in live]
    cards = [s.ModelCard(id=f"{m.name}:{m.version}", created=int(m.created_at.timestamp()),
                         task=m.task) for m in models]  # fmt: skip
    return s.ModelList(data=cards)


@router.post("/v1/embeddings")
async def embeddings(
    request: Request,
    response: Response,
    body: s.EmbeddingsCreate,
    who: TenantDep,
    key: IdempotencyKey = None,
) -> s.EmbeddingList:
    """One embedding per input text (each a run; a key covers the whole call). The
    ``X-Legato-Run-Id`` header lists the runs, in input order."""
    gw = gateway(request)
    model = await _find_model(gw, body.model, "embed")
    texts = [body.input] if isinstance(body.input, str) else body.input
    if not texts or len(texts) > MAX_EMBED_INPUTS:
        raise ApiError(422, "invalid_value", f"input: 1 to {MAX_EMBED_INPUTS} texts", field="input")
    digest = body_hash("/v1/embeddings", body.model_dump())
    runs = [
        _one(gw, who, model, {"text": t}, f"{digest[:56]}{i:08d}",
             None if key is None else f"{key}#{i}",
             fields={"inputs.text": "input" if isinstance(body.input, str) else f"input[{i}]"})
        for i, t in enumerate(texts)
    ]  # fmt: skip
    # one text (the common call) is awaited directly: gather would add a task and a loop turn
    records = [await runs[0]] if len(runs) == 1 else await asyncio.gather(*runs)
    response.headers[RUN_HEADER] = ",".join(r.id for r in records)
    data = [s.Embedding(index=i, embedding=_outputs(r).get("embedding") or [])
            for i, r in enumerate(records)]  # fmt: skip
    return s.EmbeddingList(data=data, model=f"{model.name}:{model.version}", usage=_usage(records))


async def _generate(
    request: Request, who: Principal, body: s.GenerateOptions, prompt: str | None, route: str,
    key: str | None,
) -> tuple[Gateway, ModelRecord, str, str]:  # fmt: skip
    """Start the generate run. ``prompt`` None: the body is a chat, rendered here in the
    model's own chat format (its tokenizer's template), and sent as it is (``templated``)."""
    gw = gateway(request)
    model = await _find_model(gw, body.model, "generate")
    digest = body_hash(route, body.model_dump())
    sampling = {"temperature": body.temperature, "top_p": body.top_p, "seed": body.seed,
                "stop": body.stop}  # fmt: skip
    if prompt is None:
        messages = [{"role": m.role, "content": m.content} for m in body.messages]  # type: ignore[attr-defined]
        prompt = await chat_prompt(gw, f"{model.name}:{model.version}", messages)
        sampling["templated"] = True
    started = await start_run(gw, who, (single_model_name(model.name), model.version),
                              {"prompt": prompt}, digest, key,
                              max_output_tokens=body.max_tokens or 0,
                              sampling={k: v for k, v in sampling.items() if v is not None})  # fmt: skip
    return gw, model, started.request.id, f"{model.name}:{model.version}"


def _finish_reason(record: RequestRecord, max_tokens: int | None) -> str:
    """What ended the generation, as its step reported it ("stop" or "length"); for a
    one-model workflow stored before that output existed: "length" when the model produced
    as many tokens as it was allowed, else "stop"."""
    reported = _outputs(record).get("finish_reason")
    if reported in ("stop", "length"):
        return reported
    usage = (record.result or {}).get("usage") or {}
    limit = max_tokens or DEFAULT_MAX_TOKENS
    return "length" if int(usage.get("output_tokens") or 0) >= limit else "stop"


@router.post("/v1/chat/completions",
             responses={200: {"content": {"text/event-stream": {}}, "model": s.ChatCompletion}})  # fmt: skip
async def chat_completions(
    request: Request, body: s.ChatCompletionCreate, who: TenantDep, key: IdempotencyKey = None
) -> s.ChatCompletion:
    """Chat completion; ``stream: true`` answers with ``chat.completion.chunk`` events."""
    gw, _, run_id, name = await _generate(request, who, body, None, "/v1/chat/completions", key)
    if body.stream:
        return StreamingResponse(_chunks(gw, run_id, name, True, body.max_tokens),  # type: ignore[return-value]
                                 media_type="text/event-stream")  # fmt: skip
    record = await settled(gw, run_id, gw.config.sync_timeout_s)
    raise_for_outcome(record, {"inputs.prompt": "messages"})
    text = str(_outputs(record).get("text") or "")
    choice = s.ChatChoice(index=0, message=s.ChatMessage(role="assistant", content=text),
                          finish_reason=_finish_reason(record, body.max_tokens))  # fmt: skip
    return s.ChatCompletion(id=f"chatcmpl-{run_id}", created=_created(record), model=name,
                            choices=[choice], usage=_usage([record]))  # fmt: skip


@router.post("/v1/completions",
             responses={200: {"content": {"text/event-stream": {}}, "model": s.Completion}})  # fmt: skip
async def completions(
    request: Request, body: s.CompletionCreate, who: TenantDep, key: IdempotencyKey = None
) -> s.Completion:
    """Text completion of ``prompt``; ``stream: true`` answers with SSE chunks."""
    gw, _, run_id, name = await _generate(request, who, body, body.prompt, "/v1/completions", key)
    if body.stream:
        return StreamingResponse(_chunks(gw, run_id, name, False, body.max_tokens),  # type: ignore[return-value]
                                 media_type="text/event-stream")  # fmt: skip
    record = await settled(gw, run_id, gw.config.sync_timeout_s)
    raise_for_outcome(record, {"inputs.prompt": "prompt"})
    choice = s.CompletionChoice(index=0, text=str(_outputs(record).get("text") or ""),
                                finish_reason=_finish_reason(record, body.max_tokens))  # fmt: skip
    return s.Completion(id=f"cmpl-{run_id}", created=_created(record), model=name,
                        choices=[choice], usage=_usage([record]))  # fmt: skip


def _chunk(run_id: str, name: str, chat: bool, text: str | None, finish: str | None) -> bytes:
    if chat:
        delta = {} if text is None else {"role": "assistant", "content": text}
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        body = {"id": f"chatcmpl-{run_id}", "object": "chat.completion.chunk", "model": name,
                "choices": [choice]}  # fmt: skip
    else:
        choice = {"index": 0, "text": text or "", "finish_reason": finish}
        body = {"id": f"cmpl-{run_id}", "object": "text_completion", "model": name,
                "choices": [choice]}  # fmt: skip
    return f"data: {json.dumps(body)}\n\n".encode()


async def _chunks(
    gw: Gateway, run_id: str, name: str, chat: bool, max_tokens: int | None
) -> AsyncIterator[bytes]:
    """OpenAI-style SSE: one chunk per token delta, a final chunk, then ``[DONE]``. A run
    that did not succeed ends with an ``error`` object naming why."""
    inference = inference_of(gw)
    deltas = inference.stream(run_id)
    sent = False
    if deltas is not None:
        async for d in deltas:
            sent = True
            yield _chunk(run_id, name, chat, d.text, None)
    record = await inference.wait(run_id, gw.config.sync_timeout_s)
    if record.status != "succeeded":
        error = {"error": {"message": record.error or record.status, "type": record.status}}
        yield f"data: {json.dumps(error)}\n\n".encode()
    elif not sent:  # nothing was streamed (a replayed key): send the whole text at once
        yield _chunk(run_id, name, chat, str(_outputs(record).get("text") or ""), None)
    yield _chunk(run_id, name, chat, None, _finish_reason(record, max_tokens))
    yield b"data: [DONE]\n\n"


@router.post("/v1/rerank")
async def rerank(
    request: Request, body: s.RerankCreate, who: TenantDep, key: IdempotencyKey = None
) -> s.RerankResponse:
    """Order ``documents`` by relevance to ``query``; the best ``top_n`` (all by default)."""
    gw = gateway(request)
    model = await _find_model(gw, body.model, "rerank")
    payload = {"query": body.query, "documents": list(body.documents)}
    fields = {"inputs.query": "query", "inputs.documents": "documents"}
    record = await _one(gw, who, model, payload, body_hash("/v1/rerank", body.model_dump()), key,
                        fields=fields)  # fmt: skip
    outputs = _outputs(record)
    ranked = [str(d) for d in outputs.get("documents") or []]
    scores = outputs.get("scores")  # per input document, when the workflow exposes them
    results = []
    unused = list(range(len(body.documents)))
    for text in ranked[: body.top_n or len(ranked)]:
        index = next(i for i in unused if body.documents[i] == text)
        unused.remove(index)
        doc = {"text": text} if body.return_documents else None
        score = float(scores[index]) if isinstance(scores, list) and index < len(scores) else None
        results.append(s.RerankResult(index=index, relevance_score=score, document=doc))
    return s.RerankResponse(id=f"rerank-{record.id}", model=f"{model.name}:{model.version}",
                            results=results, usage=_usage([record]))  # fmt: skip
