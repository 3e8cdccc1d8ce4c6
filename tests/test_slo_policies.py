"""The SLO-minded policies (sim/slo_policies.py), each on a scenario where it decides, and their
config keys: validated, and off by default (today's traces unchanged)."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.cost import UnitsCost, cost_from_preset
from sim.metrics import per_request, summary
from sim.policies import POLICIES
from sim.scheduler import SchedulerConfig, Seq, VllmScheduler
from sim.simulate import simulate
from sim.slo import SLO, slo_summary, slo_table
from sim.slo_policies import predicted_length, predicted_ttft
from sim.workload import Request, Workload, generate, merged
from test_properties import scenarios


def first_start(tr) -> dict:
    return tr.requests.set_index("request")["first_scheduled_step"].astype(int).to_dict()


def order(tr) -> list[str]:
    s = first_start(tr)
    return sorted(s, key=lambda r: (s[r], r))


def digest(tr, tmp_path) -> str:
    p = tmp_path / "t.trace"
    tr.save(str(p))
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_registered():
    assert {"edf", "sjf_predicted", "short_long"} <= set(POLICIES)


# -- earliest deadline first ---------------------------------------------------------------

def test_edf_serves_the_earliest_ttft_deadline_first():
    # one request at a time; the batch tenant's deadline is far, the chat tenant's near
    reqs = [Request("A", 1, 5, tenant="batch"), Request("B", 1, 5, tenant="batch"),
            Request("C", 1, 5, tenant="chat", arrival_step=1), Request("D", 1, 5, tenant="chat", arrival_step=2)]
    slo = {"ttft": 1000, "tenants": {"chat": {"ttft": 60}}}
    cfg = {"max_num_seqs": 1, "slo": slo}
    assert order(simulate(Workload(reqs, config=dict(cfg, policy="fcfs")))) == ["A", "B", "C", "D"]
    edf = simulate(Workload(reqs, config=dict(cfg, policy="edf")))
    assert order(edf) == ["A", "C", "D", "B"]  # A was alone; then C (deadline 10 + 60), D (20 + 60), B (0 + 1000)
    # 5 steps of 10 each: C's first token at 60 (in time); under FCFS at 110 (late)
    fcfs = simulate(Workload(reqs, config=dict(cfg, policy="fcfs")))
    assert slo_summary(edf, SLO.parse(slo))["slo_attainment"] == 3 / 4
    assert slo_summary(fcfs, SLO.parse(slo))["slo_attainment"] == 2 / 4


def test_edf_deadline_is_arrival_plus_target():
    # a late arrival with a tight target overtakes an early one with a loose target, not the reverse
    # "first" runs steps 1-20 alone (10 units a step); loose joins at 10, tight at 50
    reqs = [Request("first", 1, 20, priority=2), Request("loose", 1, 3, priority=1, arrival_step=1),
            Request("tight", 1, 3, priority=0, arrival_step=5)]
    slo = {"priorities": {"1": {"ttft": 500}, "0": {"ttft": 100}}}
    tr = simulate(Workload(reqs, config={"max_num_seqs": 1, "policy": "edf", "slo": slo}))
    assert order(tr) == ["first", "tight", "loose"]  # 50 + 100 before 10 + 500
    slo["priorities"]["0"]["ttft"] = 600  # now its deadline (50 + 600) is later than loose's (10 + 500)
    tr = simulate(Workload(reqs, config={"max_num_seqs": 1, "policy": "edf", "slo": slo}))
    assert order(tr) == ["first", "loose", "tight"]


def test_edf_without_targets_is_fcfs(tmp_path):
    wl = generate(30, seed=2, arrival="poisson", rate=0.5, prompt=80, output={"dist": "uniform", "low": 1, "high": 30},
                  config={"max_num_seqs": 3})
    a, b = simulate(wl, {"policy": "fcfs"}), simulate(wl, {"policy": "edf"})
    assert order(a) == order(b)
    assert a.steps.equals(b.steps) and a.batch.equals(b.batch)


# -- admission -------------------------------------------------------------------------------

def burst(n=8):
    """n 500-token prompts at once, one output token, a 500-token budget: one request per step,
    each step 10 units, so request i's first token comes at 10 (i + 1)."""
    return Workload([Request(f"q{i}", 500, 1) for i in range(n)], config={"max_num_batched_tokens": 500})


