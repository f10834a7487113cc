"""What the inference use case takes and gives: a run as the API asks for it, what submitting
it returned, the "nothing can serve now" error, and admission's token estimate."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from control.services.errors import DomainError
from control.store import records as rec


class ServiceUnavailable(DomainError):
    """No healthy device can serve the request (or the runtime is not running)."""


@dataclass(frozen=True)
class RunCall:
    """One run as the API asks for it. ``payload`` feeds the workflow's ``input.*`` edges."""

    tenant_id: int
    tenant_name: str
    actor: str
    workflow_name: str
    workflow_version: str
    payload: Mapping[str, Any]
    body_hash: str
    idempotency_key: str | None = None
    priority_class: str | None = None
    max_output_tokens: int = 0
    session_id: str | None = None
    #: the caller learns of the run only from its end (synchronous routes): without an
    #: idempotency key its row may then be written together with its end, in one commit
    announce_at_end: bool = False
    #: sampling of the run's generate steps (``temperature``, ``top_p``, ``seed``)
    sampling: Mapping[str, Any] = field(default_factory=dict)
    #: how long the caller waits for the end (sync routes): the run's deadline in the core, so
    #: a run predicted to wait longer is refused at the door (429) instead of timing out
    timeout_s: float | None = None
    #: the generate prompt's chained prefix block hashes (:mod:`.prompt_prefix`), which the
    #: core routes by; empty: none known (no tokenizer here, or a prompt built mid-workflow)
    prefix_blocks: tuple[int, ...] = ()
    #: the generate prompt's real token count when the gateway tokenized it (0: estimate)
    prompt_tokens: int = 0
    #: the quality class asked for (``exact``/``balanced``/``fast``; None: the tenant's)
    quality: str | None = None


@dataclass(frozen=True)
class Started:
    """A submitted run; ``existing`` when an idempotent retry found the first request."""

    request: rec.RequestRecord
    existing: bool


def estimate_tokens(payload: Mapping[str, Any]) -> int:
    """Admission's estimate of input tokens (about 4 characters a token). The ledger bills
    the real tokenizer's counts that the executor reports; this only sizes admission."""
    chars = 0
    for value in payload.values():
        if isinstance(value, str):
            chars += len(value)
        elif isinstance(value, list | tuple):
            chars += sum(len(v) for v in value if isinstance(v, str))
    return chars // 4 + 1
