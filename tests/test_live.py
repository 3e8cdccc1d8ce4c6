"""sim.live (presets, a Trace from engine snapshots), sim.toytok and sim.calibrate: pure, no torch."""
from __future__ import annotations

import numpy as np
import pytest

from sim import toytok
from sim.calibrate import calibrate, compare_with_simulator, replay_workload, step_samples
from sim.cost import CalibratedCost
from sim.live import LIVE_PRESETS, LiveRun, preset_requests, throughput
from sim.simulate import simulate
from sim.workload import MIN_TOKEN_ID, VOCAB_SIZE, Request, Workload

TRUE_COST = CalibratedCost(per_token=0.5, per_context_token=0.01, per_step=12.0)


def measured_like(n=10, seed=3, prefix=False) -> tuple[Workload, object]:
    """A 'measured' run: the simulator with a known linear cost in ms and timed arrivals."""
    rng = np.random.default_rng(seed)
    reqs = [Request(f"q{i}", int(rng.integers(8, 80)), int(rng.integers(4, 20)), arrival_time=float(40 * i),
                    tenant="A" if i % 3 else "B", prompt_seed=7 if prefix and i % 2 else None) for i in range(n)]
    wl = Workload(reqs, {"num_gpu_blocks": 64, "block_size": 8, "max_num_batched_tokens": 48, "max_num_seqs": 4,
                         "enable_prefix_caching": prefix})
    return wl, simulate(wl, cost=TRUE_COST)


# -- presets ----------------------------------------------------------------------------------