def test_predicted_ttft_is_exact_on_a_burst():
    wl = burst()
    sched = VllmScheduler(SchedulerConfig.from_dict(wl.config), 501)
    predicted = []
    for i, r in enumerate(wl.requests):  # priced as it arrives, before it joins the queue
        predicted.append(predicted_ttft(sched, Seq(r, i, 0, False), UnitsCost()))
        sched.add_request(r)
    actual = per_request(simulate(wl))["ttft"].tolist()
    assert predicted == [10.0 * (i + 1) for i in range(8)] == actual


def test_admission_rejects_exactly_the_hopeless():
    wl = burst()
    slo = SLO(ttft=35)
    off = slo_table(simulate(wl), slo)
    on = simulate(wl, {"slo": {"ttft": 35}, "slo_admission": "reject"})
    tab = slo_table(on, slo)
    # exactly those whose TTFT would have been over 35 (q3.. at 40, 50, ...), none of those within it
    assert tab["rejected"].tolist() == (~off["met_ttft"]).tolist() == [False] * 3 + [True] * 5
    assert tab.loc[~tab["rejected"], "met"].all()
    ev = on.events[on.events["kind"] == "reject"]
    assert set(ev["detail"]) == {"TTFT target cannot be met"} and len(ev) == 5


def overload():
    return generate(200, seed=7, arrival="poisson", rate=1.5, prompt={"dist": "uniform", "low": 200, "high": 600},
                    output=8, config={"max_num_batched_tokens": 512})


def test_admission_raises_attainment_under_overload():
    wl, slo = overload(), SLO(ttft=60)
    base = slo_summary(simulate(wl), slo)
    cfg = {"slo": slo.to_json()}
    rejecting = simulate(wl, dict(cfg, slo_admission="reject"))
    s = slo_summary(rejecting, slo)
    tab = slo_table(rejecting, slo)
    assert tab["rejected"].sum() > 0
    assert tab.loc[~tab["rejected"], "met"].all()  # every admitted request meets its target
    assert s["slo_attainment"] > base["slo_attainment"] + 0.3  # counting the rejected ones as misses
    assert s["goodput"] > 2 * base["goodput"]


def test_defer_serves_the_hopeless_last_and_rejects_none():
    wl, slo = overload(), SLO(ttft=60)
    tr = simulate(wl, {"slo": slo.to_json(), "slo_admission": "defer"})
    tab = slo_table(tr, slo).set_index("request")
    deferred = set(tr.events.loc[tr.events["kind"] == "defer", "request"])
    assert deferred and not tab["rejected"].any() and tab["finished"].all()
    others = tab.drop(index=list(deferred))
    assert others["met"].all()
    assert slo_summary(tr, slo)["slo_attainment"] > slo_summary(simulate(wl), slo)["slo_attainment"]
    # they were deferred because their TTFT was out of reach: served last, they miss it
    assert not tab.loc[list(deferred), "met_ttft"].any()


def test_admission_needs_a_ttft_target_and_a_known_mode():
    with pytest.raises(ValueError, match="needs a ttft target"):
        SchedulerConfig(slo_admission="reject").validate()
    with pytest.raises(ValueError, match="slo_admission must be one of off, reject, defer"):
        SchedulerConfig(slo={"ttft": 5}, slo_admission="maybe").validate()
    SchedulerConfig(slo={"tenants": {"a": {"ttft": 5}}}, slo_admission="defer").validate()


# -- short and long prompts apart ------------------------------------------------------------

def flood():
    longs = generate(30, seed=1, arrival="fixed", every=4, prompt=4000, output=20, id_prefix="L").requests
    shorts = generate(60, seed=2, arrival="fixed", every=2, prompt=50, output=20, id_prefix="s").requests
    return Workload(merged(longs, shorts), config={"max_num_batched_tokens": 2048})


def short_ttft(tr) -> tuple[float, float]:
    pr = per_request(tr)
    s = pr["request"].str.startswith("s")
    return float(pr.loc[s, "ttft"].mean()), float(np.percentile(pr.loc[s, "ttft"], 99))


