"""sim/lessons/fairness.py: timelines, backlog, the service gap and VTC's bound, Jain's index, the flood."""
from __future__ import annotations

import math
import random

import numpy as np
import pytest

from sim import scenarios
from sim.lessons import lesson
from sim.lessons.fairness import (POLICY_ORDER, compare_summary, first_divergence, flood_workload, jain_backlogged,
                                  policy_configs, request_segments, service_gap, state_at, tenant_finishes, vtc_bound,
                                  waiting_backlog)
from sim.simulate import simulate
from sim.workload import Request, Workload


def runs_of(wl: Workload, **kw) -> dict:
    return {k: simulate(wl, c) for k, c in policy_configs(**kw).items()}


@pytest.fixture(scope="module")
def two():
    return runs_of(scenarios.workload("two_tenants"))


@pytest.fixture(scope="module")
def flood():
    return runs_of(flood_workload(), cap=6)


def test_policy_configs_are_the_lessons_plus_vtc():
    c = policy_configs(cap=3, w_in=1, w_out=2)
    assert list(c) == list(POLICY_ORDER)
    assert c["cap"] == {"policy": "round_robin", "tenant_cap": 3}
    assert c["vtc"]["vtc_w_in"] == 1.0 and c["vtc"]["vtc_w_out"] == 2.0


def test_finishes_reproduce_lesson_example_9(two):
    printed = {"fcfs": "B1@40 B0@40", "round_robin": "B1@20 B0@20", "cap": "B0@11 B1@20"}
    for k, text in printed.items():
        assert " ".join(f"{r}@{f}" for r, f in tenant_finishes(two[k], "B")) == text
    lesson_runs = lesson.tenant_fairness()
    assert dict(tenant_finishes(two["cap"], "B")) == lesson_runs["round_robin_cap3"]


def test_segments_of_the_capped_run(two):
    seg = request_segments(two["cap"])
    b0 = seg[seg["request"] == "B0"]
    assert b0[["state", "start", "end"]].values.tolist() == [["running", 1, 11]]  # arrives at 1, runs at once
    b1 = seg[seg["request"] == "B1"]
    assert b1[["state", "start", "end"]].values.tolist() == [["waiting", 1, 10], ["running", 10, 20]]
    a3 = seg[seg["request"] == "A3"]  # the cap holds A3 back from step 0
    assert a3[["state", "start", "end"]].values.tolist() == [["waiting", 0, 10], ["running", 10, 20]]
    assert (seg["steps"] == seg["end"] - seg["start"]).all()


def test_segments_show_a_preemption_as_a_gap():
    tr = simulate(scenarios.workload("lesson_abc"))
    c = request_segments(tr)
    c = c[c["request"] == "C"]["state"].tolist()
    assert c == ["waiting", "running", "waiting", "running"]  # C waits, runs, is preempted, resumes


def test_waiting_backlog_is_arrived_not_running(two):
    bl = waiting_backlog(two["fcfs"])
    assert list(bl.columns) == ["A", "B"]
    assert not bl.loc[1, "B"] and bl.loc[2, "B"] and bl.loc[30, "B"] and not bl.loc[31, "B"]
    assert bl.loc[1, "A"] and not bl.loc[31, "A"]  # A's last wave starts in step 31


def test_service_gap_by_hand(two):
    # FCFS: both tenants wait during steps 2..20 and B gets nothing. A: steps 2-10, wave 1's 4
    # requests sample a token each (w_out = 2): 9 x 8; step 11, wave 2's four 8-token prompts
    # (w_in = 1) and first tokens: 32 + 8; steps 12-20: 9 x 8.
    g = service_gap(two["fcfs"])
    assert g["pair"] == ("A", "B") and g["interval"] == (2, 20)
    assert g["gap"] == 9 * 8 + (32 + 8) + 9 * 8 == 184
    assert g["series"].max() == g["gap"] and g["series"].loc[21:].eq(0).all()
    rr = service_gap(two["round_robin"])
    assert rr["gap"] == 72 and rr["interval"] == (2, 10)  # 9 steps of A's 4 decodes


