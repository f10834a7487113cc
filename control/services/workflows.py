"""Workflow use cases: versioned DAG specs, validated by an injected validator."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from control.clock import utcnow
from control.services import rules as r
from control.services.base import CrudService
from control.services.errors import ValidationError
from control.store import records as rec
from control.store import repositories as repo
from db import vocab
from db.session import session_scope

#: Checks a DAG spec and returns every problem found (empty: the spec is sound).
SpecValidator = Callable[[Mapping[str, Any]], list[str]]


class WorkflowService(CrudService[rec.WorkflowRecord]):
    """Workflows; name + version is unique.

    ``validator`` is the DAG checker (the core's ``DagSpec`` validation, plugged in by the
    caller); without one only the JSON shape (an object) is checked. When it reports problems,
    create/update raise one ValidationError on ``spec`` listing all of them.
    """

    entity = "workflow"
    repository = repo.WorkflowRepository
    rules = (
        r.text("name", 200),
        r.text("version", 64),
        r.mapping("spec"),
        r.one_of("status", vocab.WORKFLOW_STATUSES),
    )
    unique_keys = (("name", "version"),)
    retired_status = "retired"

    def __init__(
        self,
        factory: sessionmaker[Session],
        clock: Callable[[], datetime] = utcnow,
        validator: SpecValidator | None = None,
    ) -> None:
        super().__init__(factory, clock)
        self._validator = validator

    def _check_values(self, values: Mapping[str, Any]) -> None:
        spec = values.get("spec")
        if spec is None or self._validator is None:
            return
        problems = list(self._validator(spec))
        if problems:
            raise ValidationError("spec", spec, "; ".join(problems))

    def by_name(self, name: str, version: str) -> rec.WorkflowRecord | None:
        """The workflow ``name`` at ``version``, or None."""
        with session_scope(self._factory) as session:
            return repo.WorkflowRepository(session).find_one(name=name, version=version)
