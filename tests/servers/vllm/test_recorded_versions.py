"""Recordings the recorder wrote inside vLLM 0.32.0's, 0.33.0's and 0.34.0's own Scheduler and
AsyncScheduler (tests/fixtures/vllm_recorded, made by bench/vllm_oracle/check_recorder.py from the
committed random draws, v034_*, v033_* and v032_*, each in sync and async mode), and inside 0.10.2's
(v010_*, both modes), 0.9.2's, 0.9.1's and 0.8.5's (v009_*, v0091_*, v008_*: sync, which is all they
have; the recorder's paths for a deque of a waiting queue and for requests advanced inside
schedule()). Each is read without a warning (those are versions the recorder was checked inside)
and re-simulated step for step with its version's rules (0.9.1's are 0.8's), cache-aware admission
(0.34, in the header) included."""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from servers.vllm.compare import decisions
from servers.vllm.recording import is_async, mode_config, read_recording, to_trace, to_workload
from sim.simulate import simulate
from sim.versions import normalize

ROOT = Path(__file__).resolve().parents[3]
RECORDED = ROOT / "tests" / "fixtures" / "vllm_recorded"
NAMES = sorted(p.name for p in RECORDED.glob("*.jsonl.gz"))
ADMISSION = ("cache_aware_admission_window", "cache_aware_admission_threshold")


def test_the_fixtures_cover_both_versions_both_modes_and_admission():
    assert len(NAMES) >= 30
    heads = {n: json.loads(gzip.open(RECORDED / n, "rt").readline()) for n in NAMES}
    assert {h["vllm"] for h in heads.values()} == {"0.8.0", "0.8.4", "0.8.5", "0.9.0.1", "0.9.1", "0.9.2", "0.10.2",
                                                   "0.27.1", "0.32.0", "0.33.0", "0.34.0"}
    assert {h["scheduler_class"] for h in heads.values()} == {"RecordingScheduler", "AsyncRecordingScheduler"}
    windows = [h["config"].get("cache_aware_admission_window") for h in heads.values() if h["vllm"] == "0.34.0"]
    assert all(w is not None for w in windows) and sum(1 for w in windows if w) >= 10
    assert all(ADMISSION[0] not in h["config"] for h in heads.values() if h["vllm"] != "0.34.0")


@pytest.mark.parametrize("name", NAMES)
def test_a_recording_of_a_checked_vllm_reads_cleanly_and_is_re_made_step_for_step(name):
    rec = read_recording(RECORDED / name)
    assert rec.warnings == []
    assert is_async(rec) == (".async." in name)
    v = decisions(rec)
    assert v["equal"], (name, v["first_difference"])
    assert v["simulated_as"] == {"vllm_version": normalize(rec.header["vllm"]), "async_scheduling": is_async(rec)}
    assert v["steps"] > 5


def test_cache_aware_admission_in_the_header_is_what_makes_those_runs_equal(tmp_path):
    """Without the two settings (what the recorder wrote before it wrote them) the re-simulation
    of some of these runs parts from the recording: the settings are read, and they matter."""
    parted = 0
    for name in NAMES:
        lines = gzip.open(RECORDED / name, "rt").read().splitlines()
        head = json.loads(lines[0])
        if not head["config"].get("cache_aware_admission_window"):
            continue
        for k in ADMISSION:
            del head["config"][k]
        p = tmp_path / name.removesuffix(".gz")
        p.write_text("\n".join([json.dumps(head)] + lines[1:]) + "\n")
        rec = read_recording(p)
        assert ADMISSION[0] not in to_workload(rec).config
        parted += not decisions(rec)["equal"]
    assert parted >= 2


@pytest.mark.parametrize("version,warned", [("0.34.0", False), ("0.34.0+cu130", False), ("0.33.0", False),
                                            ("0.28.0", False), ("0.27.1", False), ("0.27.0", True),
                                            ("0.34.1", True), ("0.35.0", True), ("unknown", True), (None, True)])
def test_only_an_unchecked_vllm_gets_the_recorder_s_warning(tmp_path, version, warned):
    lines = gzip.open(RECORDED / NAMES[-1], "rt").read().splitlines()
    head = json.loads(lines[0])
    head["vllm"] = version
    p = tmp_path / "rec.jsonl"
    p.write_text("\n".join([json.dumps(head)] + lines[1:]) + "\n")
    said = [w for w in read_recording(p).warnings if "the recorder was checked inside" in w
            or "does not say which vLLM ran" in w]
    assert len(said) == int(warned)
    if version in ("unknown", None):   # a recorder that could not read the version: the newest rules, said so
        assert said[0] == ("the header does not say which vLLM ran: what the recorder read is unchecked, and "
                           "it is re-simulated with vLLM 0.34's rules")
    elif warned:
        assert said[0].startswith(f"recorded with vLLM {version}; the recorder was checked inside vLLM 0.8.0 "
                                  "to 0.34.0")