def test_short_long_keeps_short_ttft_low_under_a_long_prompt_flood():
    wl = flood()
    fcfs = short_ttft(simulate(wl, {"policy": "fcfs"}))
    split = short_ttft(simulate(wl, {"policy": "short_long"}))
    half = short_ttft(simulate(wl, {"policy": "short_long", "short_budget_share": 0.5}))
    assert split[0] < 0.6 * fcfs[0] and split[1] < 0.6 * fcfs[1]
    assert half[1] <= split[1]  # a bigger share, a shorter tail for the short class


def test_short_long_reserves_the_share_only_while_short_work_exists():
    cfg = SchedulerConfig(max_num_batched_tokens=2048, policy="short_long", short_budget_share=0.25)
    sched = VllmScheduler(cfg, 9000)
    sched.add_request(Request("long", 8000, 2))
    plan = sched.schedule()
    assert [(e.seq.id, e.tokens) for e in plan.entries] == [("long", 2048)]  # no short work: the whole budget
    sched.update(plan)
    sched.add_request(Request("short", 50, 2))
    plan = sched.schedule()
    assert [(e.seq.id, e.tokens) for e in plan.entries] == [("long", 2048 - 512), ("short", 50)]
    # the same under FCFS: the running long prompt takes the whole budget and the short one waits
    fc = VllmScheduler(SchedulerConfig(max_num_batched_tokens=2048), 9000)
    fc.add_request(Request("long", 8000, 2))
    fc.update(fc.schedule())
    fc.add_request(Request("short", 50, 2))
    assert [(e.seq.id, e.tokens) for e in fc.schedule().entries] == [("long", 2048)]


def test_short_long_validates_its_settings():
    with pytest.raises(ValueError, match="short_budget_share must be a number from 0 to 0.95"):
        SchedulerConfig(short_budget_share=1.0).validate()
    with pytest.raises(ValueError, match="short_prompt_threshold"):
        SchedulerConfig(short_prompt_threshold=0).validate()


# -- shortest job first on a predicted length ----------------------------------------------

def sjf_load():
    return generate(200, seed=3, arrival="poisson", rate=0.08, prompt=64,
                    output={"dist": "lognormal", "median": 60, "sigma": 1.0, "max": 1000}, config={"max_num_seqs": 4})


def test_sjf_with_a_perfect_predictor_is_oracle_sjf(tmp_path):
    wl = sjf_load()
    oracle = simulate(wl, {"policy": "sjf"})
    predicted = simulate(wl, {"policy": "sjf_predicted", "sjf_error_sigma": 0.0, "predictor_seed": 5})
    assert order(oracle) == order(predicted)
    assert oracle.steps.equals(predicted.steps) and oracle.batch.equals(predicted.batch)


def test_sjf_gain_shrinks_as_the_predictor_gets_worse():
    wl = sjf_load()
    fcfs = summary(simulate(wl, {"policy": "fcfs"}))["e2e_mean"]
    oracle = summary(simulate(wl, {"policy": "sjf"}))["e2e_mean"]

    def gain(sigma):  # the share of oracle SJF's gain over FCFS that survives, over 3 predictor seeds
        runs = [summary(simulate(wl, {"policy": "sjf_predicted", "sjf_error_sigma": sigma, "predictor_seed": k}))
                for k in range(3)]
        return float(np.mean([(fcfs - r["e2e_mean"]) / (fcfs - oracle) for r in runs]))

    g = [gain(s) for s in (0.0, 0.5, 2.0, 8.0)]
    assert g[0] == pytest.approx(1.0)
    assert g[0] > g[1] > g[2] > g[3]
    assert g[3] < 0.35  # a predictor that is noise keeps little of the gain: close to FCFS


