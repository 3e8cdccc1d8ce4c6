"""The pages' memory cap on a run (sim.run_memory, simulate(max_memory=)) and the store that
keeps runs once for every session (ui.runs.RunStore)."""
from __future__ import annotations

import threading
import time

import pytest

from sim.run_memory import run_bytes
from sim.simulate import simulate
from sim.workload import generate


def _wl(n=300, seed=3, caching=False, rate=0.5):
    return generate(n, seed=seed, arrival="poisson", rate=rate,
                    prompt={"dist": "lognormal", "median": 60, "sigma": 0.8, "max": 300},
                    output={"dist": "lognormal", "median": 20, "sigma": 0.8, "max": 100},
                    config={"num_gpu_blocks": 200, "block_size": 16, "max_num_batched_tokens": 256,
                            "max_num_seqs": 16, "enable_prefix_caching": caching})


def test_the_model_adds_each_term():
    base = run_bytes(0, 0, 0, 0)
    assert base == 0
    one = [run_bytes(*v) for v in ((1, 0, 0, 0), (0, 1, 0, 0), (0, 0, 1, 0), (0, 0, 0, 1), (0, 0, 0, 0, 1))]
    assert all(b > 0 for b in one)
    assert run_bytes(1, 1, 1, 1, 1) == sum(one)
    assert run_bytes(10, 20, 30, 40, 50) == 10 * one[0] + 20 * one[1] + 30 * one[2] + 40 * one[3] + 50 * one[4]


@pytest.mark.parametrize("config", [{}, {"async_scheduling": True, "vllm_version": "0.34.0"}])
def test_a_run_past_its_memory_stops_with_a_sentence_and_one_within_runs_unchanged(config):
    wl = _wl(600, rate=0.2)
    tr = simulate(wl, config)
    need = run_bytes(tr.num_steps, len(tr.batch), len(tr.kv), len(wl.requests))
    assert tr.num_steps > 2000   # the cap is looked at every 1,000 steps
    assert simulate(wl, config, max_memory=2 * need).to_bytes() == tr.to_bytes()
    with pytest.raises(RuntimeError, match=r"^after [\d,]+ steps, with [\d,]+ of 600 requests to go, this run already "
                                           r"holds about [\d.]+ GB \([\d,]+ token rows, [\d,]+ KV changes\), more than "
                                           r"the 0\.0 GB this server keeps for one run\. Run fewer requests"):
        simulate(wl, config, max_memory=need // 2)
    assert simulate(wl, config, digest=True, max_memory=1).num_steps == tr.num_steps   # a Digest holds no rows


def test_requests_that_alone_pass_the_cap_are_refused_before_the_run():
    wl = _wl(300, caching=True)
    need = run_bytes(0, 0, 0, 300, sum(r.prompt_len for r in wl.requests))
    with pytest.raises(RuntimeError, match=r"^its 300 requests alone would take about"):
        simulate(wl, max_memory=need - 1)
    # with caching off, the prompts' token ids are not made up front: they do not count
    assert simulate(wl, {"enable_prefix_caching": False}, max_memory=need - 1 + 10**9).num_steps > 0


def test_the_store_makes_a_run_once_for_sessions_asking_at_once():
    from ui.runs import RunStore
    store, calls, got = RunStore(10**9), [], []

    def make():
        calls.append(1)
        time.sleep(0.2)
        return simulate(_wl(50))

    threads = [threading.Thread(target=lambda: got.append(store.get("k", make))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len(got) == 4 and all(g is got[0] for g in got)
    assert store.get("k", make) is got[0] and len(calls) == 1


def test_the_store_keeps_an_error_and_says_it_again_without_running_again():
    from ui.runs import RunStore
    store, calls = RunStore(10**9), []

    def bad():
        calls.append(1)
        raise ValueError("the KV pool is too small")

    for _ in range(3):
        with pytest.raises(ValueError, match="too small"):
            store.get("bad", bad)
    assert len(calls) == 1


def test_the_store_lets_the_least_recently_used_runs_go_past_its_budget():
    from ui.runs import RunStore, trace_bytes
    runs = {k: simulate(_wl(40, seed=i)) for i, k in enumerate("abc")}
    size = max(trace_bytes(t) for t in runs.values())
    store = RunStore(2 * size + size // 2)   # room for two
    for k in "ab":
        store.get(k, lambda k=k: runs[k])
    store.get("a", lambda: pytest.fail("a is kept"))   # a is now the most recently used
    store.get("c", lambda: runs["c"])                    # b goes
    assert list(store.runs) == ["a", "c"]
    tiny = RunStore(1)                                   # the newest stays, even past the budget
    tiny.get("a", lambda: runs["a"])
    tiny.get("b", lambda: runs["b"])
    assert list(tiny.runs) == ["b"]
