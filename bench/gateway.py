"""Gateway benchmark: the embeddings route under 64 concurrent clients, over real HTTP.

Builds a throwaway database with one CPU device, a tiny BERT embedding model (a real executor
worker runs it) and one tenant; serves the real app with uvicorn on a free loopback port; then
64 clients send ``/v1/embeddings`` calls back to back for ``--seconds``. The clients run in a
separate process, so their own HTTP work is not charged to the gateway. Prints JSON:

* ``req_per_s`` and ``p50_ms``/``p99_ms``: client-measured latency of successful calls;
* ``overhead_ms_p50`` (goal <= 2 ms): the gateway's own latency per call, measured with one
  client so that nothing queues behind other calls: client-measured latency minus the
  executor's own time for that run (the exact ``device_us`` the worker measured, found through
  the ``X-Legato-Run-Id`` header; the ledger rounds it up to whole ms). It is what the
  gateway, admission, the core's turn, the worker round trip and the bookkeeping (request row
  and ledger entry committed before the answer) add to a call. The one client calls over a
  blocking socket: a lone caller needs no event loop of its own;
* ``overhead_ms_p50_multi``: the same subtraction with all the clients: on this machine it
  is queueing, not per-call cost. Closed-loop clients make latency = clients / throughput
  (Little's law), and the gateway, the worker and the clients share the same few cores, so no
  gateway could bring it near 2 ms here (``explanation`` gives the bound from the CPU each
  request costs);
* ``gateway_cpu_us_per_req`` (and ``_single``): CPU time of the gateway process (all its
  threads) per request; ``single``/``multi`` add the worker's and the client's CPU per request
  and the 1-minute load average before the phase (the machine is shared);
* ``explanation``: why the many-client overhead is what it is (Little's law on these cores);
* ``writer``: commits, rows and inline commits (made on the event loop while the database
  thread was idle) of the group-commit writer during the 64-client phase;
* ``server``: the event loop and HTTP parser serving the gateway. Like ``legato api``
  (uvicorn's "auto"), the bench uses uvloop and httptools when they are installed.

The clients speak raw keep-alive HTTP/1.1 (one connection each): httpx cost about 13 ms of CPU
per call at 64 connections here, so the old figures mostly measured the load generator.

* ``fast_paths``: which speed tricks were on. ``--without NAME`` (repeatable) switches one
  off to measure what it buys: the run log's (``raw_sqlite``, ``inline_commits``,
  ``commit_at_turn_end``, see :mod:`control.store.runlog.config`) and the gateway's
  ``hot_routes`` (``LEGATO_HOT_ROUTES``).

Run: ``python bench/gateway.py [--seconds 10] [--clients 64] [--without NAME ...]``. Never run
as a timed test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import shutil
import socket
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from control import native  # noqa: E402

native.install()  # before the core is imported: the compiled core when a build is current

import torch  # noqa: E402
import uvicorn  # noqa: E402

from control.api.settings import GatewayConfig  # noqa: E402
from control.clock import perf_counter, process_time  # noqa: E402
from control.config import Settings  # noqa: E402
from control.executor import sources  # noqa: E402
from control.executor.host import ExecutorConfig, LocalExecutor  # noqa: E402
from control.executor.protocol import DeviceInfo, ModelRef  # noqa: E402
from control.services import build_services  # noqa: E402
from control.services.loadgen import percentile  # noqa: E402
from control.store.runlog import FAST_PATHS, WriterConfig  # noqa: E402
from control.wiring.gateway import gateway_app  # noqa: E402
from control.wiring.live import LiveOptions  # noqa: E402
from db.migrate import upgrade  # noqa: E402
from db.session import make_engine, make_session_factory  # noqa: E402

MODEL = ModelRef("tiny-embed:1", "embed", "tiny", "bert")
#: The tricks ``--without`` can switch off: the run log's and the gateway's hot routes.
TRICKS = (*FAST_PATHS, "hot_routes")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# as `legato api` serves: the server outlives the client's idle pool connections
KEEP_ALIVE_S = Settings.model_fields["api_keep_alive_s"].default


async def _serving(app, inference) -> tuple[uvicorn.Server, asyncio.Task, str]:  # noqa: ANN001
    """Start ``inference`` and serve ``app`` on a free 127.0.0.1 port: (server, its task, base
    URL). Stop with ``server.should_exit = True``, ``await task``, ``await inference.stop()``."""
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", access_log=False,
                                           lifespan="off",
                                           timeout_keep_alive=KEEP_ALIVE_S))  # fmt: skip
    await inference.start()
    task = asyncio.get_running_loop().create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.05)
    return server, task, f"http://127.0.0.1:{port}"


def _stack(root: Path, without: frozenset[str], also_settled):  # noqa: ANN001, ANN202
    url = f"sqlite:///{root / 'legato.db'}"
    upgrade(url)
    factory = make_session_factory(make_engine(url))
    services = build_services(factory)
    node = services.nodes.create("bench", name="local")
    services.devices.create("bench", name="cpu:0", node_id=node.id, kind="cpu",
                            memory_mib=2048, is_real=True)  # fmt: skip
    services.models.create("bench", name="tiny-embed", version="1", task="embed",
                           weights_source="declared", weights_location="tiny bert",
                           memory_mib=16, max_batch_size=32, max_batch_tokens=8192)  # fmt: skip
    tenant = services.tenants.create("bench", name="bench", weight=1)
    key = services.api_keys.create_key("bench", tenant.id).plaintext
    cache = root / "models"
    sources.ensure_tiny("bert", cache)
    executor = LocalExecutor(
        ExecutorConfig(cache_dir=str(cache), use_cuda=False, poll_queue=False),
        [DeviceInfo("cpu:0", "cpu", 0, 2048, 0)],
    )
    writer = WriterConfig().without(*(without & set(FAST_PATHS)))
    config = GatewayConfig(key_cache_ttl_s=30, hot_routes="hot_routes" not in without)
    options = LiveOptions(model_refs={"tiny-embed:1": MODEL}, writer=writer)
    app = gateway_app(services, config, executor, options, start_with_app=False,
                      also_settled=also_settled)  # fmt: skip
    inference = app.state.gateway.inference
    fast = {**writer.fast_paths(), "hot_routes": config.hot_routes}
    return app, services, inference, key, fast


def _request_head(host: str, port: int, key: str) -> str:
    """The fixed part of every embeddings call's request head (Content-Length follows)."""
    return (f"POST /v1/embeddings HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Authorization: Bearer {key}\r\nContent-Type: application/json\r\n")  # fmt: skip


