"""sim.lessons.sweeps: the concept pages' computations reproduce the lesson (Examples 1 to 5) and
behave sensibly past it."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from sim.cost import RooflineCost, UnitsCost, cost_from_preset
from sim.lessons import lesson, sweeps
from sim.lessons.lesson import printed
from sim.simulate import simulate

# --- Example 1 -------------------------------------------------------------------------------


def test_decode_sweep_matches_the_lesson_table():
    df = sweeps.decode_sweep(range(1, 41)).set_index("batch")
    for row in lesson.decode_utilization()["rows"]:
        r = df.loc[row["batch"]]
        assert printed(r["bytes_gb"], 2) == row["bytes_gb"]
        assert printed(r["step_ms"], 2) == row["step_ms"]
        assert printed(r["tok_s"], 0) == row["tok_s"]
        assert printed(r["tok_s_per_seq"], 1) == row["tok_s_per_seq"]
        assert printed(r["flop_util_pct"], 2) == row["flop_util_pct"]
    assert df.loc[36, "fits"] and not df.loc[37, "fits"]
    assert (df["bound"] == "memory").all()
    assert df["step_ms"].equals(df[["memory_ms", "compute_ms"]].max(axis=1))


def test_decode_limits_and_table():
    lim = sweeps.decode_limits()
    assert lim["fit_sequences"] == 36
    assert lim["kv_over_weights_batch"] == 9  # 4.52 GB / 0.537 GB per sequence = 8.4
    assert lim["compute_bound_batch"] is None  # at 4,096 tokens a sequence's KV read outlasts its arithmetic
    rows = {r["batch"]: r for r in sweeps.decode_table()}
    assert rows[32]["kv_gb"] == 17.18 and rows[32]["bytes_gb"] == 21.7 and rows[1]["weights_gb"] == 4.52
    # short contexts: the step turns compute bound at the batch decode_limits names
    short = sweeps.decode_limits(512)
    cb = short["compute_bound_batch"]
    df = sweeps.decode_sweep([cb - 1, cb], 512).set_index("batch")
    assert df.loc[cb - 1, "bound"] == "memory" and df.loc[cb, "bound"] == "compute"
    kv = sweeps.decode_sweep([short["kv_over_weights_batch"] - 1, short["kv_over_weights_batch"]], 512)
    assert (kv["kv_gb"] > kv["weights_gb"]).tolist() == [False, True]


def test_decode_limits_when_the_weights_do_not_fit():
    lim = sweeps.decode_limits(4096, "rtx4090", "70B-fp16")
    assert lim["fit_sequences"] == 0
    assert not sweeps.decode_sweep([1], 4096, "rtx4090", "70B-fp16")["fits"].any()


# --- Examples 2 and 3 ------------------------------------------------------------------------


def test_compare_batching_reproduces_examples_2_and_3():
    out = sweeps.compare_batching(lesson.LESSON_OUTPUT_LENS, 4)
    s, c = out["static"], out["continuous"]
    assert (s["steps"], s["useful_tokens"], s["slot_steps"]) == (35, 75, 140)
    assert (c["steps"], c["useful_tokens"], c["slot_steps"]) == (27, 75, 108)
    assert 100 * s["useful_tokens"] // s["slot_steps"] == 53 and 100 * c["useful_tokens"] // c["slot_steps"] == 69
    assert s["finish_steps"] == [20, 20, 20, 20, 35, 35, 35, 35] and s["mean_finish"] == 27.5
    assert c["finish_steps"] == [12, 3, 7, 20, 8, 16, 12, 27] and c["mean_finish"] == 13.125
    assert c["join_steps"] == [1, 4, 8, 9, 13]
    assert s["padding_slot_steps"] == 140 - 75 and s["empty_slot_steps"] == 0
    assert c["padding_slot_steps"] == 0 and c["empty_slot_steps"] == 108 - 75
    # the lesson module's own figures agree
    assert lesson.static_batching()["finish_steps"] == s["finish_steps"]
    assert lesson.continuous_batching()["finish_steps"] == c["finish_steps"]


def test_compare_batching_with_arrivals():
    arrivals = [0, 0, 2, 5, 9, 9, 20, 30]
    out = sweeps.compare_batching(lesson.LESSON_OUTPUT_LENS, 4, arrivals)
    for f in out.values():
        assert f["useful_tokens"] == 75
        assert f["padding_slot_steps"] + f["empty_slot_steps"] + f["useful_tokens"] == f["slot_steps"]
        assert all(fin > a for fin, a in zip(f["finish_steps"], arrivals))
        assert f["mean_latency"] == pytest.approx(sum(fin - a for fin, a in zip(f["finish_steps"], arrivals)) / 8)
    assert out["continuous"]["mean_latency"] < out["static"]["mean_latency"]
    # one slot: both ways run the requests one after another, so they agree
    one = sweeps.compare_batching([3, 1, 2], 1)
    assert one["static"]["finish_steps"] == one["continuous"]["finish_steps"] == [3, 4, 6]


def test_batching_inputs():
    assert sweeps.parse_int_list("12, 3 7,,20", "n", 1, 100) == [12, 3, 7, 20]
    for text, msg in (("", "at least one"), ("1, x", "whole numbers"), ("0", "from 1 to 100"),
                      ("1 " * 5, "at most 4")):
        with pytest.raises(ValueError, match=msg):
            sweeps.parse_int_list(text, "n", 1, 100, max_items=4)
    with pytest.raises(ValueError, match="2 arrival steps for 3 requests"):
        sweeps.batching_workload([1, 2, 3], [0, 1])
    wl = sweeps.batching_workload([4, 5], [0, 3])
    assert [(r.id, r.prompt_len, r.max_tokens, r.arrival_step) for r in wl.requests] == [("r0", 1, 4, 0), ("r1", 1, 5, 3)]
    assert sweeps.batching_config("static", 4) == {"scheduler": "static", "max_num_seqs": 4}


# --- Examples 4 and 5 ------------------------------------------------------------------------


@pytest.mark.parametrize("budget", [64, 300, 4004])
def test_a_sweeps_column_run_reads_as_its_trace(budget):
    """simulate(columns=True) skips the pandas tables; the columns are the Trace's, value for value."""
    wl, config, horizon = lesson.long_prompt_case(4, 4000, budget)
    trace = simulate(wl, config, cost=cost_from_preset("rtx4090-8B"))
    cols = simulate(wl, config, cost=cost_from_preset("rtx4090-8B"), columns=True)
    assert lesson.long_prompt_summary(cols, horizon) == lesson.long_prompt_summary(trace, horizon)
    for table, got in (("steps", cols.steps), ("batch", cols.batch), ("requests", cols.requests)):
        want = getattr(trace, table)
        for c in ("step", "tokens", "request", "kind", "start", "end", "first_token_time", "finish_step"):
            if c in got:
                assert [None if x is None or x != x else x for x in got[c]] == \
                    [None if x is None or x != x or x is pd.NA else x for x in want[c].tolist()], (table, c)


