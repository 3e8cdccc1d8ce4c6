import numpy as np
import pytest

from sim.simulate import simulate
from sim.trace import Trace
from sim.workload import Workload, generate
from pathlib import Path

CASES = Path(__file__).resolve().parent / "fixtures" / "vllm"


def lesson():
    return simulate(Workload.load(str(CASES / "lesson_abc_8blocks.workload.json")))


def test_round_trip_identical(tmp_path):
    tr = simulate(Workload.load(str(CASES / "prefix_cache_on.workload.json")))
    p = tmp_path / "x.trace"
    tr.save(str(p))
    back = Trace.load(str(p))
    assert back.to_bytes() == tr.to_bytes()
    for name in ("requests", "steps", "batch", "events", "kv"):
        a, b = getattr(tr, name), getattr(back, name)
        assert list(a.columns) == list(b.columns)
        assert a.astype(str).equals(b.astype(str)), name
    assert back.meta == tr.meta


def test_same_seed_byte_identical():
    a = simulate(generate(300, seed=5, arrival="poisson", rate=2.0, config={"num_gpu_blocks": 120}))
    b = simulate(generate(300, seed=5, arrival="poisson", rate=2.0, config={"num_gpu_blocks": 120}))
    c = simulate(generate(300, seed=6, arrival="poisson", rate=2.0, config={"num_gpu_blocks": 120}))
    assert a.to_bytes() == b.to_bytes()
    assert a.to_bytes() != c.to_bytes()


def test_lesson_tables():
    tr = lesson()
    assert tr.num_steps == 7
    s3 = tr.batch_at(3)
    assert list(s3["request"]) == ["A", "B", "C"]
    assert list(s3["tokens"]) == [1, 1, 5]
    assert list(s3["kind"]) == ["decode", "decode", "prefill"]
    s6 = tr.batch_at(6).set_index("request")
    assert s6.loc["C", "kind"] == "recompute" and s6.loc["C", "tokens"] == 7
    req = tr.requests.set_index("request")
    assert req.loc["C", "preemptions"] == 1
    assert req.loc["C", "recomputed_tokens"] == 6  # 5 prompt + 1 decoded token had been computed
    assert req.loc["A", "finish_step"] == 5
    ev = tr.events
    pre = ev[ev["kind"] == "preempt"]
    assert list(pre["request"]) == ["C"] and list(pre["step"]) == [5]


def test_block_map_rebuilds_state():
    tr = lesson()
    count, cached, holders = tr.block_map(3)
    assert count[0] == 0  # null block
    assert int((count[1:] == 0).sum()) == 0  # step 3: all 7 usable blocks held
    owners = [h[0] for h in holders[1:]]
    assert owners.count("A") == 3 and owners.count("B") == 2 and owners.count("C") == 2
    count5, _, holders5 = tr.block_map(5)
    assert int((count5[1:] == 0).sum()) == int(tr.steps.set_index("step").loc[5, "free_blocks"])
    assert not any("C" in h for h in holders5)


def test_block_map_matches_free_blocks_every_step():
    tr = simulate(Workload.load(str(CASES / "preempt_fcfs.workload.json")))
    fb = tr.steps.set_index("step")["free_blocks"]
    for step in range(1, tr.num_steps + 1, 17):
        count, _, _ = tr.block_map(step)
        assert int((count[1:] == 0).sum()) == int(fb.loc[step])


def test_prefix_cache_flags():
    tr = simulate(Workload.load(str(CASES / "prefix_cache_on.workload.json")))
    s = tr.steps.set_index("step")
    for step in (5, 15, 25):
        count, cached, _ = tr.block_map(step)
        free_cached = int((cached & (count == 0))[1:].sum())
        assert free_cached == int(s.loc[step, "cached_free_blocks"])


def test_bad_trace_bytes():
    with pytest.raises(ValueError, match="not a trace file"):
        Trace.from_bytes(b"\x00\x01garbage")
    with pytest.raises(ValueError, match="not a trace file"):
        Trace.from_bytes(b'{"format": "other"}')


def test_slot_of_request_admitted_and_finished_in_one_step():
    tr = lesson()  # C resumes at step 6 in the slot A freed at step 5, and finishes there
    c6 = tr.batch_at(6).set_index("request").loc["C"]
    assert int(c6["slot"]) == 0
    ev = tr.events[(tr.events["step"] == 6) & (tr.events["kind"] == "resume")]
    assert list(ev["detail"]) == ["slot 0"]
