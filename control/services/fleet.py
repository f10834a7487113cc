"""Fleet use cases: nodes and devices. Retiring either marks it ``down``."""

from __future__ import annotations

from control.services import rules as r
from control.services.base import CrudService, Reference
from control.store import records as rec
from control.store import repositories as repo
from db import vocab


class NodeService(CrudService[rec.NodeRecord]):
    """Nodes (machines); name is unique."""

    entity = "node"
    repository = repo.NodeRepository
    rules = (
        r.text("name", 100),
        r.text("address", 200),
        r.mapping("labels"),
        r.one_of("status", vocab.NODE_STATUSES),
    )
    unique_keys = (("name",),)
    retired_status = "down"


class DeviceService(CrudService[rec.DeviceRecord]):
    """Devices; ``is_real`` False declares one for the twin only (e.g. an H100 we lack)."""

    entity = "device"
    repository = repo.DeviceRepository
    rules = (
        r.text("name", 100),
        r.one_of("kind", vocab.DEVICE_KINDS),
        r.text("accelerator", 64),
        r.positive("memory_mib"),
        r.each_of("precisions", vocab.PRECISIONS),
        r.text("interconnect_group", 64),
        r.one_of("status", vocab.DEVICE_STATUSES),
        r.mapping("labels"),
        r.boolean("is_real"),
    )
    references = (Reference("node_id", repo.NodeRepository, "node"),)
    unique_keys = (("name",),)
    retired_status = "down"
