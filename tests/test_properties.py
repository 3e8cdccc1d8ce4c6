"""Property tests: random workloads and configs, every policy and option."""
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.policies import POLICIES
from sim.scheduler import SchedulerConfig, VllmScheduler
from sim.simulate import max_model_len_for, simulate
from sim.workload import Request, Workload


@st.composite
def scenarios(draw):
    n = draw(st.integers(1, 14))
    block_size = draw(st.sampled_from([1, 2, 4, 8, 16]))
    tenants = ["a", "b", "c"][: draw(st.integers(1, 3))]
    shared = draw(st.booleans())
    reqs = []
    for i in range(n):
        reqs.append(Request(
            id=f"q{i}", prompt_len=draw(st.integers(1, 40)), max_tokens=draw(st.integers(1, 12)),
            arrival_step=draw(st.integers(0, 15)), tenant=draw(st.sampled_from(tenants)),
            priority=draw(st.integers(0, 3)),
            prompt_seed=draw(st.sampled_from([None, 7, 8])) if shared else None))
    threshold = draw(st.sampled_from([0, 0, 3, 16]))
    # vLLM sizes max_model_len to the longest request, raised to the long-prefill threshold,
    # and refuses to start unless that many tokens fit in the usable blocks
    need = max(max(r.prompt_len + r.max_tokens for r in reqs), threshold)
    min_blocks = -(-need // block_size) + 1
    cfg = {
        "num_gpu_blocks": draw(st.integers(min_blocks, min_blocks + 30)),
        "block_size": block_size,
        "max_num_batched_tokens": draw(st.integers(1, 64)),
        "max_num_seqs": draw(st.integers(1, 6)),
        "policy": draw(st.sampled_from(sorted(POLICIES))),
        "enable_prefix_caching": draw(st.booleans()),
        "long_prefill_token_threshold": threshold,
        "scheduler_reserve_full_isl": draw(st.booleans()),
        "preemption_mode": draw(st.sampled_from(["recompute", "swap"])),
        "swap_space_bytes": draw(st.sampled_from([0.0, 1e6, 1e12])),
        "aging": draw(st.sampled_from([0.0, 0.5])),
        "tenant_cap": draw(st.sampled_from([0, 0, 1, 2])),
        "max_queued_requests": draw(st.sampled_from([0, 0, 2, 5])),
        "max_queued_tokens": draw(st.sampled_from([0, 0, 60])),
    }
    return Workload(requests=reqs, config=cfg)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_invariants_every_step(wl):
    cfg = SchedulerConfig.from_dict(wl.config)
    mml = max_model_len_for(wl, cfg)
    sched = VllmScheduler(cfg, mml)
    pending = sorted(wl.requests, key=lambda r: r.arrival_step)
    done, rejected = {}, set()
    step = 0
    while len(done) + len(rejected) < len(wl.requests):
        step += 1
        assert step < 5000, "no progress"
        while pending and pending[0].arrival_step < step:
            seq = sched.add_request(pending.pop(0))
            if seq.status == "rejected":
                rejected.add(seq.id)
        if not sched.has_requests():
            continue
        plan = sched.schedule()
        assert plan.num_tokens <= cfg.max_num_batched_tokens
        assert len(sched.running) <= cfg.max_num_seqs
        assert all(e.tokens > 0 for e in plan.entries)
        ids = [e.seq.id for e in plan.entries]
        assert len(set(ids)) == len(ids)
        assert not set(ids) & {s.id for s in plan.preempted}
        if cfg.tenant_cap:
            for t, c in sched.running_by_tenant.items():
                assert c <= cfg.tenant_cap or c <= 0
        sched.pool.check()
        for seq in sched.running:  # a running request holds exactly the blocks its computed tokens need
            assert len(seq.blocks) == -(-seq.num_computed // cfg.block_size)
        for seq in sched.update(plan):
            done[seq.id] = seq.num_output
        sched.pool.check()
    # nothing leaked: every usable block is free again
    assert sched.pool.num_free == cfg.num_gpu_blocks - 1
    for r in wl.requests:
        if r.id not in rejected:
            assert done[r.id] == r.max_tokens


@settings(max_examples=40, deadline=None)
@given(scenarios())
def test_trace_consistent_and_deterministic(wl):
    a = simulate(wl)
    b = simulate(wl)
    assert a.to_bytes() == b.to_bytes()
    req = a.requests.set_index("request")
    for r in wl.requests:
        if req.loc[r.id, "rejected"]:
            assert a.batch[a.batch["request"] == r.id].empty
        else:
            assert int(req.loc[r.id, "output_tokens"]) == r.max_tokens
            assert int(a.batch[(a.batch["request"] == r.id)]["sampled"].sum()) == r.max_tokens
    s = a.steps
    assert (s["num_tokens"] == s["prefill_tokens"] + s["decode_tokens"] + s["recompute_tokens"]).all()
    sums = a.batch.groupby("step")["tokens"].sum()
    assert (s.set_index("step")["num_tokens"].reindex(sums.index) == sums).all()
    assert (s["end"] >= s["start"]).all()


@settings(max_examples=40, deadline=None)
@given(scenarios(), st.booleans())
def test_llama_slots_invariants(wl, cb):
    cfg = dict(wl.config, scheduler="llama_slots", cont_batching=cb, num_gpu_blocks=2000, block_size=16)
    tr = simulate(Workload(wl.requests, config=cfg))
    n_batch, slots = cfg["max_num_batched_tokens"], cfg["max_num_seqs"]
    assert (tr.steps["num_tokens"] <= n_batch).all()
    assert (tr.batch["slot"] < slots).all()
    assert int(tr.requests["preemptions"].sum()) == 0
    for r in wl.requests:
        got = tr.requests.set_index("request").loc[r.id]
        assert int(got["output_tokens"]) == r.max_tokens
    # decode tokens come before prompt chunks in every batch
    for _, g in tr.batch.groupby("step"):
        kinds = list(g["kind"])
        assert kinds == sorted(kinds, key=lambda k: k != "decode")