def _call_bytes(head: str, client: int, n: int) -> bytes:
    """Call ``n`` of ``client``: a one-input embeddings request, head and body."""
    body = json.dumps({"model": "tiny-embed", "input": f"client {client} call {n}"}).encode()
    return f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body


def _parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    """Status and lower-cased headers of a response head (ending in a blank line)."""
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    return int(lines[0].split(" ", 2)[1]), headers


class _Conn:
    """One keep-alive HTTP/1.1 connection speaking just enough of the protocol for the bench.

    The load generator shares the machine's cores with the gateway, so it must cost little:
    httpx spends about 13 ms of CPU per call with 64 connections here, which made the old
    figures measure the client. This client writes one request and reads one response with a
    Content-Length body; anything else fails loudly.
    """

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, request: bytes) -> tuple[int, dict[str, str], bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        self.writer.write(request)
        status, headers = _parse_head(await self.reader.readuntil(b"\r\n\r\n"))
        payload = await self.reader.readexactly(int(headers["content-length"]))
        return status, headers, payload

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def _clients(host: str, port: int, key: str, clients: int, seconds: float) -> list:
    """(latency s, run id) of every successful call made by ``clients`` loops, one keep-alive
    connection each."""
    done: list[tuple[float, str]] = []
    head = _request_head(host, port, key)
    conns = [_Conn(host, port) for _ in range(clients)]
    stop = perf_counter() + seconds

    async def loop(i: int) -> None:
        n = 0
        while perf_counter() < stop:
            request = _call_bytes(head, i, n)
            t0 = perf_counter()
            status, headers, _ = await conns[i].post(request)
            if status == 200:
                done.append((perf_counter() - t0, headers["x-legato-run-id"]))
            n += 1

    try:
        await asyncio.gather(*(loop(i) for i in range(clients)))
    finally:
        for conn in conns:
            conn.close()
    return done


def _one_client(host: str, port: int, key: str, seconds: float) -> list:
    """``_clients`` for a single caller, with a blocking socket: one caller waiting for its
    answer needs no event loop, and the loop's own wake-ups (~0.1 ms a call here) would
    otherwise be charged to the gateway's single-client overhead."""
    done: list[tuple[float, str]] = []
    head = _request_head(host, port, key)
    with socket.create_connection((host, port)) as sock, sock.makefile("rb") as stream:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        stop, n = perf_counter() + seconds, 0
        while perf_counter() < stop:
            request = _call_bytes(head, 0, n)
            t0 = perf_counter()
            sock.sendall(request)
            lines = [stream.readline()]
            while lines[-1] not in (b"\r\n", b""):
                lines.append(stream.readline())
            status, headers = _parse_head(b"".join(lines))
            stream.read(int(headers["content-length"]))
            if status == 200:
                done.append((perf_counter() - t0, headers["x-legato-run-id"]))
            n += 1
    return done


def _client_process(base: str, key: str, clients: int, seconds: float, out) -> None:  # noqa: ANN001
    # The clients stand for callers on other machines: they may run on any core, not only on
    # the ones the gateway keeps to (inherited at spawn, see ExecutorConfig.keep_host_off_worker_cores).
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, range(os.cpu_count() or 1))
    host, port = base.removeprefix("http://").split(":")
    start, cpu = perf_counter(), process_time()
    if clients == 1:
        calls = _one_client(host, int(port), key, seconds)
    else:
        calls = asyncio.run(_clients(host, int(port), key, clients, seconds))
    out.put((calls, perf_counter() - start, process_time() - cpu))


