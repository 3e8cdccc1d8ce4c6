"""Unit tests for sim.cost."""

import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from sim.cost import (
    COST_MODELS,
    HARDWARE,
    LINKS,
    MODELS,
    CalibratedCost,
    RooflineCost,
    UnitsCost,
    make_cost_model,
    prefill_ms,
    recompute_ms,
    swap_ms,
    transfer_ms,
)


def test_registry():
    assert {"units", "roofline", "calibrated"} <= set(COST_MODELS)
    assert isinstance(make_cost_model("units"), UnitsCost)
    assert isinstance(make_cost_model("roofline", hardware="h100-sxm", model="70B"), RooflineCost)
    with pytest.raises(KeyError):
        make_cost_model("nope")
    with pytest.raises(KeyError):
        RooflineCost("no-such-gpu")


def test_units_cost_floor_and_slope():
    cost = UnitsCost()
    assert cost.time_unit == "units"
    assert cost.step_time(4, [100] * 4) == 10.0
    assert cost.step_time(500, []) == 10.0
    assert cost.step_time(4004, []) == pytest.approx(80.08)
    assert cost.crossover_tokens == 500
    assert cost.step_time(0, []) == 0.0
    assert UnitsCost(weight_units=2, tokens_per_unit=10).step_time(100, []) == 10.0


def test_presets_are_the_quoted_figures():
    assert HARDWARE["rtx4090"].peak_flops == 165.2e12 and HARDWARE["rtx4090"].bandwidth == 1008e9
    assert HARDWARE["a100-80gb-sxm"].peak_flops == 312e12 and HARDWARE["a100-80gb-sxm"].bandwidth == 2039e9
    assert HARDWARE["h100-sxm"].peak_flops == 989e12 and HARDWARE["h100-sxm"].bandwidth == 3.35e12
    assert HARDWARE["h200"].bandwidth == 4.8e12 and HARDWARE["h200"].memory_bytes == 141e9
    assert MODELS["8B"].kv_bytes_per_token == 131072 and MODELS["8B"].weight_bytes == 8.03e9 * 4.5 / 8
    assert MODELS["70B"].kv_bytes_per_token == 320 * 1024
    assert LINKS["pcie4-x16"].bandwidth == 31.5e9 and LINKS["pcie5-x16"].bandwidth == 63e9


def test_roofline_single_decode_is_memory_bound():
    cost = RooflineCost("rtx4090", "8B")
    assert cost.time_unit == "ms"
    assert cost.bound(1, [4096]) == "memory"
    # weights once plus one KV read, at full bandwidth
    expected = (8.03e9 * 4.5 / 8 + 4096 * 131072) / 1008e9 * 1000
    assert cost.step_time(1, [4096]) == pytest.approx(expected)
    assert cost.flop_utilization(1, [4096]) < 0.05


def test_roofline_large_prefill_is_compute_bound():
    cost = RooflineCost("rtx4090", "8B")
    assert cost.bound(8192, [8192]) == "compute"
    assert cost.step_time(8192, [8192]) == pytest.approx(8192 * 2 * 8.03e9 / 165.2e12 * 1000)
    assert cost.flop_utilization(8192, [8192]) == pytest.approx(1.0)


def test_roofline_crossover_and_kv_not_amortized():
    cost = RooflineCost("h100-sxm", "8B-fp16")
    n = cost.crossover_tokens()
    assert cost.bound(math.floor(n) - 1) == "memory" and cost.bound(math.ceil(n) + 1) == "compute"
    # the weights are shared, each sequence's KV is not: bytes grow linearly with the batch
    one, two = cost.step_bytes(4096), cost.step_bytes(2 * 4096)
    assert two - one == 4096 * 131072
    # numpy context arrays are accepted
    assert cost.step_time(4, np.array([10, 20, 30, 40])) == cost.step_time(4, [10, 20, 30, 40])


def test_roofline_efficiency_scales_time():
    full, half = RooflineCost("a100-80gb-sxm", "8B"), RooflineCost("a100-80gb-sxm", "8B", efficiency=0.5)
    assert half.step_time(1, [1000]) == pytest.approx(2 * full.step_time(1, [1000]))


def test_sequences_that_fit():
    assert RooflineCost("rtx4090", "8B").sequences_that_fit(4096) == 36
    assert RooflineCost("rtx4090", "70B").sequences_that_fit(4096) == 0


@given(st.integers(1, 20000), st.lists(st.integers(0, 32768), max_size=64))
def test_roofline_is_the_max_of_its_roofs(tokens, contexts):
    cost = RooflineCost("h200", "70B")
    total = sum(contexts)
    t = cost.step_time(tokens, contexts)
    assert t == max(cost.memory_ms(total), cost.compute_ms(tokens))
    assert t >= cost.step_time(tokens, contexts[:-1])  # more KV never makes a step cheaper


def test_calibrated_fit_recovers_constants():
    rng = np.random.default_rng(0)
    a, b, c = 0.021, 0.00037, 4.5
    samples = []
    for _ in range(200):
        seqs = int(rng.integers(1, 32))
        contexts = rng.integers(1, 4096, size=seqs).tolist()
        tokens = seqs + int(rng.integers(0, 2048))
        samples.append((tokens, contexts, a * tokens + b * sum(contexts) + c))
    fitted = CalibratedCost.fit(samples)
    assert fitted.per_token == pytest.approx(a, rel=1e-9)
    assert fitted.per_context_token == pytest.approx(b, rel=1e-9)
    assert fitted.per_step == pytest.approx(c, rel=1e-9)
    assert fitted.fit_info["r2"] == pytest.approx(1.0)
    assert fitted.step_time(10, [100, 200]) == pytest.approx(a * 10 + b * 300 + c)
    assert fitted.time_unit == "ms"


def test_calibrated_fit_with_noise():
    rng = np.random.default_rng(1)
    samples = []
    for _ in range(2000):
        contexts = rng.integers(1, 2048, size=int(rng.integers(1, 16))).tolist()
        tokens = len(contexts) + int(rng.integers(0, 512))
        samples.append((tokens, contexts, 0.05 * tokens + 0.001 * sum(contexts) + 3.0 + rng.normal(0, 0.05)))
    fitted = CalibratedCost.fit(samples, unit="ms")
    assert fitted.per_token == pytest.approx(0.05, rel=0.01)
    assert fitted.per_context_token == pytest.approx(0.001, rel=0.02)
    assert fitted.per_step == pytest.approx(3.0, abs=0.05)


def test_calibrated_needs_samples():
    with pytest.raises(ValueError):
        CalibratedCost.fit([(1, [1], 1.0)])


def test_transfer_and_prefill_arithmetic():
    assert transfer_ms(31.5e9, "pcie4-x16") == pytest.approx(1000)
    assert transfer_ms(63e9, LINKS["pcie5-x16"]) == pytest.approx(1000)
    assert swap_ms(1000, "8B", "pcie4-x16") == pytest.approx(2 * 1000 * 131072 / 31.5e9 * 1000)
    assert swap_ms(1000, "8B", round_trip=False) == pytest.approx(1000 * 131072 / 31.5e9 * 1000)
    assert prefill_ms(1000, "8B", "h100-sxm", 1.0) == pytest.approx(1000 * 2 * 8.03e9 / 989e12 * 1000)
    assert recompute_ms(2000, "8B", "rtx4090") == prefill_ms(2000, "8B", "rtx4090", 0.5)


def test_describe_is_jsonable():
    import json
    for model in (UnitsCost(), RooflineCost(), CalibratedCost(1, 2, 3)):
        json.dumps(model.describe())
