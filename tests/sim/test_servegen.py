"""ServeGen reader: headerless window fits, idle windows, token quantiles."""

from __future__ import annotations

import random

import pytest

from sim.traces.servegen import SERVEGEN_DIR, generate_servegen, read_token_quantiles, read_windows


def test_windows_are_headerless_and_idle_ones_are_kept(tmp_path):
    p = tmp_path / "chunk-1-trace.csv"
    p.write_text("600,2.0,1.0,Gamma,1.0,0.5\n0,0,,,,\n")
    ws = read_windows(p)
    assert [w.start_s for w in ws] == [0.0, 600.0]  # sorted
    assert ws[0].rate_rps == 0 and ws[0].dist == ""
    assert ws[1].dist == "Gamma" and ws[1].shape == 1.0


def test_bad_window_names_the_line(tmp_path):
    p = tmp_path / "chunk-1-trace.csv"
    p.write_text("0,2.0,1.0,Gamma,1.0,0.5\nzero,x,1,Gamma,1,1\n")
    with pytest.raises(ValueError, match=":2:"):
        read_windows(p)


@pytest.mark.parametrize("client", [12, 14, 26, 36])
def test_generated_rate_matches_the_windows_rate(client):
    span = 600.0
    reqs = generate_servegen({client: "t"}, span, random.Random(1))
    rate = read_windows(SERVEGEN_DIR / f"chunk-{client}-trace.csv")[0].rate_rps
    assert len(reqs) == pytest.approx(rate * span, rel=0.05)
    assert all(0 <= r.arrival_s < span and r.tenant == "t" for r in reqs)
    assert [r.arrival_s for r in reqs] == sorted(r.arrival_s for r in reqs)


def test_token_lengths_follow_the_quantiles():
    q = read_token_quantiles(SERVEGEN_DIR / "token_stats.csv")[(12, "input_tokens")][0][1]
    reqs = generate_servegen({12: "a"}, 120.0, random.Random(3))
    ins = sorted(r.input_tokens for r in reqs)
    assert q[0] <= ins[len(ins) // 2] <= q[-1]
    assert abs(ins[len(ins) // 2] - q[4]) <= 3  # median near q50
