"""Built-in scenarios: they build, run fast, and the ones rebuilt from the vLLM conformance
generator equal the traced workloads."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from sim import scenarios
from sim.metrics import summary
from sim.simulate import simulate

FIX = Path(__file__).resolve().parent / "fixtures" / "vllm"


@pytest.mark.parametrize("key,case", [
    ("lesson_abc", "lesson_abc_8blocks"),
    ("preemption_pressure", "preempt_fcfs"),
    ("prefix_sharing", "prefix_cache_on"),
    ("random_500", "random_fcfs_500"),
])
def test_rebuilt_cases_equal_the_traced_workloads(key, case):
    assert scenarios.workload(key).to_json() == json.loads((FIX / f"{case}.workload.json").read_text())


@pytest.mark.parametrize("key", list(scenarios.SCENARIOS))
def test_every_scenario_runs(key):
    sc = scenarios.get(key)
    assert sc.title and sc.blurb
    wl = sc.workload()
    assert wl.name == key and wl.requests
    tr = simulate(wl)
    assert tr.requests["finish_step"].notna().all()


def test_default_scenario_is_quick_and_shows_a_preemption():
    wl = scenarios.workload(scenarios.DEFAULT_SCENARIO)
    t0 = time.perf_counter()
    tr = simulate(wl)
    assert time.perf_counter() - t0 < 0.5
    assert summary(tr)["preemptions"] >= 1


def test_long_prompt_reproduces_lesson_example_4_when_unchunked():
    wl = scenarios.workload("long_prompt")
    chunked = summary(simulate(wl))["itl_worst"]
    whole = summary(simulate(wl, {"max_num_batched_tokens": 4096}))["itl_worst"]
    assert whole == pytest.approx(80.08)  # the lesson's worst decoder gap with no chunking
    assert chunked < 11


@pytest.mark.parametrize("overrides,b_finish", [
    ({"policy": "fcfs"}, [40, 40]),
    ({}, [20, 20]),  # round-robin, the scenario's own policy
    ({"tenant_cap": 3}, [11, 20]),
])
def test_two_tenants_reproduces_lesson_example_9(overrides, b_finish):
    tr = simulate(scenarios.workload("two_tenants"), overrides)
    r = tr.requests.set_index("request")
    assert [int(r.loc["B0", "finish_step"]), int(r.loc["B1", "finish_step"])] == b_finish


def test_unknown_scenario_names_the_known_ones():
    with pytest.raises(KeyError, match="lesson_abc"):
        scenarios.get("nope")
