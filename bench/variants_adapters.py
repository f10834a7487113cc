"""LoRA adapters on one SmolLM2 replica (issue 27): how many adapters one replica serves, what
a switch to an adapter it does not hold costs, and throughput with adapters against the base.

One replica is the generate adapter of a worker (``GenerateAdapter`` on the CPU, one thread),
driven in process: the measurement is of PEFT loading and mixed-adapter batches, not of the
worker's IPC. ``ADAPTERS`` random rank-8 LoRA adapters (q, v and up projections; both factors
drawn at scale 0.1, so each changes the output) are saved as PEFT folders in a temporary folder.

Figures:

* ``adapters_per_replica``: distinct adapters the one replica served (each held at once, in
  mixed batches; an adapter counts when every row of it equals what it gives its prompt alone
  and differs from the base's text, so an adapter that was not applied does not count);
* ``adapter_switch_ms_p50`` / ``_p90``: time to make an adapter the replica does not hold
  usable (``LoraSlots.ensure``: PEFT reads the folder and injects its weights), measured on
  every load of a replica with 4 slots serving the adapters round robin (each a miss);
* ``throughput_tokens_per_s`` with mixed-adapter batches (8 requests, 8 different adapters, one
  forward for all rows) and with the base only (the same batches, no adapter), and their ratio.

Run: ``python bench/variants_adapters.py`` (about a minute here).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from control import clock  # noqa: E402
from control.executor import sources  # noqa: E402
from control.executor.adapters.base import PreparedItem  # noqa: E402
from control.executor.adapters.generate import GenerateAdapter  # noqa: E402
from control.executor.protocol import AdapterRef, BatchItem, GenParams, StepKey  # noqa: E402
from tests.executor.test_adapters import RecordingCtx  # noqa: E402
from tests.support.lora_adapters import make_adapter  # noqa: E402

CACHE = Path("var/models")
ADAPTERS = 12
BATCH = 8
TOKENS = 16
ROUNDS = 3
PROMPTS = [f"Question {i}: name one thing a {w} does." for i, w in
           enumerate(("cat", "river", "teacher", "engine", "tree", "clock", "bird", "ship"))]  # fmt: skip


def _items(refs: list[AdapterRef | None], first: int = 0) -> list[PreparedItem]:
    """Row ``i`` asks ``PROMPTS[first + i]`` (cyclically) with adapter ``refs[i]``."""
    items = []
    for i, ref in enumerate(refs):
        inputs = {"prompt": PROMPTS[(first + i) % len(PROMPTS)]}
        item = BatchItem(StepKey("b", str(i)), str(i), inputs, GenParams(max_tokens=TOKENS),
                         adapter=ref)  # fmt: skip
        items.append(PreparedItem(item, inputs))
    return items


def _run(
    gen: GenerateAdapter, refs: list[AdapterRef | None], first: int = 0
) -> tuple[list[str], int, float]:
    t0 = clock.monotonic()
    outs = gen.run(_items(refs, first), RecordingCtx())
    took = clock.monotonic() - t0
    assert all(o.error is None for o in outs), [o.error for o in outs]
    return [o.value["text"] for o in outs], sum(o.output_tokens for o in outs), took


def _served(folder: Path, refs: list[AdapterRef]) -> tuple[int, float, float]:
    """(distinct adapters served correctly, mixed tokens/s, base tokens/s) on one replica. A
    row counts when its text equals what its adapter gives its prompt alone."""
    gen = GenerateAdapter(folder, torch.device("cpu"), {"max_adapters": ADAPTERS, "chat": False})
    for ref in refs:
        gen.lora.ensure(ref)  # loaded before the timed batches (switches are measured apart)
    ok: dict[str, bool] = {}
    mixed_tok, mixed_s, base_tok, base_s = 0, 0.0, 0, 0.0
    for k in range(ROUNDS):
        batch = [refs[(k * BATCH + i) % len(refs)] for i in range(BATCH)]
        texts, tokens, took = _run(gen, batch)
        mixed_tok, mixed_s = mixed_tok + tokens, mixed_s + took
        base, tokens, took = _run(gen, [None] * BATCH)
        base_tok, base_s = base_tok + tokens, base_s + took
        for i, (ref, text) in enumerate(zip(batch, texts, strict=True)):
            alone = _run(gen, [ref], first=i)[0][0]  # its prompt, alone
            ok[ref.name] = ok.get(ref.name, True) and text == alone and text != base[i]
    return sum(ok.values()), mixed_tok / mixed_s, base_tok / base_s


def _switches(folder: Path, refs: list[AdapterRef]) -> list[float]:
    """Milliseconds per adapter load on a replica of 4 slots serving ``refs`` round robin."""
    gen = GenerateAdapter(folder, torch.device("cpu"), {"max_adapters": 4, "chat": False})
    gen.lora.ensure(refs[-1])  # the first load also wraps the model in PEFT: not a switch
    times = []
    for ref in refs * 2:
        assert ref.name not in gen.lora.held
        t0 = clock.monotonic()
        gen.lora.ensure(ref)
        times.append((clock.monotonic() - t0) * 1000)
    return times


def measure() -> dict:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    folder = sources.ensure_smollm2(CACHE)
    with tempfile.TemporaryDirectory() as tmp:
        refs = [
            AdapterRef(f"a{i}", str(make_adapter(folder, Path(tmp) / f"a{i}", seed=i, rank=8,
                                                 scale=0.1)))
            for i in range(ADAPTERS)
        ]  # fmt: skip
        served, mixed, base = _served(folder, refs)
        switches = sorted(_switches(folder, refs))
    return {
        "model": "SmolLM2-135M-Instruct (fp32, CPU, 1 thread)",
        "adapters": ADAPTERS,
        "adapters_per_replica": served,
        "adapter_switch_ms_p50": round(statistics.median(switches), 1),
        "adapter_switch_ms_p90": round(switches[int(0.9 * (len(switches) - 1))], 1),
        "switches_measured": len(switches),
        "batch": BATCH,
        "max_tokens": TOKENS,
        "throughput_tokens_per_s_adapters": round(mixed, 1),
        "throughput_tokens_per_s_base": round(base, 1),
        "throughput_adapters_vs_base": round(mixed / base, 3),
        "mixed_batches": "PEFT adapter_names: one forward for all rows, each row its adapter",
    }


if __name__ == "__main__":
    print(json.dumps(measure()))
