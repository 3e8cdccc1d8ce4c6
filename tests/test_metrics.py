import math
from pathlib import Path

import numpy as np
import pytest

from sim.metrics import jain_index, littles_law, per_request, summary, tenant_service
from sim.simulate import simulate
from sim.workload import Request, Workload, generate

CASES = Path(__file__).resolve().parent / "fixtures" / "vllm"


def lesson_trace():
    return simulate(Workload.load(str(CASES / "lesson_abc_8blocks.workload.json")))


def test_ttft_and_gaps_in_units():
    tr = lesson_trace()  # units model: every step here has <= 8 tokens, so costs 10
    pr = per_request(tr).set_index("request")
    assert pr.loc["A", "ttft"] == pytest.approx(20.0)  # first token at the end of step 2
    assert pr.loc["B", "ttft"] == pytest.approx(20.0)
    assert pr.loc["C", "ttft"] == pytest.approx(30.0)
    assert pr.loc["C", "itl_worst"] == pytest.approx(20.0)  # preempted at step 5, token again at 6
    assert pr.loc["A", "itl_mean"] == pytest.approx(10.0)
    assert pr.loc["A", "e2e"] == pytest.approx(50.0)


def test_continuous_batching_slot_utilisation():
    outs = [12, 3, 7, 20, 5, 9, 4, 15]
    reqs = [Request(f"r{i}", 1, n) for i, n in enumerate(outs)]
    tr = simulate(Workload(reqs, config={"max_num_seqs": 4, "num_gpu_blocks": 100}))
    s = summary(tr)
    assert s["busy_steps"] == 27
    assert s["slot_utilization"] == pytest.approx(75 / 108)
    assert s["output_tokens"] == 75


def test_littles_law_consistent():
    wl = generate(400, seed=4, arrival="poisson", rate=0.3, prompt=16, output={"dist": "uniform", "low": 5, "high": 30},
                  config={"max_num_seqs": 16, "num_gpu_blocks": 400})
    ll = littles_law(simulate(wl))
    assert ll["L"] > 0 and ll["W"] > 0
    assert ll["lambda_W"] == pytest.approx(ll["L"], rel=0.02)


def test_jain_index():
    assert jain_index([5, 5, 5]) == pytest.approx(1.0)
    assert jain_index([1, 0, 0, 0]) == pytest.approx(0.25)
    assert math.isnan(jain_index([]))


def test_tenant_service_counts_weights():
    reqs = [Request("a", 10, 3, tenant="x"), Request("b", 4, 2, tenant="y")]
    tr = simulate(Workload(reqs, config={"num_gpu_blocks": 50}))
    svc = tenant_service(tr, w_in=1, w_out=2)
    assert svc["x"].iloc[-1] == 10 + 2 * 3
    assert svc["y"].iloc[-1] == 4 + 2 * 2
    assert (np.diff(svc["x"].to_numpy()) >= 0).all()


def test_tenant_service_is_the_per_step_sum_of_each_tenants_entries():
    tr = simulate(generate(120, seed=4, tenants={"a": 1.0, "b": 2.0, "c": 0.5}, arrival="poisson", rate=1.0))
    svc = tenant_service(tr, w_in=0.5, w_out=1.5)
    tenant_of = dict(zip(tr.requests["request"], tr.requests["tenant"]))
    want = {t: 0.0 for t in "abc"}
    rows = {}
    for e in tr.batch.itertuples():   # entries in step order
        want[tenant_of[e.request]] += (0.5 * e.tokens if e.kind == "prefill" else 0.0) + (1.5 if e.sampled else 0.0)
        rows[e.step] = dict(want)
    assert list(svc.columns) == ["a", "b", "c"] and svc.index.name == "step"
    assert list(svc.index) == tr.steps["step"].tolist()
    for step, row in rows.items():
        assert svc.loc[step].to_dict() == pytest.approx(row)
    # an entry whose request the requests table lacks is left out, not counted under a made-up tenant
    tr.batch["request"] = tr.batch["request"].cat.add_categories(["nobody"])
    tr.batch.loc[0, "request"] = "nobody"
    assert set(tenant_service(tr, 0.5, 1.5).columns) == {"a", "b", "c"}


def test_summary_keys_and_rejections():
    reqs = [Request(f"r{i}", 8, 2) for i in range(6)]
    tr = simulate(Workload(reqs, config={"max_num_seqs": 1, "max_queued_requests": 2, "num_gpu_blocks": 50}))
    s = summary(tr)
    assert s["rejected"] == 4 and s["finished"] == 2 and s["requests"] == 6
    for k in ("ttft_mean", "itl_worst", "throughput", "L", "lambda", "W", "lambda_W", "jain_index",
              "max_service_gap", "preemptions", "recomputed_tokens"):
        assert k in s


def test_static_batching_utilisation_counts_padding_as_waste():
    outs = [12, 3, 7, 20, 5, 9, 4, 15]
    reqs = [Request(f"r{i}", 1, n) for i, n in enumerate(outs)]
    tr = simulate(Workload(reqs, config={"scheduler": "static", "max_num_seqs": 4, "num_gpu_blocks": 100}))
    s = summary(tr)
    assert s["busy_steps"] == 35
    assert s["slot_utilization"] == pytest.approx(75 / 140)
