"""Domain errors of the services. The API maps each class to one HTTP status.

Every message names the offending field or entity and the value, so that an operator reading a
refusal knows what to change.
"""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    """Base of every refusal the services make; nothing was written when one is raised."""


class ValidationError(DomainError):
    """A field holds a value the domain refuses."""

    def __init__(self, field: str, value: Any, message: str) -> None:
        self.field = field
        self.value = value
        self.message = message
        super().__init__(f"{field}={value!r}: {message}")


class UnknownReference(ValidationError):
    """A field refers to a row that does not exist (device on an unknown node, ...)."""

    def __init__(self, field: str, value: Any, entity: str) -> None:
        self.entity = entity
        super().__init__(field, value, f"no {entity} with this id")


class NotFound(DomainError):
    """The entity addressed by the call does not exist."""

    def __init__(self, entity: str, id_: Any) -> None:
        self.entity = entity
        self.id = id_
        super().__init__(f"{entity} {id_!r} not found")


class Conflict(DomainError):
    """The change contradicts the stored state (an illegal transition, a row still in use)."""


class DuplicateName(Conflict):
    """Another row already holds this unique name (or name + version, tenant + resource...)."""

    def __init__(self, entity: str, key: dict[str, Any]) -> None:
        self.entity = entity
        self.key = key
        shown = ", ".join(f"{k}={v!r}" for k, v in key.items())
        super().__init__(f"{entity} with {shown} already exists")


class IdempotencyConflict(Conflict):
    """An idempotency key was reused for a request with a different body."""

    def __init__(self, idempotency_key: str, request_id: str) -> None:
        self.idempotency_key = idempotency_key
        self.request_id = request_id
        super().__init__(
            f"idempotency_key={idempotency_key!r} was used for request {request_id} "
            "with a different body"
        )
