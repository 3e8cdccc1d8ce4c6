"""Check the compact Trace against the code before it: every source's Trace gives the same
metrics, the same tables (values; int widths and categorical text normalised), the same file bytes,
the same block maps and the same page pictures (figure JSON, typed arrays decoded to values).

  mkdir /tmp/old-A && git -C . archive HEAD | tar -x -C /tmp/old-A     # a read-only copy of the old code
  python bench/check_compact_trace.py --old /tmp/old-A                  # PASS / FAIL per source

Each side runs in its own process over the same inputs (the built-in scenarios, a fleet scenario,
the bundled vLLM recordings, llama-server logs and server logs, a trace saved and loaded) and
writes what it saw to a pickle; this script compares the two, value for value.
"""
from __future__ import annotations

import argparse
import base64
import gzip
import hashlib
import math
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


# -- one side: what its code makes of every source ------------------------------------------------

def _plain(v):
    """A value for comparison: numpy and pandas scalars as Python ones, NaN/NA as None."""
    import numpy as np
    import pandas as pd
    if isinstance(v, dict):
        if "bdata" in v and "dtype" in v:   # plotly's typed array: its values, whatever the width
            a = np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
            if "shape" in v:
                a = a.reshape([int(s) for s in str(v["shape"]).split(",")])
            return _plain(a.tolist())
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, np.ndarray):
        return _plain(v.tolist())
    if v is None or v is pd.NA or v is pd.NaT:
        return None
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**53:
        return v   # kept a float: 3.0 and 3 compare equal anyway
    return v


def _frame(df):
    """A DataFrame as (columns, index, rows of plain values)."""
    import numpy as np
    cols = [str(c) for c in df.columns]
    data = {str(c): _plain(np.asarray(df[c].to_numpy(dtype=object), dtype=object).tolist()) for c in df.columns}
    return {"columns": cols, "index": _plain(list(df.index)), "data": data}


def _fig(fig):
    import plotly.io as pio
    import json
    return _plain(json.loads(pio.to_json(fig, validate=False)))