def test_a_recording_of_0_9_0_says_it_follows_0_9_0_s_rules_and_not_that_they_are_the_nearest(tmp_path):
    """0.9.0 is not a release the recorder ran inside (0.9.0.1 is): its warning says so, and that it
    is re-simulated with the rules of 0.9.0 and 0.9.1 (checked with the 0.9.0.1 and 0.9.1 wheels)."""
    lines = gzip.open(RECORDED / "v0091_rand034_00.sync.jsonl.gz", "rt").read().splitlines()
    head = json.loads(lines[0])
    head["vllm"] = "0.9.0"
    p = tmp_path / "rec.jsonl"
    p.write_text("\n".join([json.dumps(head)] + lines[1:]) + "\n")
    rec = read_recording(p)
    (said,) = rec.warnings
    assert said.startswith("recorded with vLLM 0.9.0; the recorder was checked inside vLLM 0.8.0 to 0.34.0")
    assert said.endswith("(re-simulated with vLLM 0.9.0's rules)")
    assert "nearest" not in said and decisions(rec)["equal"]


def test_a_recording_without_prompts_says_why_prefix_hits_part(tmp_path):
    """SCHEDLAB_VLLM_PROMPTS=none on a server with prefix caching: sim vllm says, on stderr in
    text mode too, that the prefix-cache hits cannot be re-made."""
    lines = [json.loads(x) for x in gzip.open(RECORDED / "v034_rand034_22.sync.jsonl.gz", "rt")]
    assert lines[0]["config"]["enable_prefix_caching"]
    lines[0]["prompts"] = "none"
    for x in lines:
        x.pop("prompt", None)
    p = tmp_path / "rec.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    r = subprocess.run([sys.executable, "-m", "sim", "vllm", str(p)], cwd=ROOT, capture_output=True, text=True,
                       check=True)
    assert "prompts were not recorded (SCHEDLAB_VLLM_PROMPTS=none): prefix-cache hits cannot be re-simulated" \
        in r.stderr
    assert "Traceback" not in r.stderr


def _has_block_ids(name: str) -> bool:
    return bool(json.loads(gzip.open(RECORDED / name, "rt").readline()).get("block_ids"))


# synchronous recordings that carry block ids (async ones number their steps by schedule() call)
WITH_BLOCKS = [n for n in NAMES if ".sync." in n and _has_block_ids(n)]


def test_the_oldest_versions_recordings_carry_block_ids():
    versions = {json.loads(gzip.open(RECORDED / n, "rt").readline())["vllm"] for n in WITH_BLOCKS}
    assert {"0.8.0", "0.8.4", "0.8.5", "0.9.0.1", "0.27.1"} <= versions and len(WITH_BLOCKS) >= 30


@pytest.mark.parametrize("name", WITH_BLOCKS)
def test_the_block_ids_a_request_took_are_the_simulator_s(name):
    """The simulator hands each request the block ids the real scheduler did, in the same step: 0.8.0
    to 0.8.4's preallocated blocks, 0.8.2 and before's block 0, 0.8's head-first freeing without prefix
    caching (tail first from 0.9.0), 0.27's freed blocks at the back without it, and the prefix cache's
    hits all show in them."""
    rec = read_recording(RECORDED / name)
    took = to_trace(rec).kv
    sim = simulate(to_workload(rec), mode_config(rec)).kv
    cols = ["step", "block", "request"]
    took, sim = (t[t.op == "acquire"][cols].reset_index(drop=True) for t in (took, sim))
    assert len(took) > 0 and took.astype(str).equals(sim.astype(str)), name


def test_a_recording_of_vllm_0_8_0_draws_block_0_as_a_block():
    """0.8.2 and before hand block 0 out: the recording's trace says so, and the block map shows the
    request holding it, where a later version's keeps block 0 as the null block."""
    from sim.analysis import NULL, block_owner_frames
    old = to_trace(read_recording(RECORDED / "v0800_rand034_03.sync.jsonl.gz"))
    new = to_trace(read_recording(RECORDED / "v008_rand034_03.sync.jsonl.gz"))
    assert old.meta["null_block"] is False and "null_block" not in new.meta
    assert old.usable_blocks == old.num_blocks == new.usable_blocks + 1
    first = int(old.kv[(old.kv.op == "acquire") & (old.kv.block == 0)].step.iloc[0])
    assert block_owner_frames(old, [first])[0][0] >= 0 and block_owner_frames(new, [first])[0][0] == NULL
