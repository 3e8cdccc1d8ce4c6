"""Following a recording as it is written costs what the new steps cost: the live verdict
(servers/vllm/live_check.py), made step by step, equals compare.decisions on the same lines at
every point, and the Trace so far (RecordingStream.trace, its columns extended) equals a fresh
read of the same lines to the byte. Recordings fed in random pieces: sync, async-pipelined,
requests that stop early or are aborted, one the simulator parts from, one missing its first
requests' adds."""
from __future__ import annotations

import gzip
import importlib.util
import json
import random
from pathlib import Path

import pandas as pd
import pytest

from servers.vllm.compare import decisions
from servers.vllm import live_check
from servers.vllm.live_check import LiveDecisions
from servers.vllm.recording import RecordingStream, read_recording, to_trace
from sim.trace import TABLES

ROOT = Path(__file__).resolve().parents[3]


def recording_of(name: str) -> bytes:
    """An async recording of a traced vLLM 0.34.0 run (test_async_recording.py's recording_of,
    loaded by path: not collected twice)."""
    spec = importlib.util.spec_from_file_location("_async_recordings_for_live_check",
                                                  Path(__file__).with_name("test_async_recording.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.recording_of(name)
SAMPLES = ROOT / "samples" / "vllm"
KEYS = ("equal", "first_difference", "steps", "waiting_capped")


def sample(name: str) -> bytes:
    return gzip.decompress((SAMPLES / name).read_bytes())


def so_far(v: dict, ended: bool) -> dict:
    """The live rule (servers/vllm/live.py): a run still going is held to the steps both made."""
    d = v.get("first_difference")
    if not ended and d is not None and d.get("field") == "steps" and v["simulated_steps"] > v["steps"]:
        v = {**v, "equal": True, "first_difference": None}
    return {k: v[k] for k in KEYS}


def verdicts(fn, rec):
    try:
        return so_far(fn(rec), rec.ended)
    except ValueError as e:
        return str(e)


def fed_in_pieces(data: bytes, seed: int) -> tuple[LiveDecisions, int]:
    """Feed the lines in random pieces; after each, the step-by-step verdict is the whole one."""
    lines = data.splitlines(keepends=True)
    rnd = random.Random(seed)
    stream, check = RecordingStream("r"), LiveDecisions()
    k = points = 0
    while k < len(lines):
        n = rnd.choice((1, 2, 3, 7, 20, 60))
        stream.feed(lines[k:k + n])
        k += n
        rec = stream.recording
        if rec is None:
            continue
        assert verdicts(check.update, rec) == verdicts(decisions, rec), f"after line {k}"
        points += 1
    return check, points


def stopped_early(data: bytes) -> bytes:
    """Each request asked for 5 tokens more and stopped on its own (EOS) where it ended: the
    simulator learns each one's length only at its finish."""
    out = []
    for line in data.splitlines():
        o = json.loads(line)
        if o.get("kind") == "add":
            o["max_tokens"] += 5
        if o.get("kind") == "step" and o.get("fin"):
            o["fin"] = [[i, "stop"] for i, _ in o["fin"]]
        out.append(json.dumps(o))
    return ("\n".join(out) + "\n").encode()


def aborted(data: bytes, every: int = 7) -> bytes:
    """Every 7th finish an abort line after the step (a client gone), the others stops: the
    simulator finishes an aborted request at its last token, so the verdict can move back."""
    out, n = [], 0
    for line in data.splitlines():
        o = json.loads(line)
        extra = []
        if o.get("kind") == "add":
            o["max_tokens"] += 3
        if o.get("kind") == "step" and o.get("fin"):
            keep = []
            for i, _ in o["fin"]:
                n += 1
                if n % every == 0:
                    extra.append({"kind": "finish", "i": i, "reason": "abort", "after_step": o["step"], "t": 0.0})
                else:
                    keep.append([i, "stop"])
            o["fin"] = keep
        out += [json.dumps(o)] + [json.dumps(x) for x in extra]
    return ("\n".join(out) + "\n").encode()


@pytest.mark.parametrize("name", ["fcfs_kv_pressure.jsonl.gz", "priority.jsonl.gz", "prefix_caching_hashes.jsonl.gz"])
def test_a_sync_recording_in_pieces(name):
    check, points = fed_in_pieces(sample(name), seed=1)
    assert points > 10 and check.restarts == 0 and check.result(check.rec)["equal"]


@pytest.mark.parametrize("name", ["preempt_fcfs", "priority_preempt", "prefix_cache_on", "idle_gap"])
def test_an_async_pipelined_recording_in_pieces(name):
    check, points = fed_in_pieces(recording_of(name), seed=2)
    assert points > 3 and check.restarts == 0 and check.result(check.rec)["equal"]


def test_a_recording_the_simulator_parts_from():
    """The 0.32 server's priority run under 0.33's rules: they part at step 13, at every point."""
    data = sample("priority.jsonl.gz").replace(b'"vllm":"0.32.0"', b'"vllm":"0.33.0"', 1)
    for seed in (1, 2):
        check, _ = fed_in_pieces(data, seed)
        d = check.result(check.rec)["first_difference"]
        assert d["step"] == 13 and d["field"] == "scheduled"


@pytest.mark.parametrize("make", [stopped_early, aborted])
def test_lengths_learned_at_the_finish(make):
    fed_in_pieces(make(sample("fcfs_kv_pressure.jsonl.gz")), seed=5)
    fed_in_pieces(make(recording_of("preempt_fcfs")), seed=6)


def test_finished_requests_let_go_of_change_nothing(monkeypatch):
    """Every 16 steps the finished requests are dropped from the kept state (a run of hours holds
    only what is in flight): the verdicts stay the whole file's, an aborted one's included."""
    monkeypatch.setattr(live_check, "SWEEP_STEPS", 16)
    check, _ = fed_in_pieces(sample("fcfs_kv_pressure.jsonl.gz"), seed=8)
    assert check.restarts == 0 and live_check._GONE in check.seqs.values()
    fed_in_pieces(aborted(recording_of("preempt_fcfs"), every=3), seed=9)


def test_a_budget_catches_up_over_calls_and_a_new_recording_starts_again():
    data = sample("fcfs_kv_pressure.jsonl.gz")
    stream = RecordingStream("r")
    stream.feed(data.splitlines(keepends=True))
    check = LiveDecisions()
    v = check.update(stream.recording, budget_s=0.0)   # at most 64 steps a call
    calls = 1
    while v["behind"]:
        assert v["equal"] and v["compared"] < v["steps"]
        v = check.update(stream.recording, budget_s=0.0)
        calls += 1
    assert calls > 3 and so_far(v, True) == so_far(decisions(stream.recording), True)
    other = RecordingStream("again")   # the file replaced: another Recording, the state starts over
    other.feed(data.splitlines(keepends=True)[:150])
    assert so_far(check.update(other.recording), False) == so_far(decisions(other.recording), False)
    assert check.restarts == 1


def without_first_adds(data: bytes, n: int = 3) -> bytes:
    """The first n add lines gone (a file that continues an earlier one): their entries left out."""
    out, gone = [], 0
    for line in data.splitlines(keepends=True):
        if gone < n and b'"kind":"add"' in line.replace(b" ", b"")[:40]:
            gone += 1
            continue
        out.append(line)
    return b"".join(out)


@pytest.mark.parametrize("make", [
    lambda: sample("fcfs_kv_pressure.jsonl.gz"), lambda: sample("prefix_caching_hashes.jsonl.gz"),
    lambda: recording_of("preempt_fcfs"), lambda: aborted(sample("fcfs_kv_pressure.jsonl.gz")),
    lambda: without_first_adds(sample("priority.jsonl.gz"))],
    ids=["fcfs", "prefix_caching", "async", "aborts", "missing_adds"])
def test_the_trace_so_far_extended_is_a_fresh_reads(make):
    lines = make().splitlines(keepends=True)
    rnd = random.Random(3)
    stream = RecordingStream("r")
    k = points = 0
    while k < len(lines):
        n = rnd.choice((1, 2, 5, 20, 60))
        stream.feed(lines[k:k + n])
        k += n
        if stream.recording is None:
            continue
        got = stream.trace()
        fresh = to_trace(read_recording(b"".join(lines[:k]), name="r"))
        for t in TABLES:
            pd.testing.assert_frame_equal(getattr(got, t), getattr(fresh, t), check_exact=True, obj=f"{t} at {k}")
        assert got.meta == fresh.meta and got.to_bytes() == fresh.to_bytes()
        points += 1
    assert points > 5 and stream.recording.builder.tables.n_e > 0   # the columns were kept and extended
