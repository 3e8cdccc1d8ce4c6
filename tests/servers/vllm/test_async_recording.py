"""Async recordings re-simulated with async rules. Each recording here is what the recorder
inside vLLM 0.34.0's AsyncScheduler writes on a run of vLLM's own classes: built from the traces
of that run (tests/fixtures/vllm_async034, one line per engine call) the way
AsyncRecordingScheduler writes them, each step with its own update_from_output, adds numbered by
schedule() calls, the four times in the engine's call order. The header picks the rules (async,
0.34), the arrivals are put back on the engine's calls (drains included), and the simulator makes
every recorded decision."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from servers.vllm.compare import decisions
from servers.vllm.format import FORMAT, VERSION
from servers.vllm.recording import CONFIG_KEYS, first_difference, is_async, oracle_lines, read_recording, to_workload
from sim.async_sched import per_schedule
from sim.simulate import oracle_jsonl
from sim.workload import Workload

ROOT = Path(__file__).resolve().parents[3]
ASYNC = ROOT / "tests" / "fixtures" / "vllm_async034"
NAMES = sorted(p.name[: -len(".workload.json")] for p in ASYNC.glob("*.workload.json"))


def recording_of(name: str, vllm: str = "0.34.0", cls: str = "AsyncRecordingScheduler") -> bytes:
    """The recorder's file for the traced run `name`: call j's schedule() at 10j+1 ms, its update
    (of the oldest step in flight) at 10j+5 ms; a step line is written at its update."""
    wl = Workload.load(str(ASYNC / f"{name}.workload.json"))
    lines = [json.loads(x) for x in (ASYNC / f"{name}.vllm.jsonl").read_text().splitlines()]
    caching = bool(wl.config.get("enable_prefix_caching"))
    mml = max(r.prompt_len + r.max_tokens for r in wl.requests)
    config = {**{k: wl.config[k] for k in CONFIG_KEYS if k in wl.config}, "max_model_len": mml,
              "async_scheduling": True}
    out = [{"kind": "header", "format": FORMAT, "version": VERSION, "vllm": vllm, "scheduler_class": cls,
            "started_unix": 0.0, "part": 1, "config": config, "prompts": "ids", "waiting_cap": 1000,
            "cached_free_blocks": caching, "block_ids": False}]
    by_id = {r.id: r for r in wl.requests}
    index, steps, calls = {}, {}, 0
    for j, line in enumerate(lines):
        t = 10.0 * j
        for rid in line["arrived"]:
            r = by_id[rid]
            index[rid] = len(index)
            out.append({"kind": "add", "i": index[rid], "id": rid, "prompt_len": r.prompt_len,
                        "max_tokens": r.max_tokens, "priority": r.priority, "arrival": t, "added": t,
                        "before_step": calls + 1, "ignore_eos": True, "prompt": list(r.prompt_tokens())})
        if not line.get("idle") and not line.get("drain"):
            calls += 1
            steps[line["step"]] = {"kind": "step", "step": calls, "t": [t + 1, t + 2, None, None],
                                   "sched": [[index[k], n, line["computed_before"][k]]
                                             for k, n in line["scheduled"].items()],
                                   "sampled": [index[k] for k in line["sampled"]],
                                   "pre": [index[k] for k in line["preempted"]],
                                   "free_sched": line["free_blocks_after_schedule"]}
        st = steps.pop(line.get("applied_step"), None)
        if st is not None:
            st["t"][2:] = [t + 5, t + 6]
            st.update(fin=[[index[k], "length"] for k in line["finished"]], free=line["free_blocks"],
                      running=[index[k] for k in line["running"]], waiting=[index[k] for k in line["waiting"]],
                      waiting_n=len(line["waiting"]))
            if caching:
                st["cached_free"] = line["cached_free_blocks"]
            out.append(st)
    out.append({"kind": "end", "t": 10.0 * len(lines), "steps": calls})
    return "".join(json.dumps(x) + "\n" for x in out).encode()


@pytest.mark.parametrize("name", NAMES)
def test_an_async_recording_is_re_simulated_with_async_rules(name):
    rec = read_recording(recording_of(name))
    assert rec.warnings == []   # 0.34.0: a version the recorder was checked inside
    assert is_async(rec)
    wl = to_workload(rec)
    assert wl.config["async_scheduling"] is True and wl.config["vllm_version"] == "0.34"
    # the arrivals are back on the engine's calls: the traced workload's own arrival steps, less
    # the idle ticks before them (the engine calls nothing while idle; the tracer counted them)
    traced = Workload.load(str(ASYNC / f"{name}.workload.json"))
    lines = [json.loads(x) for x in (ASYNC / f"{name}.vllm.jsonl").read_text().splitlines()]
    idle_before = lambda a: sum(1 for x in lines[:a] if x.get("idle"))  # noqa: E731
    assert [(r.id, r.arrival_step) for r in wl.requests] == [
        (r.id, r.arrival_step - idle_before(r.arrival_step)) for r in sorted(traced.requests, key=lambda q: q.arrival_step)]
    v = decisions(rec)
    assert v["equal"], v["first_difference"]
    assert v["simulated_as"] == {"vllm_version": "0.34", "async_scheduling": True} and v["steps"] > 5


def test_sync_rules_would_not_make_the_async_recordings_decisions():
    """Re-simulated as sync (the wrong rules, what happened before the mode was read), the first
    recording already parts: the check above can fail."""
    rec = read_recording(recording_of("lesson_abc_7blocks"))
    wl = to_workload(rec)
    sync = [json.loads(x) for x in oracle_jsonl(wl, {"async_scheduling": False}).splitlines()]
    assert first_difference(oracle_lines(rec), sync) is not None
    as_async = per_schedule([json.loads(x) for x in oracle_jsonl(wl).splitlines()])
    assert first_difference(oracle_lines(rec), as_async) is None


def test_the_idle_gap_puts_the_late_requests_after_the_drain():
    """idle_gap: the first busy period ends with an empty schedule() and a drain call, then the
    engine idles; the late requests join after the drain (the recorder's schedule() count alone
    would put them one call early, before the drain)."""
    rec = read_recording(recording_of("idle_gap"))
    by_id = {r.id: r for r in to_workload(rec).requests}
    add = next(a for a in rec.adds if a["id"] == "r0004")
    assert add["before_step"] == 14 and by_id["r0004"].arrival_step == 14   # 13 schedule() calls and a drain
    assert rec.steps[12]["sched"] == [] and rec.steps[12]["t"][2] < rec.steps[13]["t"][0]   # drained


def test_the_cli_says_the_mode(tmp_path):
    p = tmp_path / "rec.jsonl"
    p.write_bytes(recording_of("preempt_fcfs"))
    r = subprocess.run([sys.executable, "-m", "sim", "vllm", str(p), "--json"], cwd=ROOT, capture_output=True,
                       text=True, check=True)
    out = json.loads(r.stdout)
    assert out["async_scheduling"] is True and out["vllm"] == "0.34.0"
    assert out["decisions"]["equal"] and out["decisions"]["simulated_as"]["async_scheduling"] is True
    r = subprocess.run([sys.executable, "-m", "sim", "vllm", str(p)], cwd=ROOT, capture_output=True, text=True,
                       check=True)
    assert "(async scheduling)" in r.stdout and "the same decisions" in r.stdout


def test_an_async_recording_of_a_vllm_without_rules_is_played_back_not_re_simulated(tmp_path):
    """A vLLM whose scheduler the simulator does not reproduce (V0's): decisions() refuses in one
    sentence; the CLI still gives what was recorded (steps, requests, warnings), with the sentence
    as the verdict."""
    p = tmp_path / "rec.jsonl"
    p.write_bytes(recording_of("lesson_abc_8blocks", vllm="0.6.3"))
    said = "whose scheduler the simulator does not reproduce"
    with pytest.raises(ValueError, match=said):
        decisions(read_recording(p))
    r = subprocess.run([sys.executable, "-m", "sim", "vllm", str(p)], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0 and said in r.stderr and "Traceback" not in r.stderr
    assert "simulator: not re-simulated (" in r.stdout and " steps (" in r.stdout
    r = subprocess.run([sys.executable, "-m", "sim", "vllm", str(p), "--json"], cwd=ROOT, capture_output=True,
                       text=True)
    out = json.loads(r.stdout)
    assert out["decisions"]["equal"] is None and said in out["decisions"]["not_simulated"]
    assert out["steps"] > 0 and out["requests_added"] > 0
    r = subprocess.run([sys.executable, "-m", "sim", "vllm", str(p), "--workload", str(tmp_path / "w.json")],
                       cwd=ROOT, capture_output=True, text=True)   # what cannot be made is refused
    assert r.returncode != 0 and said in r.stderr and not (tmp_path / "w.json").exists()


def test_an_async_recording_of_a_newer_vllm_is_re_made_with_the_newest_rules_and_says_so(tmp_path):
    """A vLLM newer than any checked one: re-simulated with the newest version's rules (which made
    the recording here, so the decisions match), the header's warning naming the borrowed rules."""
    p = tmp_path / "rec.jsonl"
    p.write_bytes(recording_of("lesson_abc_8blocks", vllm="0.40.0"))
    rec = read_recording(p)
    assert any("0.40.0" in w and "0.34's rules, the nearest version" in w for w in rec.warnings)
    got = decisions(rec)
    assert got["equal"] is True and got["simulated_as"]["vllm_version"] == "0.34"
    r = subprocess.run([sys.executable, "-m", "sim", "vllm", str(p), "--workload", str(tmp_path / "w.json")],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0 and json.loads((tmp_path / "w.json").read_text())["config"]["vllm_version"] == "0.34"