"""The core's DAG validation, plugged into the workflow service.

``make_spec_validator(factory)`` returns the ``SpecValidator`` that ``build_services`` takes: it
parses a stored spec dict with the core's ``dag_from_dict`` and validates it against the models
registered in the database at that moment, returning every problem with its location.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from control.core.dag.spec import SpecFormatError, dag_from_dict
from control.core.dag.validate import validate
from db import models as m
from db.session import session_scope


def known_models(session: Session) -> dict[str, str]:
    """Active models as the core names them: ``name:version`` -> task."""
    return {
        f"{row.name}:{row.version}": row.task
        for row in session.query(m.ServedModel)
        if row.status == "active" and row.task != "tool"
    }


def spec_problems(spec: Mapping[str, Any], models: Mapping[str, str]) -> list[str]:
    """Every problem of ``spec`` as 'location: message' strings (empty: valid)."""
    raw = dict(spec)
    raw.setdefault("workflow", "unnamed")
    try:
        dag = dag_from_dict(raw)
    except SpecFormatError as exc:
        return list(exc.problems)
    return [str(p) for p in validate(dag, models)]


def make_spec_validator(factory: sessionmaker[Session]):
    """A validator reading the model catalogue from the database on each call."""

    def validator(spec: Mapping[str, Any]) -> list[str]:
        with session_scope(factory) as session:
            models = known_models(session)
        return spec_problems(spec, models)

    return validator
