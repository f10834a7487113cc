"""The executor flags of ``legato up``, ``legato api`` and ``legato serve``: ``--executor
local|ray`` and ``--ray-address HOST:PORT``.

A flag beats the environment: :func:`apply` writes it into ``LEGATO_EXECUTOR`` /
``LEGATO_RAY_ADDRESS`` (which ``up`` then hands to the API it starts) and drops the cached
settings, so :func:`~control.config.get_settings` reads it. With the Ray executor and an
address, the address must answer (a TCP connection to the head's GCS port) before anything
starts; otherwise the command ends with one sentence and exit status 1 instead of Ray's own
minute of retries.
"""

from __future__ import annotations

import os
import socket
from typing import Annotated

import typer

ExecutorOption = Annotated[
    str | None,
    typer.Option("--executor", help="executor backend: local | ray (default: LEGATO_EXECUTOR)"),
]
RayAddressOption = Annotated[
    str | None,
    typer.Option(
        "--ray-address",
        help="Ray cluster to join (host:port of `ray start --head`; default: "
        "LEGATO_RAY_ADDRESS, else start a local Ray head)",
    ),
]
#: seconds the reachability check waits for the head to accept a connection
CONNECT_TIMEOUT_S = 3.0


def apply(executor: str | None, ray_address: str | None) -> None:
    """Put the flags into the environment (flag beats env), then check a Ray address."""
    from control.config import get_settings

    if executor is not None:
        if executor not in ("local", "ray"):
            raise typer.BadParameter(
                f"{executor!r}: expected local or ray", param_hint="--executor"
            )
        os.environ["LEGATO_EXECUTOR"] = executor
    if ray_address is not None:
        os.environ["LEGATO_RAY_ADDRESS"] = ray_address
    get_settings.cache_clear()
    settings = get_settings()
    if settings.executor == "ray" and settings.ray_address:
        problem = unreachable(settings.ray_address)
        if problem:
            typer.echo(f"error: {problem}", err=True)
            raise typer.Exit(1)


def unreachable(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> str | None:
    """Why the Ray head at ``address`` (``host:port`` or ``ray://host:port``) cannot be
    reached, in one sentence; None when it accepts a connection (or the address is ``auto``,
    which Ray resolves itself)."""
    if address == "auto":
        return None
    hostport = address.split("://", 1)[-1]
    host, sep, port = hostport.rpartition(":")
    if not sep or not host or not port.isdigit():
        return f"the Ray address {address!r} is not host:port"
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return None
    except OSError as err:
        return (
            f"cannot reach the Ray cluster at {address} ({err.strerror or err}): start its "
            f"head with `ray start --head`, or leave --ray-address out to start a local head"
        )
