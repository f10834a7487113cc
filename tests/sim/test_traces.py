"""Trace readers on small samples, including each format's quirks."""

from __future__ import annotations

import random
import statistics

import pytest

from sim.traces.azure import parse_azure_timestamp, read_azure_csv
from sim.traces.mooncake import read_mooncake_jsonl
from sim.traces.records import SHIPPED, TraceRequest, assign_tenants, limit, scale_time
from sim.traces.synthetic import SyntheticSpec, generate, merge


def test_azure_seven_fraction_digits_and_offsets(tmp_path):
    path = tmp_path / "azure.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:17:03.9799600,4808,10\n"
        "2023-11-16 18:17:05.0319600,3180,8\n"
        "2023-11-16 18:17:04.5000000,10,1\n"  # out of order: readers sort
    )
    reqs = read_azure_csv(path)
    assert [r.input_tokens for r in reqs] == [4808, 10, 3180]
    assert reqs[0].arrival_s == 0.0
    assert reqs[1].arrival_s == pytest.approx(0.52004)
    assert reqs[2].arrival_s == pytest.approx(1.052)
    with_offset = parse_azure_timestamp("2024-05-10 00:00:00.1234567+00:00")
    assert with_offset.microsecond == 123456 and with_offset.utcoffset() is not None


def test_azure_rejects_wrong_columns_and_names_the_line(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("time,tokens\n1,2\n")
    with pytest.raises(ValueError, match="missing columns"):
        read_azure_csv(bad)
    broken = tmp_path / "broken.csv"
    broken.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.1,x,1\n")
    with pytest.raises(ValueError, match=r"broken.csv:2"):
        read_azure_csv(broken)


def test_mooncake_milliseconds_and_block_hashes(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text(
        '{"timestamp": 1500, "input_length": 1024, "output_length": 5, "hash_ids": [0, 7]}\n'
        "\n"
        '{"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [0, 1]}\n'
    )
    reqs = read_mooncake_jsonl(path)
    assert [r.arrival_s for r in reqs] == [0.0, 1.5]
    assert reqs[1].block_hashes == (0, 7)
    path.write_text('{"timestamp": 0}\n')
    with pytest.raises(ValueError, match="m.jsonl:1"):
        read_mooncake_jsonl(path)


def test_shipped_slices_load_and_share_prefixes():
    azure = read_azure_csv(SHIPPED["azure_code"])
    assert len(azure) == 1200
    assert all(b.arrival_s >= a.arrival_s for a, b in zip(azure, azure[1:], strict=False))
    mooncake = read_mooncake_jsonl(SHIPPED["mooncake_conversation"])
    assert len(mooncake) == 1000
    first_blocks = [r.block_hashes[0] for r in mooncake if r.block_hashes]
    # The conversation trace's requests share leading blocks (reusable prefix KV).
    assert len(set(first_blocks)) < len(first_blocks)


def test_scale_limit_and_tenant_mapping():
    reqs = [TraceRequest(arrival_s=float(i), input_tokens=1, output_tokens=1) for i in range(8)]
    fast = scale_time(reqs, 4.0)
    assert fast[-1].arrival_s == pytest.approx(7 / 4)
    assert len(limit(reqs, max_span_s=3.0)) == 4
    assert len(limit(reqs, max_requests=2)) == 2
    mapped = assign_tenants(reqs, ["a", "b"], [3, 1])
    assert [r.tenant for r in mapped[:4]] == ["a", "a", "a", "b"]
    with pytest.raises(ValueError, match="rate_factor"):
        scale_time(reqs, 0)
    with pytest.raises(ValueError, match="weights"):
        assign_tenants(reqs, ["a"], [0])


@pytest.mark.parametrize("cv", [1.0, 3.0])
def test_synthetic_rate_and_burstiness(cv):
    spec = SyntheticSpec(rate_rps=50.0, duration_s=200.0, cv=cv)
    reqs = generate(spec, random.Random(7))
    assert len(reqs) == pytest.approx(10_000, rel=0.1)
    gaps = [b.arrival_s - a.arrival_s for a, b in zip(reqs, reqs[1:], strict=False)]
    measured_cv = statistics.pstdev(gaps) / statistics.mean(gaps)
    assert measured_cv == pytest.approx(cv, rel=0.15)
    assert generate(spec, random.Random(7)) == reqs  # seeded: identical
    both = merge(reqs[:3], generate(SyntheticSpec(1.0, 5.0), random.Random(1)))
    assert [r.arrival_s for r in both] == sorted(r.arrival_s for r in both)
