"""DTOs of the fleet and the catalog: nodes, devices, models, latency profiles."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from control.api.schemas.common import Body, Dto, Id, JsonObject, NonNegative, Positive, name_field
from db import vocab

NodeStatus = Literal[vocab.NODE_STATUSES]  # type: ignore[valid-type]
DeviceKind = Literal[vocab.DEVICE_KINDS]  # type: ignore[valid-type]
DeviceStatus = Literal[vocab.DEVICE_STATUSES]  # type: ignore[valid-type]
Precision = Literal[vocab.PRECISIONS]  # type: ignore[valid-type]
ModelTask = Literal[vocab.MODEL_TASKS]  # type: ignore[valid-type]
WeightSource = Literal[vocab.WEIGHT_SOURCES]  # type: ignore[valid-type]
ModelStatus = Literal[vocab.MODEL_STATUSES]  # type: ignore[valid-type]


class NodeOut(Dto):
    id: int
    name: str
    address: str | None
    labels: JsonObject
    status: str
    created_at: datetime


class NodeCreate(Body):
    name: str = name_field(100, "unique machine name")
    address: str | None = name_field(200, default=None)
    labels: JsonObject = Field(default_factory=dict)
    status: NodeStatus = "up"


class NodeUpdate(Body):
    name: str | None = name_field(100, default=None)
    address: str | None = name_field(200, default=None)
    labels: JsonObject | None = None
    status: NodeStatus | None = None


class NodeFilter(BaseModel):
    status: NodeStatus | None = None
    name: str | None = None


class DeviceOut(Dto):
    id: int
    name: str
    node_id: int
    kind: str
    accelerator: str | None
    memory_mib: int
    precisions: list[str]
    interconnect_group: str | None
    status: str
    labels: JsonObject
    is_real: bool
    created_at: datetime
    free_mib: int | None = Field(
        None,
        description="lists: memory not held by the live core's replicas (null: no live "
        "runtime, or a device it does not run)",
    )
    load: int | None = Field(
        None,
        description="lists: steps queued or running on the device's replicas now (null "
        "as for free_mib)",
    )


class DeviceCreate(Body):
    name: str = name_field(100, "unique device name: cpu:0, cuda:1, gpu-a-2")
    node_id: Id
    kind: DeviceKind
    accelerator: str | None = name_field(64, default=None)
    memory_mib: Positive
    precisions: list[Precision] = Field(default_factory=list)
    interconnect_group: str | None = name_field(64, default=None)
    status: DeviceStatus = "up"
    labels: JsonObject = Field(default_factory=dict)
    is_real: bool = Field(False, description="False: declared for the twin only")


class DeviceUpdate(Body):
    name: str | None = name_field(100, default=None)
    node_id: Id | None = None
    kind: DeviceKind | None = None
    accelerator: str | None = name_field(64, default=None)
    memory_mib: Positive | None = None
    precisions: list[Precision] | None = None
    interconnect_group: str | None = name_field(64, default=None)
    status: DeviceStatus | None = None
    labels: JsonObject | None = None
    is_real: bool | None = None


class DeviceFilter(BaseModel):
    node_id: Id | None = None
    status: DeviceStatus | None = None
    kind: DeviceKind | None = None
    is_real: bool | None = None
    precision: Precision | None = Field(None, description="devices that run this precision")
    min_free_mib: NonNegative | None = Field(
        None, description="devices with at least this much memory free now (live)"
    )
    max_load: NonNegative | None = Field(
        None, description="devices with at most this many steps queued or running now (live)"
    )


CONTINUOUS_BATCHING = (
    "generate models only: new requests join the running decode loop instead of waiting for "
    "the batch to end (pays off on GPU engines; on a CPU each join's prefill costs a full "
    "weight read)"
)

PREFILL_CHUNK_TOKENS = (
    "continuous batching only (0: off): each decode-loop iteration carries the running "
    "sequences' tokens and at most this many tokens in all, the rest going to waiting prompts "
    "in chunks, so a long prompt does not stall the answers already decoding (512 is a common "
    "latency setting; a loaded replica's executor takes a new value when it next loads)"
)

#: Autoscaling settings of a model (``control.core.autoscaler``); the service checks them
#: together (min <= max) and names each field it refuses.
MAX_REPLICAS = "autoscaling is on while this is set (null: off): the most replicas the model gets"
MIN_REPLICAS = "autoscaling keeps at least this many replicas (0: scale to zero when idle)"
SCALE_OUT_DELAY_MS = (
    "add a replica (up to max_replicas) when a new request's predicted queue delay exceeds "
    "this many milliseconds (null: no scale-out on backlog)"
)
IDLE_MS = (
    "drain one replica after this many milliseconds without work, down to min_replicas (null: no "
    "scale-in)"
)


class ModelOut(Dto):
    id: int
    name: str
    version: str
    task: str
    weights_source: str
    weights_location: str
    memory_mib: int
    precisions: list[str]
    load_time_ms: int | None
    max_batch_size: int
    max_batch_tokens: int
    tp_degree: int
    cost_weight_milli: int
    continuous_batching: bool
    prefill_chunk_tokens: int
    min_replicas: int = Field(0, description=MIN_REPLICAS)
    max_replicas: int | None = Field(None, description=MAX_REPLICAS)
    scale_out_delay_ms: int | None = Field(None, description=SCALE_OUT_DELAY_MS)
    idle_ms: int | None = Field(None, description=IDLE_MS)
    status: str
    created_at: datetime


class ModelCreate(Body):
    name: str = name_field(200)
    version: str = name_field(64)
    task: ModelTask
    weights_source: WeightSource
    weights_location: str = name_field(500, "package name, folder, hub id or a note")
    memory_mib: Positive
    precisions: list[Precision] = Field(default_factory=list)
    load_time_ms: NonNegative | None = None
    max_batch_size: Positive = 1
    max_batch_tokens: Positive = 2048
    tp_degree: Positive = 1
    cost_weight_milli: NonNegative = Field(1000, description="cost units per 1000 tokens")
    continuous_batching: bool = Field(False, description=CONTINUOUS_BATCHING)
    prefill_chunk_tokens: NonNegative = Field(0, description=PREFILL_CHUNK_TOKENS)
    min_replicas: NonNegative = Field(0, description=MIN_REPLICAS)
    max_replicas: Positive | None = Field(None, description=MAX_REPLICAS)
    scale_out_delay_ms: Positive | None = Field(None, description=SCALE_OUT_DELAY_MS)
    idle_ms: Positive | None = Field(None, description=IDLE_MS)
    status: ModelStatus = "active"


class ModelUpdate(Body):
    name: str | None = name_field(200, default=None)
    version: str | None = name_field(64, default=None)
    task: ModelTask | None = None
    weights_source: WeightSource | None = None
    weights_location: str | None = name_field(500, default=None)
    memory_mib: Positive | None = None
    precisions: list[Precision] | None = None
    load_time_ms: NonNegative | None = None
    max_batch_size: Positive | None = None
    max_batch_tokens: Positive | None = None
    tp_degree: Positive | None = None
    cost_weight_milli: NonNegative | None = None
    continuous_batching: bool | None = Field(None, description=CONTINUOUS_BATCHING)
    prefill_chunk_tokens: NonNegative | None = Field(None, description=PREFILL_CHUNK_TOKENS)
    min_replicas: NonNegative | None = Field(None, description=MIN_REPLICAS)
    max_replicas: Positive | None = Field(None, description=MAX_REPLICAS + "; null turns it off")
    scale_out_delay_ms: Positive | None = Field(None, description=SCALE_OUT_DELAY_MS)
    idle_ms: Positive | None = Field(None, description=IDLE_MS)
    status: ModelStatus | None = None


class ModelFilter(BaseModel):
    name: str | None = None
    task: ModelTask | None = None
    status: ModelStatus | None = None


class LatencyProfileOut(Dto):
    id: int
    model_id: int
    device_type: str
    batch_size: int
    num_tokens: int
    latency_us: int
    decode_us_per_token: int | None
    measured_at: datetime
    variant: str = Field("", description="precision variant measured ('': the base model)")


class LatencyProfileCreate(Body):
    model_id: Id
    device_type: str = name_field(64)
    batch_size: Positive
    num_tokens: NonNegative
    latency_us: NonNegative
    decode_us_per_token: NonNegative | None = None
    variant: Literal[("", *vocab.PRECISIONS)] = Field(  # type: ignore[valid-type]
        "", description="precision variant measured ('': the base model)"
    )


class LatencyProfileUpdate(Body):
    latency_us: NonNegative | None = None
    decode_us_per_token: NonNegative | None = None


class LatencyProfileFilter(BaseModel):
    model_id: Id | None = None
    device_type: str | None = None
    variant: str | None = None
