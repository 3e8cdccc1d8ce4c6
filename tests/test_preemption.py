"""sim.preemption: victims, blocks held, KV tokens and the cost of recompute vs swap (lesson Example 8)."""
from __future__ import annotations

import pytest

from sim import scenarios
from sim.cost import cost_from_preset
from sim.lessons import lesson
from sim.lessons.lesson import printed
from sim.preemption import (blocks_held, demoted, kv_tokens, preemption_table, step_kinds, swap_vs_recompute,
                            wasted_work)
from sim.simulate import simulate


@pytest.fixture(scope="module")
def runs():
    wl = scenarios.workload("lesson_preemption")
    cost = cost_from_preset("rtx4090-8B")
    return {mode: simulate(wl, {"preemption_mode": mode}, cost=cost) for mode in ("recompute", "swap")}


def test_first_preemption_is_the_lessons(runs):
    pre = preemption_table(runs["recompute"])
    first = pre.iloc[0]
    lf = lesson.preemption()
    # lesson step 21 = simulator step 22 (step 1 is the prefill the lesson starts after)
    assert (first["step"] - 1, first["victim"], first["blocks_freed"], first["kv_tokens"]) == \
        (lf["preempt_step"], lf["victim"], lf["freed_blocks"], lf["recompute_tokens"]) == (21, "r3", 4, 60)
    assert first["mode"] == "recompute"
    assert pre["victim"].tolist() == ["r3", "r2"] and pre["kv_tokens"].tolist() == [60, 112]


def test_blocks_and_tokens_after_forty_lesson_steps(runs):
    tr = runs["recompute"]
    held = blocks_held(tr)
    tok = kv_tokens(tr, held)
    assert held.loc[21].tolist() == [5, 5, 6, 4] and held.loc[22].tolist() == [6, 5, 6, 0]
    assert held.loc[41].sum() == 20
    assert tok.loc[41].to_dict() == {**lesson.preemption()["final_tokens"], "r3": 0}
    kinds = step_kinds(tr, held)
    assert kinds.loc[1].tolist() == ["prefill"] * 4
    assert kinds.loc[22, "r3"] == "waiting" and kinds.loc[61, "r3"] == "recompute"


def test_swap_run_recomputes_nothing_and_moves_the_blocks(runs):
    r, s = wasted_work(runs["recompute"]), wasted_work(runs["swap"])
    assert (r["recomputed_tokens"], r["swap_bytes"]) == (172, 0)
    assert s["recomputed_tokens"] == 0
    assert s["swap_bytes"] == 2 * (4 + 7) * 16 * 131072  # both victims' blocks, out and back
    assert preemption_table(runs["swap"])["mode"].tolist() == ["swap", "swap"]
    assert s["total_time"] < r["total_time"]  # under the roofline, the copies cost less than the prefill


def test_swap_vs_recompute_at_2000_tokens_is_the_lessons():
    row = swap_vs_recompute([0, 2000]).iloc[1]
    lf = lesson.preemption()
    assert printed(row["swap_ms"], 1) == lf["swap_ms"] == 16.6
    assert printed(row["recompute_ms"], 1) == lf["recompute_ms"] == 388.9
    assert row["ratio"] == pytest.approx(388.86 / 16.644, rel=1e-3)
    faster = swap_vs_recompute([2000], link="pcie5-x16").iloc[0]
    assert faster["swap_ms"] == pytest.approx(row["swap_ms"] / 2)


def test_priority_victim_is_the_demoted_request():
    wl = scenarios.workload("lesson_preemption")
    low = demoted(wl, ["r0"])
    assert [r.priority for r in low.requests] == [1, 0, 0, 0] and low.config == wl.config
    assert [r.priority for r in wl.requests] == [0, 0, 0, 0]  # the original is untouched
    fcfs = preemption_table(simulate(wl, {"policy": "fcfs"}))
    prio = preemption_table(simulate(low, {"policy": "priority"}))
    assert fcfs["victim"].iloc[0] == "r3"
    assert (prio["step"].iloc[0], prio["victim"].iloc[0], prio["kv_tokens"].iloc[0]) == (22, "r0", 80)
    # equal priorities: vLLM's priority rule falls back to the latest arrival, FCFS's choice
    same = preemption_table(simulate(wl, {"policy": "priority"}))
    assert same["victim"].tolist() == fcfs["victim"].tolist()


def test_no_preemptions_gives_an_empty_table():
    tr = simulate(scenarios.workload("lesson_preemption"), {"num_gpu_blocks": 200})
    assert preemption_table(tr).empty
    assert wasted_work(tr)["preemptions"] == 0