def test_vtc_bound_numbers():
    b = vtc_bound(scenarios.workload("two_tenants"), {})
    assert b == {"L_input": 8, "M": 72, "U": 144.0, "bound": 288.0}  # 4 slots x (8 + 10) tokens
    b = vtc_bound(scenarios.workload("two_tenants"), {"max_num_seqs": 1000}, w_in=1, w_out=2)
    assert b["M"] == 63 * 16  # now the KV cache (block 0 is the null block) is the limit


def test_flood_vtc_within_bound_fcfs_beyond(flood):
    b = vtc_bound(flood_workload(), {})["bound"]
    assert service_gap(flood["vtc"])["gap"] <= b
    assert service_gap(flood["fcfs"])["gap"] > b
    t = compare_summary(flood, b, focus="light").set_index("policy")
    lat = t["focus_mean_latency"]
    assert lat["fcfs"] > 5 * lat["round_robin"] > 5 * lat["vtc"]  # VTC serves the light tenant soonest...
    assert lat["cap"] < lat["vtc"]  # ...except the cap, which keeps slots free for it
    assert t.loc["cap", "last_finish"] > t.loc["vtc", "last_finish"]  # at the price of throughput
    assert t["within_bound"].tolist() == [False, True, True, True]


@pytest.mark.parametrize("seed", range(12))
def test_vtc_gap_stays_within_the_bound_on_random_workloads(seed):
    rng = random.Random(seed)
    reqs = [Request(f"r{i}", rng.randint(1, 120), rng.randint(1, 60), arrival_step=rng.randint(0, 40),
                    tenant=f"t{rng.randrange(3)}") for i in range(rng.randint(10, 40))]
    cfg = {"num_gpu_blocks": rng.choice([60, 200]), "block_size": 16, "max_num_batched_tokens": rng.choice([64, 512]),
           "max_num_seqs": rng.choice([2, 4, 8])}
    wl = Workload(reqs, cfg)
    w_in, w_out = rng.choice([(1.0, 2.0), (1.0, 1.0), (0.5, 4.0)])
    tr = simulate(wl, {"policy": "vtc", "vtc_w_in": w_in, "vtc_w_out": w_out})
    assert service_gap(tr, w_in, w_out)["gap"] <= vtc_bound(wl, {}, w_in, w_out)["bound"]


def test_jain_while_competing(two):
    assert jain_backlogged(two["fcfs"]) == pytest.approx(0.5)  # while both waited, A got everything
    j = jain_backlogged(two["cap"])
    assert 0.5 < j < 1
    single = simulate(scenarios.workload("lesson_abc"))
    assert math.isnan(jain_backlogged(single))


def test_state_at_and_first_divergence(two):
    assert first_divergence(two) == 1  # the cap leaves a slot idle in the first step
    s = state_at(two["vtc"], 11).set_index("tenant")
    assert s.loc["B", "running"] == 2 and s.loc["A", "running"] == 2 and s.loc["A", "finished"] == 4
    assert s.loc["A", "counter"] == 132 and s.loc["B", "counter"] == 60
    f = state_at(two["fcfs"], 11).set_index("tenant")
    assert f.loc["B", "waiting"] == 2 and math.isnan(f.loc["B", "counter"])


def test_flood_workload_is_deterministic_and_fits():
    a, b = flood_workload(), flood_workload()
    assert a.to_json() == b.to_json()
    tenants = [r.tenant for r in a.requests]
    assert tenants.count("flood") == 60 and tenants.count("light") == 12
    steps = [r.arrival_step for r in a.requests if r.tenant == "light"]
    assert steps == list(range(2, 2 + 12 * 6, 6))
    assert np.all(np.diff([r.arrival_step for r in a.requests]) >= 0)
    assert flood_workload(slots=3).config["max_num_seqs"] == 3
    assert scenarios.workload("tenant_flood").to_json() == a.to_json()
