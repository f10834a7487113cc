"""A thin generic repository: rows in, frozen records out, never a commit.

A repository works inside the caller's session and transaction. ``add``/``update``/``delete``
flush so that generated ids and constraint violations surface at the call, but only the
service's ``session_scope`` commits.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Generic, TypeVar

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session

from db.base import Base

RowT = TypeVar("RowT", bound=Base)
RecT = TypeVar("RecT")


@dataclass(frozen=True)
class PageOf(Generic[RecT]):
    """One page of records and how many match in all."""

    items: list[RecT]
    total: int


class Repository(Generic[RowT, RecT]):
    """CRUD over one table. Subclasses set ``row_type`` and ``record_type`` and add queries."""

    row_type: ClassVar[type[Base]]
    record_type: ClassVar[type[Any]]

    def __init__(self, session: Session) -> None:
        self.session = session

    def to_record(self, row: RowT) -> RecT:
        """The record for ``row``, with JSON values copied."""
        values = {f.name: copy.deepcopy(getattr(row, f.name)) for f in fields(self.record_type)}
        return self.record_type(**values)

    def row(self, id_: Any) -> RowT | None:
        """The ORM row with primary key ``id_`` (None for a missing or None id)."""
        if id_ is None:
            return None
        return self.session.get(self.row_type, id_)

    def get(self, id_: Any) -> RecT | None:
        row = self.row(id_)
        return None if row is None else self.to_record(row)

    def exists(self, id_: Any) -> bool:
        return self.row(id_) is not None

    def find_one(self, **equal: Any) -> RecT | None:
        """The one record whose columns equal ``equal`` (None when there is none)."""
        row = self.session.scalars(select(self.row_type).filter_by(**equal).limit(1)).first()
        return None if row is None else self.to_record(row)

    def list(self, *, limit: int | None = None, **equal: Any) -> list[RecT]:
        """Records matching ``equal``, oldest id first."""
        query = select(self.row_type).filter_by(**equal).order_by(self.row_type.id)
        if limit is not None:
            query = query.limit(limit)
        return [self.to_record(r) for r in self.session.scalars(query)]

    def page(
        self,
        *,
        offset: int = 0,
        limit: int | None = None,
        newest_first: bool = False,
        order_column: str = "id",
        where: Sequence[ColumnElement[bool]] = (),
        **equal: Any,
    ) -> PageOf[RecT]:
        """Records matching ``equal`` and every ``where`` clause, ordered by ``order_column``
        then id (oldest first, or newest first), ``offset`` skipped and at most ``limit``
        returned; ``total`` counts every match. Raises ValueError naming a negative ``offset``
        or ``limit``."""
        if offset < 0 or (limit is not None and limit < 0):
            raise ValueError(f"offset={offset}, limit={limit}: both must be >= 0")
        base = select(self.row_type).filter_by(**equal).where(*where)
        total = self.session.scalar(select(func.count()).select_from(base.subquery()))
        keys = [getattr(self.row_type, order_column), self.row_type.id]
        query = base.order_by(*(k.desc() if newest_first else k for k in keys)).offset(offset)
        if limit is not None:
            query = query.limit(limit)
        items = [self.to_record(r) for r in self.session.scalars(query)]
        return PageOf(items=items, total=int(total or 0))

    def count(self, **equal: Any) -> int:
        query = select(func.count()).select_from(self.row_type).filter_by(**equal)
        return int(self.session.scalar(query) or 0)

    def add(self, **values: Any) -> RecT:
        """Insert a row and flush; returns its record with generated values filled in."""
        row = self.row_type(**values)
        self.session.add(row)
        self.session.flush()
        self.session.refresh(row)
        return self.to_record(row)

    def update(self, id_: Any, **changes: Any) -> RecT:
        """Apply ``changes`` to the existing row ``id_`` and flush. KeyError when absent."""
        row = self.row(id_)
        if row is None:
            raise KeyError(id_)
        for name, value in changes.items():
            setattr(row, name, value)
        self.session.flush()
        return self.to_record(row)

    def delete(self, id_: Any) -> None:
        """Delete the row ``id_`` and flush. KeyError when absent."""
        row = self.row(id_)
        if row is None:
            raise KeyError(id_)
        self.session.delete(row)
        self.session.flush()
