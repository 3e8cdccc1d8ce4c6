"""Waiting-queue policies and the options beyond vLLM, each on a scenario where it decides."""
import pytest

from sim.metrics import max_service_gap
from sim.policies import POLICIES, make_policy
from sim.simulate import simulate
from sim.workload import Request, Workload

ROOMY = {"num_gpu_blocks": 400, "block_size": 16, "max_num_batched_tokens": 512}


def first_start(tr):
    return tr.requests.set_index("request")["first_scheduled_step"].astype(int).to_dict()


def one_at_a_time(reqs, policy, **kw):
    return simulate(Workload(reqs, config=dict(ROOMY, max_num_seqs=1, policy=policy, **kw)))


def jobs():
    # (id, arrival, length, priority): one server, so the policy alone picks the order
    spec = [("A", 0, 40, 1), ("B", 1, 5, 0), ("C", 2, 10, 1), ("D", 3, 2, 1), ("E", 4, 20, 0), ("F", 5, 3, 1)]
    return [Request(i, 1, n, arrival_step=a, priority=p) for i, a, n, p in spec]


def order(tr):
    s = first_start(tr)
    return "".join(sorted(s, key=s.get))


def test_registry_names():
    assert {"fcfs", "priority", "spf", "sjf", "priority_aging", "round_robin", "vtc"} <= set(POLICIES)
    with pytest.raises(ValueError, match="unknown policy"):
        make_policy("nope")


def test_fcfs_sjf_priority_orders():
    assert order(one_at_a_time(jobs(), "fcfs")) == "ABCDEF"
    assert order(one_at_a_time(jobs(), "sjf")) == "ADFBCE"
    assert order(one_at_a_time(jobs(), "priority")) == "ABECDF"


def test_spf_by_prompt_length():
    reqs = [Request("first", 1, 30), Request("long", 90, 2, arrival_step=1), Request("short", 5, 2, arrival_step=2)]
    assert order(one_at_a_time(reqs, "spf")) == "firstshortlong"


def starving():
    reqs = [Request("LONG", 1, 30)] + [Request(f"s{t:02d}", 1, 2, arrival_step=2 * t) for t in range(40)]
    return [reqs[1]] + [reqs[0]] + reqs[2:]  # a short job first, so LONG has to wait for a choice


def test_sjf_starves_and_aging_ends_it():
    no_aging = first_start(one_at_a_time(starving(), "sjf"))["LONG"]
    aged = first_start(one_at_a_time(starving(), "sjf", aging=1.0))["LONG"]
    assert no_aging > 75  # waits for the whole stream of short jobs
    assert aged < 40


def test_round_robin_and_tenant_cap():
    reqs = [Request(f"A{i}", 1, 10, tenant="A") for i in range(12)]
    reqs += [Request(f"B{i}", 1, 10, arrival_step=1, tenant="B") for i in range(2)]
    fin = {}
    for name, kw in (("fcfs", {}), ("rr", {"policy": "round_robin"}), ("cap", {"policy": "round_robin", "tenant_cap": 3})):
        tr = simulate(Workload(reqs, config=dict(ROOMY, max_num_seqs=4, **kw)))
        fin[name] = sorted(int(v) for k, v in tr.requests.set_index("request")["finish_step"].items()
                           if k.startswith("B"))
    # the lesson's Example 9 (B arrives at step 1: present from step 2 here)
    assert fin == {"fcfs": [40, 40], "rr": [20, 20], "cap": [11, 20]}


def test_vtc_serves_the_light_tenant_first_and_bounds_the_gap():
    heavy = [Request(f"h{i}", 64, 32, tenant="heavy") for i in range(30)]
    light = [Request(f"l{i}", 16, 8, arrival_step=5 + 10 * i, tenant="light") for i in range(10)]
    cfg = dict(ROOMY, max_num_seqs=4, max_num_batched_tokens=128)
    fcfs = simulate(Workload(heavy + light, config=cfg))
    vtc = simulate(Workload(heavy + light, config=dict(cfg, policy="vtc")))

    def light_wait(tr):
        r = tr.requests[tr.requests["tenant"] == "light"]
        return float((r["first_scheduled_step"].astype(float) - r["arrival_step"].astype(float)).mean())

    assert light_wait(vtc) < light_wait(fcfs) / 3
    assert not vtc.counters.empty and set(vtc.counters["tenant"]) == {"heavy", "light"}
    assert max_service_gap(vtc) < max_service_gap(fcfs)


def test_vtc_lifts_idle_counter():
    q = make_policy("vtc")

    class S:
        def __init__(self, i, t):
            self.id, self.tenant, self.add_seq = i, t, 0
    a = S("a1", "a")
    q.add(a)
    q.counters["a"] = 100.0
    b = S("b1", "b")
    q.add(b)  # b was idle: lifted to a's counter, no banked credit
    assert q.counters["b"] == 100.0


def test_admission_control_rejects():
    reqs = [Request(f"r{i}", 20, 4) for i in range(10)]
    tr = simulate(Workload(reqs, config=dict(ROOMY, max_num_seqs=2, max_queued_requests=3)))
    rej = tr.requests[tr.requests["rejected"]]
    assert len(rej) == 7  # 10 arrive before step 1 at once: 3 fit the queue
    assert set(tr.events[tr.events["kind"] == "reject"]["request"]) == set(rej["request"])
    assert tr.batch[tr.batch["request"].isin(rej["request"])].empty
    tr2 = simulate(Workload(reqs, config=dict(ROOMY, max_num_seqs=2, max_queued_tokens=100)))
    assert int(tr2.requests["rejected"].sum()) == 5


def test_swap_preemption_keeps_computed_tokens():
    reqs = [Request(f"r{i}", 60, 40) for i in range(4)]
    base = {"num_gpu_blocks": 21, "block_size": 16, "max_num_batched_tokens": 256, "max_num_seqs": 4}
    rec = simulate(Workload(reqs, config=base))
    swp = simulate(Workload(reqs, config=dict(base, preemption_mode="swap")))
    assert int(rec.requests["preemptions"].sum()) > 0 and int(swp.requests["preemptions"].sum()) > 0
    assert int(rec.requests["recomputed_tokens"].sum()) > 0
    assert int(swp.requests["recomputed_tokens"].sum()) == 0
    kinds = set(swp.events["kind"])
    assert {"swap_out", "swap_in"} <= kinds
    assert (swp.requests["output_tokens"] == 40).all()
    assert swp.steps["swap_bytes"].sum() > 0
