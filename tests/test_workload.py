import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from sim.workload import Request, Workload, generate, lengths, output_token

FIX = Path(__file__).resolve().parent / "fixtures" / "vllm"


def oracle():
    spec = importlib.util.spec_from_file_location("vllm_trace", FIX / "vllm_trace.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # imports no vLLM at module level
    return mod


def test_token_ids_match_the_oracle_harness():
    o = oracle()
    wl = json.loads((FIX / "prefix_cache_on.workload.json").read_text())
    for d in wl["requests"][:6]:
        assert Request.from_json(d).prompt_tokens() == o.prompt_tokens(d)
    plain = {"id": "zz", "prompt_len": 17, "max_tokens": 2}
    assert Request.from_json(plain).prompt_tokens() == o.prompt_tokens(plain)
    assert [output_token("r1", i) for i in range(5)] == [o.output_token("r1", i) for i in range(5)]


def test_shared_seed_shares_prefix():
    a = Request("a", 40, 1, prompt_seed=5).prompt_tokens()
    b = Request("b", 64, 1, prompt_seed=5).prompt_tokens()
    assert b[:40] == a
    assert Request("c", 40, 1).prompt_tokens() != a


def test_json_round_trip():
    wl = generate(50, seed=1, arrival="poisson", rate=0.7, tenants={"x": 2, "y": 1}, priorities=[0, 1],
                  shared_prefix_groups=3, config={"max_num_seqs": 8})
    back = Workload.from_json(json.loads(wl.dumps()))
    assert back.to_json() == wl.to_json()


def test_generators_seeded_and_shaped():
    a = generate(500, seed=9, arrival="poisson", rate=2.0, prompt={"dist": "lognormal", "median": 100, "sigma": 0.5},
                 output={"dist": "uniform", "low": 4, "high": 8})
    b = generate(500, seed=9, arrival="poisson", rate=2.0, prompt={"dist": "lognormal", "median": 100, "sigma": 0.5},
                 output={"dist": "uniform", "low": 4, "high": 8})
    assert a.to_json() == b.to_json()
    steps = np.array([r.arrival_step for r in a.requests])
    assert (np.diff(steps) >= 0).all()
    assert 200 <= steps[-1] <= 300  # 500 arrivals at 2 per step
    outs = [r.max_tokens for r in a.requests]
    assert min(outs) >= 4 and max(outs) <= 8
    med = np.median([r.prompt_len for r in a.requests])
    assert 80 <= med <= 120


def test_arrival_kinds_and_mixture():
    rng = np.random.default_rng(0)
    assert list(generate(4, arrival="fixed", every=3).requests[i].arrival_step for i in range(4)) == [0, 3, 6, 9]
    bursts = [r.arrival_step for r in generate(6, arrival="bursts", burst_size=2, burst_every=10).requests]
    assert bursts == [0, 0, 10, 10, 20, 20]
    mix = lengths({"dist": "mixture", "parts": [5, 500], "weights": [3, 1]}, 4000, rng)
    assert set(np.unique(mix)) == {5, 500}
    assert 0.2 < (mix == 500).mean() < 0.3


def test_tenant_weights():
    wl = generate(2000, seed=3, tenants={"big": 3, "small": 1})
    share = np.mean([r.tenant == "big" for r in wl.requests])
    assert 0.72 < share < 0.78


@pytest.mark.parametrize("bad", [
    [], {"requests": "x"}, {"requests": [{"id": "a", "prompt_len": 0, "max_tokens": 1}]},
    {"requests": [{"id": "a", "prompt_len": 2, "max_tokens": 1}, {"id": "a", "prompt_len": 2, "max_tokens": 1}]},
    {"requests": [{"id": "a", "prompt_len": 3, "max_tokens": 1, "prompt_token_ids": [1, 2]}]},
])
def test_bad_workloads_rejected_clearly(bad):
    with pytest.raises(ValueError):
        Workload.from_json(bad)
