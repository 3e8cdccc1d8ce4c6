"""A real fleet (servers.vllm.fleet.read_fleet) as the fleet core replays it: one
sim.fleet.recorded.RecordedReplica per replica, and the router's response tail fitted on the
recordings."""
from __future__ import annotations

import dataclasses

import numpy as np

from sim.fleet.recorded import RecordedReplica

from .compare import fit_cost_trace
from .fleet import RealFleet


def recorded_replicas(real: RealFleet, with_costs: bool = False) -> list[RecordedReplica]:
    """Each replica's Trace and the requests it served, their arrival_time the front end's arrival
    on the fleet clock (the nearest the recordings come to when the router decided); with_costs:
    a cost model fitted on each replica's own recording (for timing "simulated"). Each carries the
    rules its header says it ran under (FleetReplica.mode: vLLM version, async scheduling)."""
    arrival = {q.id: q.arrival for q in real.requests}
    out = []
    for rep in real.replicas:
        reqs = []
        for r in rep.workload.requests:
            a = arrival.get(r.id)
            reqs.append(dataclasses.replace(r, arrival_time=r.arrival_time if a is None else a, arrival_step=0))
        cost = None
        if with_costs:
            unruled = (rep.decisions or {}).get("not_simulated")
            if unruled:   # no rules for its vLLM, or no pool and batch sizes: nothing to simulate it with
                raise ValueError(f"{rep.name}: {unruled}, so timing simulated cannot run (timing recorded can)")
            try:
                cost = fit_cost_trace(rep.own_trace)
            except ValueError as e:
                raise ValueError(f"{rep.name}: no cost model can be fitted on it ({e})") from None
        out.append(RecordedReplica(rep.name, rep.trace, reqs, cost, dict(rep.mode)))
    return out


def response_tail_ms(real: RealFleet) -> float:
    """The router's response tail, fitted on the recordings: the median time a request spent in
    vLLM's front end before the scheduler got it (arrival -> added). The way out (detokenizing,
    streaming the last event, the router passing it on) goes through the same front end; the
    recordings see only the way in. 0 when no request has both times (an arrival off the
    recorder's clock is not one: the reader let it go)."""
    d = np.array([q.added - q.arrival for q in real.requests
                  if q.added is not None and q.arrival is not None and q.arrival_recorded], dtype=float)
    d = d[np.isfinite(d) & (d >= 0)]
    return float(np.median(d)) if len(d) else 0.0
