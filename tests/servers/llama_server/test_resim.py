"""Re-simulating a llama-server log on its own clock: the cost fitted to its calls, and the
simulator's replay of its workload against what the server did (shared logs as fixtures)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sim.cost import CalibratedCost
from servers.llama_server import read_llama_log, workload_from_trace
from servers.llama_server.resim import call_cost, call_periods, has_call_times, resimulate
from sim.metrics import summary

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "llama-logs"
TIMED = ["34af94cd9/s1_two_slots_chunked_prompt.log", "34af94cd9/s2_np4_mixed_burst_seed2211.log",
         "34af94cd9/s3_no_cont_batching.log", "34af94cd9/s7_chat_and_completion_endpoints.log",
         "c392e5094/s1_two_slots_chunked_prompt.log"]


@pytest.fixture(scope="module", params=TIMED)
def timed(request):
    return read_llama_log(FIX / request.param)


def test_the_fitted_cost_is_physical_and_fits(timed):
    cost = call_cost(timed)
    assert cost.time_unit == "ms"
    assert min(cost.per_step, cost.per_token, cost.per_context_token) >= 0
    assert cost.per_token > 0 and cost.fit_info["r2"] > 0.8
    assert cost.fit_info["samples"] == int((timed.steps["num_tokens"] > 0).sum())


def test_call_periods_add_the_pause_between_calls(timed):
    s = timed.steps
    dur = (s["end"] - s["start"]).to_numpy(dtype=float)
    extra = call_periods(timed) - dur
    assert np.allclose(extra, extra[0]) and extra[0] >= 0
    gaps = s["start"].to_numpy(dtype=float)[1:] - s["end"].to_numpy(dtype=float)[:-1]
    assert extra[0] == pytest.approx(float(np.median(gaps[gaps >= 0])))


def test_the_replay_matches_the_server_on_its_own_clock(timed):
    """The simulated llama-server (the log's settings, its arrivals, the fitted cost) against the log:
    mean TTFT, end-to-end time and duration within 10%, and the same tokens."""
    sim = resimulate(timed, {"slots": dict(workload_from_trace(timed).config)}, wall_clock=True)["slots"]
    assert sim.time_unit == "ms"
    a, b = summary(timed), summary(sim)
    for key in ("ttft_mean", "e2e_mean", "duration"):
        assert b[key] == pytest.approx(a[key], rel=0.1), key
    assert b["output_tokens"] == a["output_tokens"]


def test_the_replay_is_deterministic():
    tr = read_llama_log(FIX / TIMED[1])
    cfg = {"v": {**workload_from_trace(tr).config, "scheduler": "vllm"}}
    one, two = resimulate(tr, cfg, wall_clock=True)["v"], resimulate(tr, cfg, wall_clock=True)["v"]
    assert one.to_bytes() == two.to_bytes()


def test_a_log_without_timestamps_has_no_wall_clock():
    tr = read_llama_log(FIX / "34af94cd9" / "s6_stream_cancel_seed601.log")
    assert not has_call_times(tr)
    with pytest.raises(ValueError, match="no timestamps"):
        call_cost(tr)
    runs = resimulate(tr, {"slots": dict(workload_from_trace(tr).config)})  # model calls still work
    assert summary(runs["slots"])["finished"] > 0


def test_nonnegative_fit_pins_a_negative_constant():
    # times fall with the step count: a free fit finds a negative per-step cost
    samples = [(n, [0], 2.0 * n - 5.0) for n in (3, 4, 5, 6, 8)]
    free = CalibratedCost.fit(samples)
    assert free.per_step == pytest.approx(-5.0)
    pinned = CalibratedCost.fit(samples, nonnegative=True)
    assert pinned.per_step == 0 and pinned.per_token > 0 and pinned.per_context_token >= 0
    assert pinned.fit_info["r2"] < free.fit_info["r2"]


def test_cli_resim_prints_the_comparison():
    """python -m sim llamalog LOG --resim --json: the same table the page shows, in ms for a log with
    timestamps (with the fitted cost), in model calls for one without."""
    import json
    import subprocess
    import sys

    from servers.llama_server.resim import resim_table

    root = FIX.parents[2]
    log = FIX / TIMED[1]
    out = subprocess.run([sys.executable, "-m", "sim", "llamalog", str(log), "--resim", "--json"], cwd=root,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["clock"] == "ms" and got["cost"]["fit"]["r2"] > 0.8
    rows = {r["metric"]: r for r in got["rows"]}
    tr = read_llama_log(log)
    want = resim_table({"log": tr, **resimulate(tr, {"simulated llama-server": dict(workload_from_trace(tr).config)},
                                                 wall_clock=True)}, "ms").set_index("metric")
    assert rows["mean TTFT (ms)"]["simulated llama-server"] == pytest.approx(
        want.loc["mean TTFT (ms)", "simulated llama-server"])
    assert rows["model calls"]["log"] == len(tr.steps)
    plain = subprocess.run([sys.executable, "-m", "sim", "llamalog",
                            str(FIX / "34af94cd9" / "s6_stream_cancel_seed601.log"), "--resim"], cwd=root,
                           capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0 and "model-call clock" in plain.stdout and "mean TTFT (calls)" in plain.stdout
