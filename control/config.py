"""Typed settings for Legato, read once at the edge.

Every setting has the environment prefix ``LEGATO_`` (``LEGATO_DATABASE_URL`` and so on) and may
also come from a ``.env`` file in the working directory. Policy modules never read settings: the
drivers, services and CLI read them once and pass values down.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


class Settings(BaseSettings):
    """Legato's configuration. Field descriptions double as the CLI's help text."""

    model_config = SettingsConfigDict(env_prefix="LEGATO_", env_file=".env", extra="ignore")

    var_dir: Path = Field(
        Path("var"), description="Folder for the embedded database, model copies, profiles, logs."
    )
    database_url: str | None = Field(
        None,
        description="SQLAlchemy URL of the control-plane database. Default: a SQLite file "
        "<var_dir>/legato.db. PostgreSQL: postgresql+psycopg://user@host:port/db",
    )
    admin_token: SecretStr | None = Field(
        None,
        description="Admin credential for admin routes and the console. When unset, `make up` "
        "generates one into <var_dir>/admin_token (never committed).",
    )
    api_host: str = Field("127.0.0.1", description="Address the API gateway listens on.")
    api_port: int = Field(8700, ge=1, le=65535, description="Port of the API gateway.")
    console_port: int = Field(8701, ge=1, le=65535, description="Port of the Streamlit console.")
    api_keep_alive_s: int = Field(
        75,
        ge=1,
        description="Seconds the API keeps an idle HTTP connection open. Longer than clients' "
        "own pool expiry (httpx and most others: 5 s), so the client closes first: a server that "
        "closes at the same instant races a client reusing the connection, and its call is lost.",
    )
    torch_threads: int = Field(1, ge=1, description="torch threads per executor worker.")
    worker_missed_heartbeats: int = Field(
        6,
        ge=2,
        description="Heartbeats (0.5 s apart) an executor worker may miss in a row before it "
        "can be judged hung; even then only if its process used no CPU meanwhile.",
    )
    breaker_failures: int = Field(
        3,
        ge=1,
        description="Batches in a row that fail for a replica's own reasons (the model raised, "
        "a batch hung; never a bad input) before its circuit breaker opens: the core then "
        "routes around the replica until its probe succeeds (either executor).",
    )
    breaker_cooldown_s: float = Field(
        5.0,
        gt=0,
        description="Seconds an open breaker refuses its replica's batches before one probe "
        "batch may go (either executor).",
    )
    hang_multiple: float = Field(
        5.0,
        ge=1,
        description="A batch running longer than this multiple of its expected time is hung: "
        "its worker or actor is killed and restarted, the batch retried elsewhere.",
    )
    hang_floor_s: float = Field(
        30.0,
        gt=0,
        description="The shortest hang deadline of any batch, in seconds.",
    )
    cpu_worker_slots: int | None = Field(
        None,
        ge=1,
        description="CPU worker processes on a machine without CUDA. Default: one per core.",
    )
    max_input_text_chars: int = Field(
        200_000,
        ge=1,
        description="Longest text value (a query, a prompt, one document) of a workflow run's "
        "inputs, in characters; longer is a 422 naming the input.",
    )
    max_input_list_items: int = Field(
        1_000,
        ge=1,
        description="Most items of one list value (documents, a vector, scores) of a workflow "
        "run's inputs; more is a 422 naming the input.",
    )

    exact_quality_floor: float = Field(
        0.99,
        ge=0,
        le=1,
        description="Quality floor of precision variants: a variant whose measured quality "
        "score (against the fp32 base, on fixed inputs) is below it is refused for exact "
        "traffic and flagged on the console's model page.",
    )

    prefix_block_tokens: int = Field(
        16,
        ge=1,
        le=4096,
        description="Prompt tokens per prefix block: the gateway hashes a generate prompt's "
        "token ids in blocks of this many (chained) and the core routes by the blocks a "
        "replica's KV cache probably holds.",
    )

    executor: Literal["local", "ray"] = Field(
        "local",
        description="Executor backend: local (one worker process per device of this machine) "
        "or ray (one Ray actor per device of a Ray cluster).",
    )
    ray_address: str | None = Field(
        None,
        description="Address of the Ray cluster for executor=ray (host:port of `ray start "
        "--head`). Default: start a local Ray head.",
    )

    ray_missed_heartbeats: int = Field(
        2,
        ge=2,
        description="Status calls (0.5 s apart) a Ray actor may leave unanswered before it is "
        "judged lost (killed, its device reported down, a fresh actor started): a node lost "
        "without a word is seen within this many heartbeats. An actor loading a model gets "
        "10 s.",
    )

    batching: Literal["queue_building", "size_delay", "adaptive"] = Field(
        "queue_building",
        description="Batching strategy of the live core: queue_building (waits for a batch to "
        "fill only while requests keep arriving, up to the max delay), size_delay (always "
        "waits up to the max delay unless full) or adaptive (batch size learnt against a "
        "latency target). Changeable live: PATCH /admin/policies.",
    )
    batching_max_delay_s: float | None = Field(
        None,
        ge=0,
        description="Longest time the oldest queued item waits for its batch to fill, in "
        "seconds. Default: the strategy's own (queue_building 0.01, the others 0.005).",
    )
    routing: Literal["predicted_completion"] = Field(
        "predicted_completion",
        description="Routing strategy of the live core (the replica predicted to finish a "
        "step first). Changeable live: PATCH /admin/policies.",
    )
    fair_share: Literal["vtc", "fcfs", "rate_limit"] = Field(
        "vtc",
        description="Fair-share policy between tenants: vtc (weighted virtual token counter), "
        "fcfs or rate_limit (a request-rate limit, then FCFS). Changeable live: PATCH "
        "/admin/policies.",
    )
    interconnects: str | None = Field(
        None,
        description="How the core prices moving a step's inputs between devices and nodes: the "
        "name of a fabric's figures (h100-sxm-nvlink4-ndr400, a100-sxm-nvlink3-hdr200, "
        "l4-pcie4-roce100, cpu-ray-local; per tier latency + bytes / bandwidth, sources in "
        "sim/profiles/interconnects.md). Unset: fixed costs per input. Any tier's figure can "
        'be changed with LEGATO_CORE_POLICIES or live: PATCH /admin/policies {"transfer": '
        "{...}}.",
    )
    core_policies: dict[str, Any] = Field(
        default_factory=dict,
        description="The core's configuration as a JSON object, the shape GET /admin/policies "
        "shows (every field of the core's config, those fixed at start included), applied at "
        "start over the named settings above.",
    )

    model_source_roots: Annotated[list[Path], NoDecode] = Field(
        default_factory=list,
        description="Folders under which models registered with weights_source=path must lie "
        "(symlinks resolved), separated by the path separator (':'); anything else is refused. "
        "Default: <var_dir> and the folders of the installed model packages.",
    )

    trace_roots: Annotated[list[Path], NoDecode] = Field(
        default_factory=list,
        description="Folders under which registered trace files must lie (symlinks resolved), "
        "separated by ':'; anything else is refused. Default: <var_dir> and the shipped "
        "traces folder (sim/traces/data).",
    )

    @field_validator("model_source_roots", "trace_roots", mode="before")
    @classmethod
    def _split_roots(cls, value: Any) -> Any:
        if isinstance(value, str):  # from the environment: "a:b" (a JSON list works too)
            text = value.strip()
            if text.startswith("["):
                return json.loads(text)
            return [part for part in text.split(os.pathsep) if part.strip()]
        return value

    def resolved_database_url(self) -> str:
        """The database URL to use: the explicit one, else the SQLite file under ``var_dir``."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.var_dir / 'legato.db').resolve()}"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read from the environment once."""
    return Settings()