def test_predictions_are_seeded_per_request(tmp_path):
    assert predicted_length("r1", 100, 0.0, 3) == 100.0
    a = predicted_length("r1", 100, 1.0, 3)
    assert a == predicted_length("r1", 100, 1.0, 3) != predicted_length("r1", 100, 1.0, 4)
    assert a != predicted_length("r2", 100, 1.0, 3)
    wl = sjf_load()
    cfg = {"policy": "sjf_predicted", "sjf_error_sigma": 1.0, "predictor_seed": 1}
    assert digest(simulate(wl, cfg), tmp_path) == digest(simulate(wl, cfg), tmp_path)
    assert order(simulate(wl, cfg)) != order(simulate(wl, dict(cfg, predictor_seed=2)))
    with pytest.raises(ValueError, match="sjf_error_sigma"):
        SchedulerConfig(sjf_error_sigma=-1).validate()


# -- defaults: today's behaviour, today's bytes ----------------------------------------------

def test_defaults_leave_configs_and_traces_as_they_were():
    d = SchedulerConfig().to_dict()
    assert not {"slo", "slo_admission", "sjf_error_sigma", "predictor_seed", "short_prompt_threshold",
                "short_budget_share"} & set(d)
    c = SchedulerConfig.from_dict({"policy": "edf", "slo": {"ttft": 5}, "slo_admission": "reject"})
    assert c.to_dict()["slo"] == {"ttft": 5} and SchedulerConfig.from_dict(c.to_dict()) == c
    assert c.validate() is c
    with pytest.raises(ValueError, match="config slo: SLO ttft must be a positive"):
        SchedulerConfig(slo={"ttft": -5}).validate()
    tr = simulate(burst(), {"slo": {"ttft": 35}})  # targets alone change no decision under fcfs
    base = simulate(burst())
    assert tr.steps.equals(base.steps) and tr.batch.equals(base.batch) and tr.events.equals(base.events)


# -- properties: random workloads with the SLO options on -------------------------------------

@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.sampled_from(["off", "reject", "defer"]), st.sampled_from([0.0, 0.5, 0.95]),
       st.sampled_from([0.0, 1.5]), st.sampled_from([1.0, 30.0, 1e6]))
def test_slo_options_keep_the_invariants(wl, admission, share, sigma, ttft):
    policy = wl.config["policy"]
    cfg = dict(wl.config, slo={"ttft": ttft}, slo_admission=admission, short_budget_share=share,
               short_prompt_threshold=16, sjf_error_sigma=sigma,
               policy=policy if policy in ("edf", "short_long", "sjf_predicted", "fcfs", "vtc") else "short_long")
    SchedulerConfig.from_dict(cfg).validate()
    a, b = simulate(Workload(wl.requests, config=cfg)), simulate(Workload(wl.requests, config=cfg))
    assert a.to_bytes() == b.to_bytes()
    assert (a.steps["num_tokens"] <= cfg["max_num_batched_tokens"]).all()
    req = a.requests.set_index("request")
    for r in wl.requests:
        if req.loc[r.id, "rejected"]:
            assert admission == "reject" or cfg["max_queued_requests"] or cfg["max_queued_tokens"]
        else:
            assert int(req.loc[r.id, "output_tokens"]) == r.max_tokens


def test_admission_on_a_timed_roofline_run():
    # milliseconds: arrivals every 150 ms on average, prompts of 500-3,000 tokens, an RTX 4090 8B cost
    base = generate(150, seed=4, arrival="poisson", rate=1, prompt={"dist": "uniform", "low": 500, "high": 3000},
                    output=30, config={"max_num_batched_tokens": 4096})
    wl = Workload([Request(r.id, r.prompt_len, r.max_tokens, arrival_time=150.0 * r.arrival_step)
                   for r in base.requests], base.config)
    cost, slo = cost_from_preset("rtx4090-8B"), SLO(ttft=2000)
    off = simulate(wl, cost=cost)
    on = simulate(wl, {"slo": slo.to_json(), "slo_admission": "reject"}, cost=cost)
    assert on.time_unit == "ms"
    tab = slo_table(on, slo)
    assert 0 < tab["rejected"].sum() < 0.2 * len(tab)
    # an estimate (context growth and KV are not priced): nearly every admitted request is in time
    assert tab.loc[~tab["rejected"], "met"].mean() > 0.97 > slo_table(off, slo)["met"].mean() + 0.3
    assert slo_summary(on, slo)["goodput"] > 1.5 * slo_summary(off, slo)["goodput"]
