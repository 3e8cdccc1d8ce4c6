"""The live time prediction (servers/vllm/live_predict.py) costs what the new steps cost and is
the whole-run prediction: recordings fed in random pieces, and at every point the prediction kept
up to date with model M equals compare.predict(rec, rec, band=False, cost=M) on the same lines
(each request's predicted times to the bit, and the errors); after each refit at N steps, M is
compare.fit_cost on those N steps. Sync and async-pipelined runs, requests that stop early or are
aborted (their lengths learned at the finish), a prefix-caching run."""
from __future__ import annotations

import importlib.util
import random
from pathlib import Path

import numpy as np
import pytest

from servers.vllm import live_predict
from servers.vllm.compare import METRICS, fit_cost, predict
from servers.vllm.live_predict import LivePrediction
from servers.vllm.recording import RecordingStream, read_recording


def _helpers():
    """test_live_check.py's recordings (loaded by path: not collected twice)."""
    spec = importlib.util.spec_from_file_location("_live_check_recordings_for_live_predict",
                                                  Path(__file__).with_name("test_live_check.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_h = _helpers()
aborted, recording_of, sample, stopped_early = _h.aborted, _h.recording_of, _h.sample, _h.stopped_early

COLS = ["id"] + list(METRICS) + [f"predicted_{m}" for m in METRICS]


def cost_params(c) -> tuple:
    return (c.per_step, c.per_token, c.per_context_token)


def same(live, whole) -> None:
    a, b = live.requests[COLS], whole.requests[COLS]
    assert list(a["id"]) == list(b["id"])
    for c in COLS[1:]:
        np.testing.assert_array_equal(a[c].to_numpy(dtype=float), b[c].to_numpy(dtype=float), err_msg=c)
    assert live.errors == whole.errors or all(
        live.errors[m]["n"] == whole.errors[m]["n"] and np.isclose(live.errors[m]["mape"], whole.errors[m]["mape"],
                                                                   equal_nan=True, rtol=0, atol=0)
        for m in METRICS)


def fed_in_pieces(data: bytes, seed: int, first_fit: int = 8, budget: float | None = None,
                  pieces=(1, 2, 3, 7, 20, 60)):
    lines = data.splitlines(keepends=True)
    rnd = random.Random(seed)
    stream, live = RecordingStream("r"), LivePrediction(first_fit=first_fit)
    k = points = fits = 0
    # a model -> the lines read when it was fitted; keyed by the model itself (held, so that a model
    # let go of cannot hand its id(), an address, to a later one)
    fitted, started = None, {}
    while k < len(lines):
        n = rnd.choice(pieces)
        stream.feed(lines[k:k + n])
        k += n
        rec = stream.recording
        if rec is None:
            continue
        try:
            p = live.update(rec, budget_s=budget)
        except ValueError as e:   # the whole run cannot be predicted either (a request longer than max_model_len)
            with pytest.raises(ValueError, match=str(e)[:20]):
                predict(rec, rec, band=False)
            p = None
        for m in (live.next, live.sim):
            if m is not None and m not in started:
                started[m] = k
        if p is None:
            continue
        if live.sim is not None and live.sim is not fitted:   # a refit: the model is the fit on its steps
            fitted = live.sim
            fits += 1
            first = read_recording(b"".join(lines[:started[fitted]]), name="r")
            assert live.fitted_at == len(first.steps)
            assert cost_params(live.cost) == cost_params(fit_cost(first))
        if p is None or live.refitting or live.at_steps != len(rec.steps):
            continue
        same(p, predict(rec, None, band=False, cost=live.cost))
        points += 1
    return live, points, fits


@pytest.mark.parametrize("name", ["fcfs_kv_pressure.jsonl.gz", "priority.jsonl.gz", "prefix_caching_hashes.jsonl.gz"])
def test_a_sync_recording_in_pieces(name):
    live, points, fits = fed_in_pieces(sample(name), seed=1)
    assert points > 10 and fits >= 3 and live.restarts == 0


@pytest.mark.parametrize("name", ["preempt_fcfs", "priority_preempt", "prefix_cache_on", "idle_gap"])
def test_an_async_pipelined_recording_in_pieces(name):
    live, points, fits = fed_in_pieces(recording_of(name), seed=2, first_fit=4, pieces=(1, 2, 3, 5))
    assert points >= 3 and fits >= 1


@pytest.mark.parametrize("make", [stopped_early, aborted])
def test_lengths_learned_at_the_finish(make):
    live, points, _ = fed_in_pieces(make(sample("fcfs_kv_pressure.jsonl.gz")), seed=5)
    assert points > 10
    fed_in_pieces(make(recording_of("preempt_fcfs")), seed=6, first_fit=4, pieces=(1, 2, 3, 5))


def test_finished_requests_let_go_of_change_nothing(monkeypatch):
    monkeypatch.setattr(live_predict, "SWEEP_STEPS", 16)
    live, points, _ = fed_in_pieces(sample("fcfs_kv_pressure.jsonl.gz"), seed=8)
    assert points > 10


def test_a_new_model_catches_up_over_calls_while_the_last_one_stays():
    """budget 0: a few steps a call; the model being redone is never shown half-way."""
    data = sample("fcfs_kv_pressure.jsonl.gz")
    lines = data.splitlines(keepends=True)
    stream, live = RecordingStream("r"), LivePrediction(first_fit=8)
    shown, redone = [], 0
    for k in range(0, len(lines), 40):
        stream.feed(lines[k:k + 40])
        if stream.recording is None:
            continue
        p = live.update(stream.recording, budget_s=0.0)
        redone += live.refitting
        if p is not None and shown and p is not shown[-1][0]:
            assert not live.refitting
        if p is not None:
            shown.append((p, live.cost))
    for _ in range(10_000):
        p = live.update(stream.recording, budget_s=0.0)
        if not live.refitting and live.at_steps == len(stream.recording.steps):
            break
    assert redone > 0
    same(p, predict(stream.recording, None, band=False, cost=live.cost))


def test_a_whole_recording_at_once_is_compare_predict():
    rec = read_recording(sample("fcfs_kv_pressure.jsonl.gz"), name="r")
    live = LivePrediction()
    p = live.update(rec, budget_s=None)
    assert live.fitted_at == len(rec.steps)
    assert cost_params(live.cost) == cost_params(fit_cost(rec))
    same(p, predict(rec, rec, band=False))
