"""The fitted cost forms beyond per step + per token + per context token (sim.cost.FormCost): each
recovers known constants from exact synthetic steps, prices a scheduler's plan by its make-up, and
the simulator uses it; ScaledCost scales any model."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sim.calibrate import _fit, predict_steps
from sim.cost import COST_FORMS, CalibratedCost, FormCost, ScaledCost
from sim.simulate import simulate
from sim.workload import Request, Workload

TRUE = {"tokens": 0.4, "prefill": 0.3, "decode": 0.9, "context": 0.002, "seqs": 0.25}
PER_STEP = 7.5


def synthetic(n=300, seed=3):
    """(prefill, decode, context, seqs) per step, all four varying independently."""
    rng = np.random.default_rng(seed)
    decode = rng.integers(0, 16, n)
    prefill = np.where(rng.random(n) < 0.5, rng.integers(1, 256, n), 0)
    decode = np.where(prefill + decode == 0, 1, decode)
    seqs = decode + (prefill > 0) * rng.integers(1, 4, n)
    context = rng.integers(1, 8000, n)
    return prefill, decode, context, seqs


@pytest.mark.parametrize("form", list(COST_FORMS))
def test_each_form_fits_exact_synthetic_steps_exactly(form):
    prefill, decode, context, seqs = synthetic()
    values = {"tokens": prefill + decode, "prefill": prefill, "decode": decode, "context": context, "seqs": seqs}
    times = PER_STEP + sum(TRUE[t] * values[t] for t in COST_FORMS[form])
    rows = np.column_stack([prefill, decode, context, seqs, times])
    fitted = FormCost.fit(rows, form=form)
    assert fitted.per_step == pytest.approx(PER_STEP, rel=1e-9)
    for t in COST_FORMS[form]:
        assert fitted.coef[t] == pytest.approx(TRUE[t], rel=1e-9), t
    assert fitted.fit_info["r2"] == pytest.approx(1.0)
    assert fitted.step_time_shape(10, 3, 500, 4) == pytest.approx(
        PER_STEP + sum(TRUE[t] * {"tokens": 13, "prefill": 10, "decode": 3, "context": 500, "seqs": 4}[t]
                       for t in COST_FORMS[form]))
    # the calibration path (step_samples' columns) gives the same constants
    samples = pd.DataFrame({"num_tokens": prefill + decode, "decode_tokens": decode, "context_tokens": context,
                            "num_seqs": seqs, "measured": times})
    via = _fit(samples, "ms", form=form)
    assert predict_steps(via, samples) == pytest.approx(times, rel=1e-9)


def test_the_linear_form_is_calibrated_cost():
    prefill, decode, context, seqs = synthetic()
    samples = pd.DataFrame({"num_tokens": prefill + decode, "decode_tokens": decode, "context_tokens": context,
                            "num_seqs": seqs, "measured": PER_STEP + 0.4 * (prefill + decode) + 0.002 * context})
    cost = _fit(samples, "ms", form="linear")
    assert type(cost) is CalibratedCost and cost.per_token == pytest.approx(0.4)


def test_unknown_form_is_one_sentence():
    with pytest.raises(ValueError, match="unknown cost form 'quadratic'; known: linear"):
        FormCost(form="quadratic")
    with pytest.raises(ValueError, match="unknown cost form"):
        _fit(pd.DataFrame({"num_tokens": [1] * 5, "decode_tokens": [1] * 5, "context_tokens": [1] * 5,
                           "num_seqs": [1] * 5, "measured": [1.0] * 5}), "ms", form="quadratic")


def test_the_simulator_prices_each_step_by_its_make_up():
    """A decode token costing 10x a prefill token: a run of decodes takes what the form says."""
    cost = FormCost("prefill_decode", {"prefill": 0.1, "decode": 1.0, "context": 0.0}, per_step=2.0)
    wl = Workload(requests=[Request("a", 20, 5)], config={"scheduler": "vllm"})
    tr = simulate(wl, cost=cost)
    busy = tr.steps[~tr.steps["idle"]]
    dt = (busy["end"] - busy["start"]).to_numpy()
    assert dt[0] == pytest.approx(2.0 + 0.1 * 20)          # the prompt
    assert dt[1:] == pytest.approx([2.0 + 1.0] * (len(dt) - 1))   # one decode token each
    slow = simulate(wl, cost=ScaledCost(cost, 1.5))
    sb = slow.steps[~slow.steps["idle"]]
    assert (sb["end"] - sb["start"]).to_numpy() == pytest.approx(1.5 * dt)
