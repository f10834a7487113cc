"""Generic create / read / list / update / retire-or-delete use cases for one entity.

Each public method is one transaction (``session_scope``). Every mutation writes exactly one
audit record in the same transaction. Values are validated before the database is touched
(field rules, required fields, unknown fields), then references and unique keys are checked
with reads; only then is anything written. A refusal therefore leaves no row and no audit
record behind. Integrity errors the checks could not foresee (a concurrent insert, a row still
referenced) are mapped to :class:`Conflict`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, ClassVar, Generic, TypeVar

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from control.clock import utcnow
from control.services.audit import jsonable, write_audit
from control.services.errors import (
    Conflict,
    DuplicateName,
    NotFound,
    UnknownReference,
    ValidationError,
)
from control.services.rules import Rule, validate
from control.services.rules import is_int as rules_is_int
from control.store.base import PageOf, Repository
from db.session import session_scope

RecT = TypeVar("RecT")
T = TypeVar("T")


@dataclass(frozen=True)
class Reference:
    """``field`` holds the id of a row that ``repository`` must find (``entity`` names it)."""

    field: str
    repository: type[Repository]
    entity: str


class ServiceBase:
    """Holds the session factory and the clock; runs one unit of work per call."""

    def __init__(
        self, factory: sessionmaker[Session], clock: Callable[[], datetime] = utcnow
    ) -> None:
        self._factory = factory
        self._clock = clock

    def _run(self, work: Callable[[Session], T], entity: str) -> T:
        """Run ``work`` in one transaction; database integrity errors become Conflict."""
        try:
            with session_scope(self._factory) as session:
                return work(session)
        except IntegrityError as exc:
            raise Conflict(f"{entity}: the database refused the change ({exc.orig})") from exc


class CrudService(ServiceBase, Generic[RecT]):
    """CRUD for one table, configured by class attributes (see the subclasses)."""

    entity: ClassVar[str]
    repository: ClassVar[type[Repository]]
    rules: ClassVar[tuple[Rule, ...]] = ()
    references: ClassVar[tuple[Reference, ...]] = ()
    #: Column tuples that must be unique; checked before writing, reported as DuplicateName.
    unique_keys: ClassVar[tuple[tuple[str, ...], ...]] = ()
    #: Columns ``update`` may change; None means every writable column.
    updatable: ClassVar[frozenset[str] | None] = None
    #: Status that ``retire`` sets; None means the entity has no status and offers ``delete``.
    retired_status: ClassVar[str | None] = None
    #: Timestamp column set from the clock on create.
    stamp_field: ClassVar[str | None] = "created_at"
    #: Columns kept out of audit before/after images (secrets' digests).
    audit_exclude: ClassVar[frozenset[str]] = frozenset()

    # -- schema-derived facts ------------------------------------------------------------------

    @classmethod
    def _columns(cls) -> dict[str, Any]:
        return {c.name: c for c in cls.repository.row_type.__table__.columns}

    @classmethod
    def _default_of(cls, name: str) -> Any:
        """The scalar default of column ``name`` (None when it has none)."""
        default = cls._columns()[name].default
        return default.arg if default is not None and default.is_scalar else None

    @classmethod
    def _writable(cls) -> set[str]:
        return {n for n, c in cls._columns().items() if not c.primary_key} - {cls.stamp_field}

    @classmethod
    def _required(cls) -> tuple[str, ...]:
        """Fields a create must give, in column order (so the first missing one named is
        always the same)."""
        writable = cls._writable()
        return tuple(
            n
            for n, c in cls._columns().items()
            if n in writable and not c.nullable and c.default is None and c.server_default is None
        )

    # -- validation ----------------------------------------------------------------------------

    def check_fields(self, values: Mapping[str, Any], creating: bool) -> None:
        """The pure checks a create (``creating``) or update of ``values`` would run, without
        writing: raises the ``ValidationError`` that the write would raise (previews use it)."""
        self._check_fields(values, creating)

    def _check_fields(self, values: Mapping[str, Any], creating: bool) -> None:
        """Pure checks of the values to write: known, required, non-null, rules, hook."""
        allowed = self._writable() if creating or self.updatable is None else self.updatable
        for name, value in values.items():
            if name not in allowed:
                raise ValidationError(name, value, f"not a field {self.entity} accepts here")
        columns = self._columns()
        for name in self._required() if creating else ():
            if values.get(name) is None:
                raise ValidationError(name, None, "is required")
        for name, value in values.items():
            if value is None and not columns[name].nullable:
                raise ValidationError(name, None, "must not be null")
        validate(self.rules, values)
        self._check_values(values)

    def _check_values(self, values: Mapping[str, Any]) -> None:
        """Hook: pure cross-field checks of the values being written."""

    def _check_in_db(self, session: Session, merged: Mapping[str, Any], current: Any) -> None:
        """Hook: checks that need reads (``merged`` = stored values updated by the change)."""

    def _check_references(self, session: Session, values: Mapping[str, Any]) -> None:
        for ref in self.references:
            value = values.get(ref.field)
            if value is not None and not ref.repository(session).exists(value):
                raise UnknownReference(ref.field, value, ref.entity)

    def _check_unique(self, session: Session, merged: Mapping[str, Any], current: Any) -> None:
        repo = self.repository(session)
        for key in self.unique_keys:
            # a column left out of a create takes its default (``variant`` ""), not NULL
            wanted = {k: merged[k] if k in merged else self._default_of(k) for k in key}
            found = repo.find_one(**wanted)
            if found is not None and (current is None or found.id != current.id):
                raise DuplicateName(self.entity, wanted)

    def _checked_write(self, session: Session, values: dict[str, Any], current: Any) -> None:
        merged = {**asdict(current), **values} if current is not None else values
        self._check_references(session, values)
        self._check_unique(session, merged, current)
        self._check_in_db(session, merged, current)

    # -- use cases -----------------------------------------------------------------------------

    def create(self, actor: str, **values: Any) -> RecT:
        """Validate and insert one row, audited as ``create``. Returns its record."""
        self._check_fields(values, creating=True)

        def work(session: Session) -> RecT:
            self._checked_write(session, values, None)
            stamp = {self.stamp_field: self._clock()} if self.stamp_field else {}
            record = self.repository(session).add(**values, **stamp)
            self._audit(session, actor, "create", record, None, record)
            return record

        return self._run(work, self.entity)

    def get(self, id_: Any) -> RecT:
        """The record ``id_``; NotFound when there is none."""
        with session_scope(self._factory) as session:
            return self._require(session, id_)

    def list(self, *, limit: int | None = None, **equal: Any) -> list[RecT]:
        """Records whose columns equal ``equal``, oldest first."""
        for name, value in equal.items():
            if name not in self._columns():
                raise ValidationError(name, value, f"not a column of {self.entity}")
        with session_scope(self._factory) as session:
            return self.repository(session).list(limit=limit, **equal)

    #: Column pages are ordered by (then id); requests order by arrival, not by their uuid.
    page_order: ClassVar[str] = "id"

    def page(
        self,
        *,
        offset: int = 0,
        limit: int | None = None,
        newest_first: bool = False,
        **equal: Any,
    ) -> PageOf[RecT]:
        """A page of records whose columns equal ``equal`` and how many match in all, filtered
        and cut in the database. ValidationError names an unknown column or a bad bound."""
        for name, value in equal.items():
            if name not in self._columns():
                raise ValidationError(name, value, f"not a column of {self.entity}")
        for name, value in (("offset", offset), ("limit", limit)):
            if value is not None and (not rules_is_int(value) or value < 0):
                raise ValidationError(name, value, "must be an integer >= 0")
        with session_scope(self._factory) as session:
            return self.repository(session).page(
                offset=offset, limit=limit, newest_first=newest_first,
                order_column=self.page_order, **equal,
            )  # fmt: skip

    def update(self, actor: str, id_: Any, **changes: Any) -> RecT:
        """Validate and apply ``changes`` to ``id_``, audited as ``update``."""
        return self._update(actor, id_, changes, "update")

    def retire(self, actor: str, id_: Any) -> RecT:
        """Soft-delete: set the retired status (no-op, no audit, when already retired)."""
        if self.retired_status is None:
            raise Conflict(f"{self.entity} has no status to retire; delete it instead")

        def work(session: Session) -> RecT:
            before = self._require(session, id_)
            if before.status == self.retired_status:
                return before
            after = self.repository(session).update(id_, status=self.retired_status)
            self._audit(session, actor, "retire", after, before, after)
            return after

        return self._run(work, self.entity)

    def delete(self, actor: str, id_: Any) -> None:
        """Hard-delete ``id_`` (only entities without a status), audited as ``delete``."""
        if self.retired_status is not None:
            raise Conflict(f"{self.entity} is retired, not deleted; call retire")

        def work(session: Session) -> None:
            before = self._require(session, id_)
            self.repository(session).delete(id_)
            self._audit(session, actor, "delete", before, before, None)

        self._run(work, self.entity)

    # -- helpers -------------------------------------------------------------------------------

    def _update(
        self, actor: str, id_: Any, changes: dict[str, Any], action: str, check: bool = True
    ) -> RecT:
        """Apply ``changes`` in one audited transaction; ``check=False`` skips the field checks
        (callers that built the changes themselves, e.g. status stamps)."""
        if check:
            self._check_fields(changes, creating=False)

        def work(session: Session) -> RecT:
            before = self._require(session, id_)
            if all(getattr(before, k) == v for k, v in changes.items()):
                return before  # nothing changes: nothing to write or audit
            self._checked_write(session, changes, before)
            after = self.repository(session).update(id_, **changes)
            self._audit(session, actor, action, after, before, after)
            return after

        return self._run(work, self.entity)

    def _require(self, session: Session, id_: Any) -> RecT:
        record = self.repository(session).get(id_)
        if record is None:
            raise NotFound(self.entity, id_)
        return record

    def _audit(
        self, session: Session, actor: str, action: str, subject: Any, before: Any, after: Any
    ) -> None:
        write_audit(
            session,
            at=self._clock(),
            actor=actor,
            action=action,
            entity_type=self.entity,
            entity_id=subject.id,
            before=jsonable(before, self.audit_exclude),
            after=jsonable(after, self.audit_exclude),
        )