def test_interference_case_is_example_4():
    wl, config, horizon = sweeps.interference_case(4, 4000, 4004)
    assert horizon == 7
    run = lesson.long_prompt_summary(simulate(wl, config, cost=UnitsCost()), horizon)
    assert [s["cost"] for s in run["steps"]] == pytest.approx([10, 10, 10, 80.08, 10, 10, 10])
    assert run["worst_gap"] == pytest.approx(80.08) and run["first_token"] == pytest.approx(80.08)
    # a budget above decoders + prompt is the same whole-prompt run; a chunked one runs 3 steps past its last chunk
    assert sweeps.interference_case(4, 4000, 10_000)[1] == config
    wl, config, horizon = sweeps.interference_case(4, 4000, 512)
    assert horizon == 4 + 8 - 1 + 3
    with pytest.raises(ValueError):
        sweeps.interference_case(4, 4000, 4)


def test_sweep_budgets():
    b = sweeps.sweep_budgets(4, 4000, extra=sweeps.LESSON_BUDGETS)
    assert b == sorted(set(b)) and b[-1] == 4004 and set(sweeps.LESSON_BUDGETS) <= set(b)
    assert b[0] == sweeps.min_budget(4, 4000) == 24  # at most 200 prompt steps
    for budget in set(b) - set(sweeps.LESSON_BUDGETS):  # each is the smallest budget for its number of steps
        k = math.ceil(4000 / (budget - 4))
        assert math.ceil(4000 / (budget - 5)) > k
    assert 20 <= len(b) <= 50
    assert sweeps.sweep_budgets(2, 5) == [3, 4, 5, 7]  # a tiny prompt: every step count from 5 down to 1


def test_budget_sweep_reproduces_example_5_and_finds_the_sweet_spot():
    budgets = sweeps.sweep_budgets(4, 4000, extra=sweeps.LESSON_BUDGETS)
    out = sweeps.budget_sweep(4, 4000, UnitsCost(), budgets)
    rows = {r["budget"]: r for r in out["rows"]}
    for want in lesson.chunked_prefill():
        r = rows[want["budget"]]
        assert (r["steps"], printed(r["first_token"], 2), printed(r["worst_gap"], 2)) == \
            (want["steps"], want["first_token"], want["worst_gap"])
    assert out["best_gap"] == 10 and out["time_unit"] == "units"
    # the earliest first token with a worst gap within 5% of 10: 8 chunks of 500 tokens
    assert out["sweet_spot"] == {"budget": 504, "steps": 8, "first_token": pytest.approx(80.64),
                                 "worst_gap": pytest.approx(10.08)}
    strict = sweeps.sweet_spot(out["rows"], tolerance=0.0)["sweet_spot"]
    assert strict["worst_gap"] == 10 and strict["budget"] < 504
    loose = sweeps.sweet_spot(out["rows"], tolerance=10.0)["sweet_spot"]
    assert loose["budget"] == 4004  # any gap allowed: the fastest first token, no chunking


def test_budget_sweep_under_a_roofline_preset():
    cost = cost_from_preset("rtx4090-8B")
    assert isinstance(cost, RooflineCost)
    out = sweeps.budget_sweep(4, 4000, cost, [24, 104, 504, 4004])
    assert out["time_unit"] == "ms"
    gaps = [r["worst_gap"] for r in out["rows"]]
    assert gaps == sorted(gaps)  # a bigger budget never shortens the longest step
    assert out["sweet_spot"]["budget"] in (24, 104, 504, 4004)
    with pytest.raises(ValueError, match="no budget"):
        sweeps.budget_sweep(4, 4000, cost, [])