async def _run_clients(base: str, key: str, clients: int, seconds: float) -> tuple:
    """The clients in a child process (spawned: it shares nothing with the gateway); returns
    the calls, the wall time of the calling phase and the client's CPU seconds."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_client_process, args=(base, key, clients, seconds, out))
    proc.start()
    calls = await asyncio.to_thread(out.get)
    await asyncio.to_thread(proc.join)
    return calls


def _proc_cpu_s(pid: int | None) -> float:
    """CPU seconds (user + system) of another process of ours, from /proc (0 if unknown)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, TypeError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _phase(
    base: str, key: str, clients: int, seconds: float, device_us: dict, worker
) -> dict:  # noqa: ANN001
    """One calling phase with its latency, overhead and CPU figures."""
    load = os.getloadavg()[0]
    cpu, wcpu = process_time(), _proc_cpu_s(worker())
    calls, wall, client_cpu = await _run_clients(base, key, clients, seconds)
    cpu, wcpu = process_time() - cpu, _proc_cpu_s(worker()) - wcpu
    n = max(1, len(calls))
    lat = [c[0] * 1000 for c in calls]
    # exact device time of each run (the ledger rounds it up to whole milliseconds)
    over = [c[0] * 1000 - device_us.get(c[1], 0) / 1000 for c in calls]
    return {
        "requests": len(calls),
        "seconds": round(wall, 2),
        "req_per_s": round(len(calls) / wall, 1),
        "p50_ms": round(percentile(lat, 0.5) or 0, 2),
        "p99_ms": round(percentile(lat, 0.99) or 0, 2),
        "overhead_ms_p50": round(percentile(over, 0.5) or 0, 2),
        "gateway_cpu_us_per_req": round(cpu / n * 1e6),
        "worker_cpu_us_per_req": round(wcpu / n * 1e6),
        "client_cpu_us_per_req": round(client_cpu / n * 1e6),
        "loadavg_1m_before": round(load, 2),
    }


