"""A followed recording read as it grows (servers/vllm/live.py): the same Trace as the whole file
once it is all written, a replaced file starts the reader over, a file that is no recording is
one sentence, the verdict follows every step and the prediction is recomputed on its budget and
held past its step cap."""
from __future__ import annotations

import gzip
import os
from pathlib import Path

import pandas as pd

from servers.vllm import live as live_mod
from servers.vllm.compare import predict
from servers.vllm.live import LiveRecording, LiveVerdict
from servers.vllm.recording import read_recording, to_trace

SAMPLE = Path(__file__).resolve().parents[3] / "samples" / "vllm" / "fcfs_kv_pressure.jsonl.gz"


def test_read_in_pieces_it_is_the_whole_files_trace(tmp_path):
    text = gzip.decompress(SAMPLE.read_bytes())
    p = tmp_path / "r.jsonl"
    p.write_bytes(b"")
    lv = LiveRecording(p, "r.jsonl")
    assert lv.poll() == 0 and lv.trace() is None
    steps = []
    for k in range(0, len(text), 5000):
        with open(p, "ab") as f:
            f.write(text[k:k + 5000])
        lv.poll()
        steps.append(lv.num_steps)
    whole = to_trace(read_recording(SAMPLE))
    tr = lv.trace()
    assert steps == sorted(steps) and steps[-1] == len(whole.steps) and len(set(steps)) > 5
    assert tr is lv.trace()   # nothing new: the same object (two views of the page share it)
    for t in ("steps", "batch", "requests", "events", "kv"):
        pd.testing.assert_frame_equal(getattr(tr, t), getattr(whole, t), check_categorical=False, obj=t)


def test_a_replaced_file_starts_the_reader_over(tmp_path):
    text = gzip.decompress(SAMPLE.read_bytes())
    p = tmp_path / "r.jsonl"
    p.write_bytes(text)
    lv = LiveRecording(p)
    lv.poll()
    n = lv.num_steps
    head_and_some = text[: text.index(b'"kind":"step"') + 3000]
    new = tmp_path / "n.jsonl"
    new.write_bytes(head_and_some[: head_and_some.rindex(b"\n") + 1])
    os.replace(new, p)
    lv.poll()
    assert lv.generation == 1 and 0 < lv.num_steps < n and any("replaced" in x for x in lv.notes)


def test_a_file_that_is_no_recording_is_one_sentence(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_bytes(b'{"config": {}, "requests": []}\n')
    lv = LiveRecording(p)
    lv.poll()
    assert lv.stopped and "workload" in lv.stopped and "\n" not in lv.stopped and lv.trace() is None


def test_the_verdict_and_the_prediction_follow_every_step(tmp_path):
    text = gzip.decompress(SAMPLE.read_bytes())
    lines = text.splitlines(keepends=True)
    p = tmp_path / "r.jsonl"
    p.write_bytes(b"".join(lines[:200]))
    lv = LiveRecording(p)
    lv.poll()
    v = lv.verdict
    assert v.update(lv, predict_times=True) and v.result["equal"] and v.result["so_far"] and v.at_steps == lv.num_steps
    assert v.prediction is not None and v.predicted_at == lv.num_steps and v.fitted_at == lv.num_steps
    assert not v.update(lv, predict_times=True)   # nothing new
    with open(p, "ab") as f:
        f.write(b"".join(lines[200:300]))
    lv.poll()
    # both go on at once, only the new steps simulated; the model is fitted again once the run doubled
    assert v.update(lv, predict_times=True) and v.at_steps == lv.num_steps and v.predicted_at == lv.num_steps
    assert v.check.restarts == 0 and v.result["equal"] and v.times.restarts == 0
    assert v.fitted_at < lv.num_steps < live_mod.REFIT_FACTOR * v.fitted_at
    # the requests of the page's Trace (rebuilt on a budget: it may lag the lines by a refresh), each
    # predicted as the whole run on the lines read predicts it
    whole = predict(lv.recording, None, band=False, cost=v.times.cost).requests
    got = v.prediction.requests
    cols = ["id"] + [c for c in got.columns if c.startswith("predicted_")]
    pd.testing.assert_frame_equal(got[cols], whole.set_index("id").loc[got["id"]].reset_index()[cols],
                                  check_exact=True)
    fresh = LiveVerdict()
    assert fresh.update(lv, predict_times=True) and fresh.fitted_at == lv.num_steps   # the first fit: all steps


def test_a_long_runs_trace_is_rebuilt_on_a_budget(tmp_path, monkeypatch):
    lines = gzip.decompress(SAMPLE.read_bytes()).splitlines(keepends=True)
    p = tmp_path / "r.jsonl"
    p.write_bytes(b"".join(lines[:200]))
    lv = LiveRecording(p)
    lv.poll()
    first = lv.trace()
    with open(p, "ab") as f:
        f.write(b"".join(lines[200:]))
    lv.poll()
    monkeypatch.setattr(live_mod, "TRACE_FACTOR", 1e9)   # as if building it took forever
    assert lv.trace() is first and len(first.steps) < lv.num_steps   # the step count goes on; the Trace waits
    monkeypatch.setattr(live_mod, "TRACE_FACTOR", 0.0)
    assert len(lv.trace().steps) == lv.num_steps
