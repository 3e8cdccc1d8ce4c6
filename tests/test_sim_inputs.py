"""User inputs the core checks: uploaded workloads, config validation, cost presets."""
from __future__ import annotations

import json

import pytest

from sim import scenarios
from sim.cost import COST_PRESETS, RooflineCost, UnitsCost, cost_from_preset
from sim.inputs import parse_workload
from sim.scheduler import CONFIG_BOUNDS, SchedulerConfig

ONE = {"id": "x", "prompt_len": 4, "max_tokens": 2}


def doc(config=None, requests=(ONE,)) -> bytes:
    return json.dumps({"config": config or {}, "requests": list(requests)}).encode()


def test_parse_a_scenario_file_round_trips():
    wl = scenarios.workload("prefix_sharing")
    back = parse_workload(wl.dumps().encode(), "p.json")
    assert back.name == "p.json" and back.to_json() == wl.to_json()


@pytest.mark.parametrize("data,message", [
    (b"\x00\xff\xfe", "not UTF-8"),
    (b"{not json", "not valid JSON"),
    (b"[1, 2]", "'requests' list"),
    (b'{"requests": [{"id": "x"}]}', "request x has no prompt_len"),
    (b'{"requests": []}', "no requests"),
    (doc({"scheduler": "magic"}), "unknown scheduler 'magic'"),
    (doc({"bogus": 1}), "unknown config keys: bogus"),
    (doc({"policy": "nope"}), "unknown policy"),
    (doc({"preemption_mode": "drop"}), "recompute or swap"),
    (doc({"max_num_seqs": 0}), "max_num_seqs must be a whole number from 1"),
    (doc({"block_size": "big"}), "block_size must be a whole number"),
    (doc({"num_gpu_blocks": True}), "num_gpu_blocks must be a whole number"),
    (doc({"enable_prefix_caching": "yes"}), "true or false"),
    (doc(requests=[ONE, ONE]), "duplicate request ids"),
    (doc(requests=[{**ONE, "prompt_len": 0}]), "prompt_len of request x is 0; token counts must be whole numbers from 1"),
])
def test_parse_rejects_with_a_plain_message(data, message):
    with pytest.raises(ValueError, match=message):
        parse_workload(data, "bad.json")


def test_parse_accepts_every_scheduler_and_policy():
    for sched in ("vllm", "static", "llama_slots"):
        assert parse_workload(doc({"scheduler": sched}), "s").config["scheduler"] == sched
    assert parse_workload(doc({"policy": "vtc", "preemption_mode": "swap"}), "s").config["policy"] == "vtc"


def test_validate_bounds_are_inclusive():
    for name, (lo, hi) in CONFIG_BOUNDS.items():
        SchedulerConfig(**{name: lo}).validate()
        SchedulerConfig(**{name: hi}).validate()
        with pytest.raises(ValueError, match=name):
            SchedulerConfig(**{name: hi + 1}).validate()
    assert SchedulerConfig().validate() == SchedulerConfig()


def test_cost_presets_build_their_models():
    assert isinstance(cost_from_preset("units"), UnitsCost)
    for key, preset in COST_PRESETS.items():
        model = cost_from_preset(key)
        assert preset.label and model.step_time(64, [64]) > 0
        if key != "units":
            assert isinstance(model, RooflineCost) and model.time_unit == "ms"
    assert cost_from_preset("rtx4090-8B").describe()["hardware"]["name"] == "RTX 4090"
    with pytest.raises(ValueError, match="unknown cost preset 'tpu'"):
        cost_from_preset("tpu")
    # every scenario names a preset that exists
    assert {sc.cost for sc in scenarios.SCENARIOS.values()} <= set(COST_PRESETS)


@pytest.mark.parametrize("config, start", [
    ({"long_prefill_token_threshold": 1_000_000},
     "max_model_len (1,000,000 tokens: raised to the long-prefill threshold; "
     "the longest request needs 14) needs 250,000 blocks"),
    ({"num_gpu_blocks": 2}, "the longest request (14 tokens) needs 4 blocks of 4, more than the 1 usable"),
    ({"max_model_len": 5000, "num_gpu_blocks": 5}, "max_model_len (5,000 tokens) needs 1,250 blocks"),
])
def test_a_kv_pool_too_small_says_what_does_not_fit(config, start):
    from sim.simulate import simulate
    with pytest.raises(ValueError) as e:
        simulate(scenarios.workload("lesson_abc"), config)
    assert str(e.value).startswith(start) and str(e.value).endswith("vLLM would not start")
    assert len(str(e.value)) <= 200, str(e.value)   # one short line