def _trace_view(tr, steps=None) -> dict:
    from sim.metrics import per_request, summary, token_gaps
    from sim.trace import TABLES
    out = {"summary": _plain(summary(tr)), "per_request": _frame(per_request(tr)), "token_gaps": _frame(token_gaps(tr)),
           "bytes": hashlib.sha256(tr.to_bytes()).hexdigest()}
    out["tables"] = {name: _frame(getattr(tr, name)) for name in TABLES}
    n = tr.num_steps
    picks = sorted({s for s in (steps or [1, max(1, n // 3), max(1, n // 2), max(1, (2 * n) // 3), n]) if s >= 1})
    out["block_map"] = {s: _plain(list(tr.block_map(s))) for s in picks}
    out["batch_at"] = {s: _frame(tr.batch_at(s)) for s in picks}
    figs = {}
    try:
        from figures import playback as pb
        figs["occupancy"] = _fig(pb.occupancy_figure(tr))
        figs["step_tokens"] = _fig(pb.step_tokens_figure(tr))
        for s in picks:
            figs[f"kv_map@{s}"] = _fig(pb.kv_map_figure(tr, s))
            a, b = pb.inspector_tables(tr, s)
            figs[f"inspector@{s}"] = [_frame(a), _frame(b)]
    except Exception as e:   # a builder that fails on one side is a difference, not a stop
        figs["error"] = f"{type(e).__name__}: {e}"
    src = tr.meta.get("source", "")
    try:
        if "llama" in str(src):   # the llama-server log page's pictures
            from figures import llamalog as ll
            figs["ll_batch"] = _fig(ll.batch_figure(tr))
            figs["ll_call_time"] = _fig(ll.call_time_figure(tr))
            figs["ll_lanes"] = _fig(ll.slot_lanes_figure(tr))
            figs["ll_tasks"] = _frame(ll.task_table(tr))
            figs["ll_task_runs"] = _frame(ll.task_runs(tr))
            for s in picks:
                a, b, c = ll.call_tables(tr, s)
                figs[f"ll_call@{s}"] = [_frame(a), _frame(b), _plain(c)]
        if "log" in str(src) and "llama" not in str(src):   # the server log page's
            from figures import serverlog as sl
            figs["sl_batches"] = _fig(sl.batch_timeline(tr))
            figs["sl_gauges"] = _fig(sl.gauges_figure(tr))
    except Exception as e:
        figs["error_logs"] = f"{type(e).__name__}: {e}"
    out["figures"] = figs
    out["source"] = str(src)
    return out


def _sources():
    """(name, thunk giving a Trace or a FleetTrace, extra figure builders)."""
    from sim import scenarios
    from sim.simulate import simulate
    out = []
    for key in scenarios.SCENARIOS:
        out.append((f"scenario:{key}", lambda key=key: simulate(scenarios.workload(key))))
    # the knobs a page turns that change which tables hold whom: a queue limit (rejected ids only
    # in events), swap preemption, static batching (padding rows), llama-server slots, a VTC policy
    for key, cfg in (("preemption_pressure", {"max_queued_requests": 2}),
                     ("preemption_pressure", {"preemption_mode": "swap"}),
                     ("random_500", {"scheduler": "static"}), ("two_tenants", {"scheduler": "llama_slots"}),
                     ("tenant_flood", {"policy": "vtc"}), ("prefix_sharing", {"async_scheduling": True})):
        out.append((f"scenario:{key} {cfg}", lambda key=key, cfg=cfg: simulate(scenarios.workload(key), cfg)))
    out.append(("scenario:lesson_abc saved+loaded",
                lambda: __import__("sim.trace", fromlist=["Trace"]).Trace.from_bytes(
                    simulate(scenarios.workload("lesson_abc")).to_bytes())))
    for p in sorted((ROOT / "samples" / "vllm").glob("*.jsonl.gz")):
        def rec(p=p):
            from servers.vllm.recording import read_recording, to_trace
            return to_trace(read_recording(str(p)))
        out.append((f"vllm:{p.name}", rec))
    for p in sorted((ROOT / "samples" / "llama-logs").glob("*.log.gz")):
        def llama(p=p):
            from servers.llama_server.reader import read_llama_log
            return read_llama_log(str(p))
        out.append((f"llama:{p.name}", llama))
    for p in sorted((ROOT / "samples" / "server-logs").glob("*.log.gz")):
        def slog(p=p):
            from servers.server_log import read_log
            return read_log(str(p), p.name).trace
        out.append((f"server_log:{p.name}", slog))
    out.append(("fleet:chat", _fleet_chat))
    return out


def _fleet_chat():
    from sim.fleet.fleet import simulate_fleet
    from sim.fleet.scenarios import get_fleet_scenario
    sc = get_fleet_scenario("chat")
    return simulate_fleet(sc.workload(), sc.a, sc.config)


def _fleet_view(fleet) -> dict:
    from figures import fleet as ff
    from sim.fleet.trace import FleetTrace
    out = {"bytes": hashlib.sha256(fleet.to_bytes()).hexdigest(), "routes": _frame(fleet.routes),
           "replicas": [_trace_view(t) for t in fleet.replicas]}
    figs = {}
    t0, t1 = ff.fleet_span(fleet)
    for t in (t0, (t0 + t1) / 2, t1):
        figs[f"lanes@{t:.6g}"] = _fig(ff.lanes_figure(fleet, t))
        figs[f"signals@{t:.6g}"] = _fig(ff.signals_figure(fleet, t))
        figs[f"fleet_at@{t:.6g}"] = _frame(ff.fleet_at(fleet, t))
    figs["routing_table"] = _frame(ff.routing_table(fleet))
    out["figures"] = figs
    back = FleetTrace.from_bytes(fleet.to_bytes())
    out["loaded_bytes"] = hashlib.sha256(back.to_bytes()).hexdigest()
    return out


def emit(path: str) -> None:
    sys.path.insert(0, os.getcwd())
    res = {}
    for name, make in _sources():
        t0 = time.perf_counter()
        try:
            obj = make()
            res[name] = _fleet_view(obj) if hasattr(obj, "routes") else _trace_view(obj)
        except Exception as e:
            res[name] = {"error": f"{type(e).__name__}: {e}"}
        res[name]["_seconds"] = time.perf_counter() - t0
    with open(path, "wb") as f:
        pickle.dump(res, f)


# -- the comparison --------------------------------------------------------------------------------

def _diff(a, b, where="") -> str | None:
    """The first place two plain values differ (None when equal; floats to the bit)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k == "_seconds":
                continue
            if k not in a or k not in b:
                return f"{where}/{k}: only in {'new' if k in b else 'old'}"
            d = _diff(a[k], b[k], f"{where}/{k}")
            if d:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{where}: length {len(a)} (old) != {len(b)} (new)"
        for i, (x, y) in enumerate(zip(a, b)):
            d = _diff(x, y, f"{where}[{i}]")
            if d:
                return d
        return None
    if a != b:
        return f"{where}: {str(a)[:120]!r} (old) != {str(b)[:120]!r} (new)"
    return None


def _errors(v, where=""):
    """(path, message) of every builder that failed (its "error" keys)."""
    if isinstance(v, dict):
        for k, x in v.items():
            if k in ("error", "error_logs"):
                yield where, x
            else:
                yield from _errors(x, f"{where}/{k}")
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from _errors(x, f"{where}[{i}]")


def side(root: str, out: str) -> float:
    env = dict(os.environ, PYTHONPATH=root)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, str(Path(__file__).resolve()), "--emit", out], cwd=root, env=env, check=True)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", default="/tmp/old-A", help="a read-only copy of the old code (git archive HEAD)")
    ap.add_argument("--emit", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.emit:
        emit(args.emit)
        return 0
    if not Path(args.old, "sim", "trace.py").exists():
        print(f"no old code at {args.old}: mkdir {args.old} && git -C {ROOT} archive HEAD | tar -x -C {args.old}")
        return 2
    with open("/proc/loadavg") as f:
        print(f"load {f.read().split()[0]}", flush=True)
    with tempfile.TemporaryDirectory() as d:
        t_old = side(args.old, f"{d}/old.pkl")
        t_new = side(str(ROOT), f"{d}/new.pkl")
        old, new = (pickle.load(open(f"{d}/{w}.pkl", "rb")) for w in ("old", "new"))
    failed = 0
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name), new.get(name)
        d = "missing on one side" if a is None or b is None else _diff(a, b)
        if d is None and "error" in a:
            d = f"both failed: {a['error']}"
        failed += d is not None
        for where, err in _errors(b or {}):
            print(f"NOTE {name}{where}: a builder failed on both sides alike: {err}")
        secs = f"{a['_seconds']:.2f} s old, {b['_seconds']:.2f} s new" if a and b else ""
        print(f"{'PASS' if d is None else 'FAIL'} {name} ({secs}){'' if d is None else ': ' + d}", flush=True)
    print(f"{len(set(old) | set(new)) - failed} of {len(set(old) | set(new))} sources the same "
          f"(old side {t_old:.0f} s, new side {t_new:.0f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