def _explain(multi: dict, clients: int) -> str:
    """Why the many-client overhead is what it is (Little's law on this machine's cores)."""
    cores = os.cpu_count() or 1
    per_req_us = (multi["gateway_cpu_us_per_req"] + multi["worker_cpu_us_per_req"]
                  + multi["client_cpu_us_per_req"])  # fmt: skip
    bound = cores * 1e6 / max(1, per_req_us)
    return (
        f"{clients} closed-loop clients on {cores} shared cores: latency = clients / "
        f"throughput (Little's law), so overhead at {clients} clients is queueing behind the "
        f"CPU. Gateway + worker + client spend {per_req_us} us of CPU per request, so these "
        f"cores serve at most ~{bound:.0f} req/s even when idle otherwise (measured "
        f"{multi['req_per_s']} with load {multi['loadavg_1m_before']} before the phase); "
        f"{clients} / that rate is the floor of the latency. overhead_ms_p50, taken with one "
        "client, is the gateway's own cost per request."
    )


def _server_kind() -> dict[str, str]:
    """The event loop running now and the HTTP parser uvicorn's "auto" picks."""
    try:
        import httptools  # noqa: F401

        http = "httptools"
    except ImportError:
        http = "h11"
    return {"loop": type(asyncio.get_running_loop()).__module__.split(".")[0], "http": http}


async def main(seconds: float, clients: int, without: frozenset[str] = frozenset()) -> dict:
    torch.set_num_threads(1)
    root = Path(tempfile.mkdtemp(prefix="legato-bench-"))
    try:
        device_us: dict[str, int] = {}

        def note(request_id: str, record, usage) -> None:  # noqa: ANN001
            device_us[request_id] = sum(u.device_us for u in usage)

        app, services, inference, key, fast = _stack(root, without, note)
        server, task, base = await _serving(app, inference)
        worker = lambda: inference.runtime.executor.worker_pid("cpu:0")  # noqa: E731
        await _run_clients(base, key, 4, 1.0)  # warm-up: first batches, caches
        single = await _phase(base, key, 1, max(2.0, seconds / 2), device_us, worker)
        w = inference.writer
        commits, rows, inline = w.commits, w.rows, w.inline_commits
        multi = await _phase(base, key, clients, seconds, device_us, worker)
        commits, rows, inline = w.commits - commits, w.rows - rows, w.inline_commits - inline
        server.should_exit = True
        await task
        await inference.stop()
        return {
            "route": "/v1/embeddings",
            "model": "tiny BERT (2 layers, hidden 32), one CPU worker",
            "client": (
                "raw keep-alive HTTP/1.1, one connection per client, separate process; "
                "asyncio streams for many clients, a blocking socket for one"
            ),
            "clients": clients,
            "seconds": multi["seconds"],
            "requests": multi["requests"],
            "req_per_s": multi["req_per_s"],
            "p50_ms": multi["p50_ms"],
            "p99_ms": multi["p99_ms"],
            "overhead_ms_p50": single["overhead_ms_p50"],
            "goal_overhead_ms_p50": 2.0,
            "overhead_ms_p50_multi": multi["overhead_ms_p50"],
            "gateway_cpu_us_per_req": multi["gateway_cpu_us_per_req"],
            "gateway_cpu_us_per_req_single": single["gateway_cpu_us_per_req"],
            "single": single,
            "multi": multi,
            "explanation": _explain(multi, clients),
            "server": _server_kind(),
            "fast_paths": fast,
            "writer": {
                "commits": commits,
                "rows": rows,
                "rows_per_commit": round(rows / max(1, commits), 2),
                "inline_commits": inline,
            },
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--without", action="append", default=[], choices=TRICKS,
                        help="switch this speed trick off (repeatable)")  # fmt: skip
    args = parser.parse_args()
    try:  # the loop uvicorn's "auto" picks (as ``legato api`` serves)
        import uvloop

        run = uvloop.run
    except ImportError:
        run = asyncio.run
    print(json.dumps(run(main(args.seconds, args.clients, frozenset(args.without))), indent=2))
