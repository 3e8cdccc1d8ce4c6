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
    assert names == {f"slot {s}" for s in tr.batch["slot"].unique()}
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
