import io
import json
from pathlib import Path

import pandas as pd

from sim.export import chrome_trace, chrome_trace_bytes, table_csv
from sim.simulate import simulate
from sim.workload import Workload, generate

CASES = Path(__file__).resolve().parent / "fixtures" / "vllm"


def lesson():
    return simulate(Workload.load(str(CASES / "lesson_abc_8blocks.workload.json")))


def test_chrome_trace_structure():
    tr = lesson()
    doc = json.loads(chrome_trace_bytes(tr))
    ev = doc["traceEvents"]
    slices = [e for e in ev if e["ph"] == "X"]
    assert len(slices) == len(tr.batch)
    names = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names == {"scheduler"} | {f"slot {s}" for s in tr.batch["slot"].unique()}
    # step 3 carries C's 5-token prompt chunk, 10 units after step 2 ended -> ts 20 ms
    c3 = [e for e in slices if e["args"]["request"] == "C" and e["args"]["step"] == 3][0]
    assert c3["args"]["tokens"] == 5 and c3["ts"] == 20000.0 and c3["cat"] == "prefill"
    inst = [e for e in ev if e["ph"] == "i"]
    assert [e["name"] for e in inst] == ["preempt C"]
    counters = {e["name"] for e in ev if e["ph"] == "C"}
    assert {"queue", "free KV blocks", "tokens"} <= counters
    flows = [e for e in ev if e.get("cat") == "flow"]
    assert len(flows) == len(tr.batch)  # one flow point per chunk
    starts = [e for e in flows if e["ph"] == "s"]
    ends = [e for e in flows if e["ph"] == "f"]
    assert len(starts) == 3 and len(ends) == 3  # one flow per request, each closed


def test_vtc_counters_exported():
    wl = generate(40, seed=2, arrival="poisson", rate=0.5, tenants={"a": 1, "b": 1},
                  config={"policy": "vtc", "num_gpu_blocks": 200, "max_num_seqs": 4})
    doc = chrome_trace(simulate(wl))
    fair = [e for e in doc["traceEvents"] if e.get("name") == "fairness counters"]
    assert fair and set(fair[-1]["args"]) == {"a", "b"}


def test_csv_round_trip():
    tr = lesson()
    back = pd.read_csv(io.BytesIO(table_csv(tr, "batch")))
    assert list(back.columns) == list(tr.batch.columns)
    assert back["tokens"].sum() == tr.batch["tokens"].sum()


LOGS = Path(__file__).resolve().parent / "fixtures" / "llama-logs"


def strict_json(data: bytes):
    """Parse as JSON that Perfetto accepts: NaN / Infinity are not JSON."""
    def refuse(name):
        raise ValueError(f"{name} in the export")
    return json.loads(data, parse_constant=refuse)


def test_flows_bind_to_their_own_slice():
    tr = lesson()
    ev = json.loads(chrome_trace_bytes(tr))["traceEvents"]
    slices = [e for e in ev if e["ph"] == "X"]
    flows = [e for e in ev if e.get("cat") == "flow"]
    for s, f in zip(slices, flows):   # each flow point follows its slice, inside it, on its track
        assert f["tid"] == s["tid"] and s["ts"] <= f["ts"] <= s["ts"] + s["dur"]
    ids = {}
    for s, f in zip(slices, flows):
        ids.setdefault(s["args"]["request"], set()).add(f["id"])
    assert all(len(v) == 1 for v in ids.values()) and len({min(v) for v in ids.values()}) == len(ids)


def test_rejections_are_instant_events():
    from sim.lessons.admission import QueueSetup
    setup = QueueSetup(p=0.44, queue_limit=4, ticks=2000)
    tr = simulate(setup.workload(), setup.config())
    rejected = int((tr.events["kind"] == "reject").sum())
    assert rejected > 0
    inst = [e for e in strict_json(chrome_trace_bytes(tr))["traceEvents"] if e["ph"] == "i"]
    assert sum(e["cat"] == "reject" for e in inst) == rejected
    assert all(e["tid"] == 0 for e in inst)


def test_llama_log_export_marks_what_the_server_did():
    from servers.llama_server import read_llama_log
    tr = read_llama_log(LOGS / "34af94cd9" / "s4_small_ctx_context_shift_on.log")
    doc = strict_json(chrome_trace_bytes(tr))
    assert doc["otherData"]["clock"] == "trace time"
    inst = [e for e in doc["traceEvents"] if e["ph"] == "i"]
    kinds = [e["cat"] for e in inst]
    assert kinds.count("context_shift") == int((tr.events["kind"] == "context_shift").sum()) > 0
    refused = [e for e in inst if e["cat"] == "error"]   # the task whose prompt exceeds the context
    assert len(refused) == 1 and "exceeds" in refused[0]["args"]["detail"]
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(slices) == len(tr.batch)


def test_export_of_a_log_with_and_without_timestamps_is_strict_json():
    """Two server runs in one file, the second without timestamps: the steps of that run have
    no times, so the document is drawn on the step index (before: NaN timestamps)."""
    from servers.llama_server import read_llama_log
    timed = (LOGS / "34af94cd9" / "s1_two_slots_chunked_prompt.log").read_bytes()
    untimed = (LOGS / "34af94cd9" / "s6_stream_cancel_seed601.log").read_bytes()
    path = Path(__import__("tempfile").mkdtemp()) / "two_runs.log"
    path.write_bytes(timed + untimed)
    tr = read_llama_log(path)
    assert tr.steps["start"].isna().any() and tr.steps["start"].notna().any()
    doc = strict_json(chrome_trace_bytes(tr))
    assert doc["otherData"]["clock"].startswith("step index")
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(slices) == len(tr.batch)
    by_step = {}
    for e in slices:
        by_step.setdefault(e["args"]["step"], e["ts"])
    assert all(by_step[s] == s * 1000.0 for s in by_step)
    assert any(e["ph"] == "i" and e["cat"] == "cancel" for e in doc["traceEvents"])