@pytest.mark.parametrize("key", list(LIVE_PRESETS))
def test_presets_are_timed_seeded_and_fit_the_default_pool(key):
    a = preset_requests(key, seed=4, batch=2, start_ms=1000.0)
    assert a == preset_requests(key, seed=4, batch=2, start_ms=1000.0)  # deterministic
    assert len({r.id for r in a}) == len(a) and all(r.id.startswith(f"{LIVE_PRESETS[key].tag}2-") for r in a)
    assert all(r.arrival_time >= 1000.0 for r in a)
    assert [r.arrival_time for r in a] == sorted(r.arrival_time for r in a) or key == "two_tenants"
    # the page's default pool: 63 usable blocks of 16 tokens
    assert max(-(-(r.prompt_len + r.max_tokens) // 16) for r in a) <= 63
    assert set(preset_requests(key, batch=1, start_ms=0)[0].id.split("-")) != set(a[0].id.split("-"))


def test_preset_shapes():
    assert len({r.tenant for r in preset_requests("two_tenants")}) == 2
    assert max(r.prompt_len for r in preset_requests("long_prompt")) == 768
    times = [r.arrival_time for r in preset_requests("poisson")]
    assert times[-1] > times[0] and len(set(times)) > 10
    assert len({r.prompt_seed for r in preset_requests("burst")}) == 3  # three shared-prefix groups


# -- toy tokenizer ----------------------------------------------------------------------------

def test_toytok_round_trip_and_stable_hashing():
    ids = [0, 1, 79, 80, 4242, VOCAB_SIZE - 1, 12345]
    text = toytok.decode(ids)
    assert toytok.encode(text) == ids
    assert toytok.id_to_word(4242) == "pobi"  # 4242 = 53 * 80 + 2
    enc = toytok.encode("Hello, world! hello")
    assert len(enc) == 5 and enc[0] == enc[4]  # case-folded words hash alike
    assert all(MIN_TOKEN_ID <= t < VOCAB_SIZE for t in enc)
    assert toytok.word_to_id("baba") is None  # not canonical (a leading zero syllable)
    with pytest.raises(ValueError):
        toytok.id_to_word(-1)


# -- a Trace from snapshots -------------------------------------------------------------------

def _step(n, entries, slots, sampled, kv, preempted=(), finished=(), admitted=(), running=1, waiting=0):
    return {"step": n, "start": 10.0 * (n - 1), "end": 10.0 * n - 1, "entries": entries, "slots": slots,
            "sampled": sampled, "kv": kv, "preempted": list(preempted), "finished": list(finished),
            "admitted": list(admitted), "num_tokens": sum(e[2] for e in entries), "running": running,
            "waiting": waiting, "free_blocks": 5,
            "phases": {"t_schedule": 0.1, "t_prepare": 0.5, "t_forward": 8.0, "t_sample": 0.3, "t_update": 0.1}}


class FakeService:
    def __init__(self, run, steps, requests):
        self.run, self.steps, self.requests, self.calls = run, steps, requests, []

    def snapshot(self, since=0):
        self.calls.append(since)
        return {"run": self.run, "running": True, "driver": "me", "error": None, "num_steps": len(self.steps),
                "info": {"num_blocks": 8, "block_size": 4, "scheduler": {"max_num_batched_tokens": 16}},
                "steps": [dict(s) for s in self.steps[since:]], "requests": self.requests}


def _req(prompt, max_tokens, generated, status="running"):
    return {"status": status, "prompt_len": prompt, "max_tokens": max_tokens, "tenant": "default",
            "generated": generated, "arrival_ms": 0.0, "first_token_ms": 9.0 if generated else None,
            "finish_ms": None, "preemptions": 0, "finish_reason": None}


def test_live_run_builds_a_trace_and_fetches_only_new_steps():
    steps = [_step(1, [("a", "prefill", 6, 0), ("b", "prefill", 4, 0)], [0, 1], {"a": 11, "b": 12},
                   [(1, "a", "acquire"), (2, "a", "acquire"), (3, "b", "acquire")], admitted=["a", "b"], running=2),
             _step(2, [("a", "decode", 1, 6)], [0], {"a": 13}, [(3, "b", "release")], preempted=["b"],
                   waiting=1)]
    svc = FakeService(1, steps[:1], {"a": _req(6, 3, [11]), "b": _req(4, 3, [12])})
    live = LiveRun()
    assert live.update(svc.snapshot) == 1 and live.run == 1
    svc.steps = steps
    svc.requests = {"a": _req(6, 3, [11, 13]), "b": dict(_req(4, 3, [12]), status="preempted", preemptions=1)}
    assert live.update(svc.snapshot) == 1
    assert svc.calls[-1] == 1  # only the step it had not seen
    tr = live.trace()
    assert tr.source == "engine" and tr.time_unit == "ms" and tr.num_steps == 2
    assert tr.batch[["step", "request", "slot", "kind", "tokens"]].values.tolist() == [
        [1, "a", 0, "prefill", 6], [1, "b", 1, "prefill", 4], [2, "a", 0, "decode", 1]]
    assert tr.steps["prefill_tokens"].tolist() == [10, 0] and tr.steps["decode_tokens"].tolist() == [0, 1]
    assert tr.steps["t_forward"].tolist() == [8.0, 8.0]
    count, _cached, holders = tr.block_map(2)
    assert holders[1] == ["a"] and holders[3] == [] and count.sum() == 2
    assert (tr.events["kind"] == "preempt").sum() == 1
    assert live.trace(last_steps=1).steps["step"].tolist() == [2]
    assert live.trace(last_steps=1).kv.shape[0] == 4  # the KV log stays whole
    s = live.stats()
    assert s["steps"] == 2 and s["preemptions"] == 1 and s["generated"] == 3 and s["waiting"] == 1
    assert s["tokens_per_s"] == pytest.approx(1000 * 3 / 19)
    rows = live.text_rows(toytok.decode)
    assert rows["tokens"].tolist() == ["2 / 3", "1 / 3"]
    assert toytok.encode(rows["text"][0]) == [11, 13]
    assert not live.all_done()
    # a new run starts over from step 0
    svc.run, svc.steps = 2, steps[:1]
    live.update(svc.snapshot)
    assert live.run == 2 and live.num_steps == 1 and svc.calls[-1] == 0


def test_throughput_counts_sampled_tokens_in_a_sliding_window():
    _, tr = measured_like()
    tp = throughput(tr, window_ms=200.0)
    b = tr.batch
    s = tr.steps.set_index("step")
    i = len(tp) // 2
    row = tp.iloc[i]
    t_end = row["end"]
    in_win = s.index[(s["end"] > t_end - 200.0) & (s["end"] <= t_end)]
    n = int(b[b["sampled"] & b["step"].isin(in_win)].shape[0])
    assert row["tokens_per_s"] == pytest.approx(1000 * n / 200.0)


# -- calibration ------------------------------------------------------------------------------

def test_calibration_recovers_a_known_linear_cost():
    _, tr = measured_like()
    cost, used = calibrate(tr)
    assert used.all() and cost.fit_info["outliers"] == 0
    assert cost.per_token == pytest.approx(0.5, rel=1e-6)
    assert cost.per_context_token == pytest.approx(0.01, rel=1e-6)
    assert cost.per_step == pytest.approx(12.0, rel=1e-6)
    samples = step_samples(tr)
    assert (samples["measured"] > 0).all() and (samples["num_tokens"] > 0).all()


def test_robust_fit_leaves_out_a_step_slowed_from_outside():
    _, tr = measured_like(n=14)
    s = tr.steps
    k = len(s) // 2
    s.loc[k, "end"] = s.loc[k, "end"] + 500.0  # one step stalled (another thread held the core)
    cost, used = calibrate(tr)
    assert cost.fit_info["outliers"] == 1 and not used[np.flatnonzero(step_samples(tr)["step"] == s.loc[k, "step"])[0]]
    assert cost.per_token == pytest.approx(0.5, rel=1e-6) and cost.per_step == pytest.approx(12.0, rel=1e-6)
    plain, _ = calibrate(tr, trim=0)
    assert plain.fit_info["r2"] < 0.5  # without trimming, the stall pulls the constants


def test_compare_with_simulator_reproduces_a_run_the_model_explains():
    wl, tr = measured_like(prefix=True)
    cmp = compare_with_simulator(tr, wl.requests)
    fit = cmp.fit_summary()
    assert fit["r2"] == pytest.approx(1.0) and fit["median_rel_error"] == pytest.approx(0.0, abs=1e-9)
    assert len(cmp.ttft) == len(wl.requests)
    assert np.allclose(cmp.ttft["measured"], cmp.ttft["simulated"])
    assert np.allclose(cmp.steps["measured"], cmp.steps["predicted"])
    m = cmp.metrics.set_index("metric")
    assert m.loc["Mean TTFT (ms)", "simulated / measured"] == pytest.approx(1.0)
    assert m.loc["Tokens / s", "measured"] == pytest.approx(1000 * len(tr.batch[tr.batch["sampled"]])
                                                              / (tr.steps["end"].max() - tr.steps["start"].min()))
    assert cmp.sim_trace.source == "simulator"


def test_replay_workload_keeps_arrivals_prompts_and_stops():
    wl, tr = measured_like(prefix=True)
    r = tr.requests
    r["finish_reason"] = r["finish_reason"].cat.add_categories(["stop"])
    r.loc[0, "finish_reason"] = "stop"  # as if the engine had met an end-of-sequence token early
    r.loc[0, "output_tokens"] = 2
    rep = replay_workload(tr, wl.requests)
    by = {q.id: q for q in rep.requests}
    assert by["q0"].max_tokens == 2 and by["q1"].max_tokens == wl.requests[1].max_tokens
    assert by["q1"].prompt_tokens() == wl.requests[1].prompt_tokens()  # same prompt ids: same prefix hits
    assert [q.arrival_time for q in rep.requests] == sorted(r["arrival_time"])
    assert rep.config["enable_prefix_caching"] is True and rep.config["scheduler"] == "vllm"
    bare = replay_workload(tr)  # without the requests: lengths only
    assert {q.id for q in bare.requests} == set(by) and all(q.prompt_seed is None for q in bare.requests)


def test_too_short_a_run_says_so():
    tr = simulate(Workload([Request("x", 4, 1, arrival_time=0.0)]), cost=TRUE_COST)
    with pytest.raises(ValueError, match="at least 3"):
        calibrate(tr)
