"""A fleet's exports: the routing table as CSV, and one Chrome / Perfetto trace with a process
per replica (its slots, queues and markers, as sim.export draws one replica) and a router
process whose track marks every decision (the replica it picked and the rule) and counts each
replica's in-flight requests as the router saw them."""
from __future__ import annotations

import numpy as np

from ..export import chrome_trace
from ..jsonout import dumps_strict

ROUTER_PID = 1


def routes_csv(fleet) -> bytes:
    return fleet.routes.to_csv(index=False).encode()


def _in_flight_counts(routes, n: int) -> list[tuple[float, int, int]]:
    """(time, replica, in-flight count) at every dispatch and release."""
    ev = [(float(a), 0, int(r), 1) for a, r in zip(routes["arrival"], routes["replica"])]
    ev += [(float(t), -1, int(r), -1) for t, r in zip(routes["released"], routes["replica"]) if np.isfinite(t)]
    ev.sort()
    count = [0] * n
    out = []
    for t, _, r, d in ev:
        count[r] += d
        out.append((t, r, count[r]))
    return out


def fleet_chrome_trace(fleet, max_entries: int | None = None) -> dict:
    scale = 1000.0   # 1 ms of the fleet's clock -> 1000 us
    names = fleet.names
    ev: list[dict] = [{"ph": "M", "pid": ROUTER_PID, "name": "process_name", "args": {"name": "router"}},
                      {"ph": "M", "pid": ROUTER_PID, "name": "process_sort_index", "args": {"sort_index": 0}},
                      {"ph": "M", "pid": ROUTER_PID, "tid": 0, "name": "thread_name", "args": {"name": "decisions"}}]
    r = fleet.routes
    for row in r.itertuples(index=False):
        ev.append({"ph": "i", "pid": ROUTER_PID, "tid": 0, "s": "t", "ts": round(row.arrival * scale, 3),
                   "name": f"{row.request} -> {names[row.replica]}", "cat": str(row.reason),
                   "args": {"replica": int(row.replica), "reason": str(row.reason), "scores": str(row.scores or "")}})
    for t, rep, c in _in_flight_counts(r, fleet.num_replicas):
        ev.append({"ph": "C", "pid": ROUTER_PID, "name": f"in flight: {names[rep]}", "ts": round(t * scale, 3),
                   "args": {"requests": c}})
    for i, tr in enumerate(fleet.replicas):
        pid = ROUTER_PID + 1 + i
        doc = chrome_trace(tr, max_entries)
        for e in doc["traceEvents"]:
            e["pid"] = pid
            if e.get("name") == "process_name":
                e["args"] = {"name": names[i]}
        ev.append({"ph": "M", "pid": pid, "name": "process_sort_index", "args": {"sort_index": i + 1}})
        ev.extend(doc["traceEvents"])
    return {"traceEvents": ev, "displayTimeUnit": "ms",
            "otherData": {"source": fleet.meta.get("source"), "time_unit": fleet.time_unit, "replicas": names,
                          "router": (fleet.meta.get("settings") or {}).get("router"),
                          "note": "1 fleet time unit is drawn as 1 ms"}}


def fleet_chrome_trace_bytes(fleet, max_entries: int | None = None) -> bytes:
    return dumps_strict(fleet_chrome_trace(fleet, max_entries), separators=(",", ":")).encode()
