"""A real fleet replayed under a router policy: which replica would the policy have picked
for each request, beside the one that served it?

The input is one recorded replica per worker, in the router's worker order (a source such as
servers/vllm/fleet.py reads them): its Trace on the fleet's clock in ms, the requests it
served with their arrival at the router (the front end's receive time is the nearest the
recordings know), and optionally a cost model fitted on it.

- timing "recorded": the replicas are not simulated. The router's signals come from the
  recordings: its in-flight counts from where each request really went and when its response
  ended (the recorded finish + the response tail), the engine's queue, running count and KV use
  from the recorded step at or before each decision. The router is told where the real router
  sent each request (so one wrong guess does not change what it knows later): this checks the
  router's rule, decision by decision. The precise scorers' view of a replica's prefix cache is
  every full prompt block of the requests it had started by then (the recordings hold block ids,
  not hashes, and evictions are not replayed).
- timing "simulated": everything is predicted. The requests go through simulate_fleet with each
  replica's recorded config, the vLLM version's rules and sync or async scheduling as its
  recording says, and its fitted cost model; the policy routes them by itself.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..trace import Trace
from ..workload import Workload
from .fleet import FleetSettings, RoutingLoop, chain_hashes, simulate_fleet
from .routes import routes_frame
from .routers import make_router
from .routing import ROUTERS, ReplicaView
from .trace import FleetTrace

TIMINGS = ("recorded", "simulated")


@dataclass
class RecordedReplica:
    name: str
    trace: Trace            # the replica's recording as a Trace, times in ms on the fleet's clock
    requests: list          # sim.workload.Request it served: arrival_time = at the router; prompt ids
    cost: object = None     # a cost model fitted on this recording (timing "simulated")
    mode: dict = field(default_factory=dict)   # what its header says ran: vllm_version, async_scheduling


class RecordedBackend:
    """A recorded replica as the routing loop's backend: nothing is simulated."""

    def __init__(self, index: int, rep: RecordedReplica):
        self.index = index
        t = rep.trace
        s = t.steps
        cfg = t.meta.get("config") or {}
        self.block_size = int(cfg.get("block_size") or t.meta.get("block_size") or 16)
        usable = int(cfg.get("num_gpu_blocks") or t.meta.get("num_blocks") or 1) - 1
        self.starts = s["start"].to_numpy(dtype=float)
        self.waiting = s["waiting"].to_numpy(dtype=np.int64)
        self.running = s["running"].to_numpy(dtype=np.int64)
        fas = s["free_blocks_after_schedule"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
        self.used = np.where(np.isnan(fas), 0, usable - np.nan_to_num(fas)).astype(np.int64)
        r = t.requests
        self.finish_of = dict(zip(r["request"].astype(str), r["finish_time"].to_numpy(dtype=float)))
        self.first_of = dict(zip(r["request"].astype(str), r["first_token_time"].to_numpy(dtype=float)))
        started = r["first_scheduled_time"].to_numpy(dtype=float)
        order = np.argsort(np.where(np.isnan(started), np.inf, started), kind="stable")
        self.started_ids = [str(r["request"].iloc[k]) for k in order]
        self.started_at = started[order]
        self.prompts = {q.id: q for q in rep.requests}
        self.cache: set[int] = set()
        self.started_ptr = 0
        self.ptr = -1
        self.finished: list[tuple[str, float]] = []
        self.first_tokens: list[tuple[str, float]] = []
        self.view = ReplicaView(index, 0, 0, 0, 0.0, 0, usable, self.block_size)

    @property
    def next_start(self) -> float:
        nxt = self.ptr + 1
        return float(self.starts[nxt]) if nxt < len(self.starts) else math.inf

    def advance(self, until: float) -> None:
        self.ptr = int(np.searchsorted(self.starts, until, side="left")) - 1
        while self.started_ptr < len(self.started_at) and self.started_at[self.started_ptr] < until:
            q = self.prompts.get(self.started_ids[self.started_ptr])
            if q is not None:
                self.cache.update(chain_hashes(q.prompt_tokens(), self.block_size))
            self.started_ptr += 1

    def signals(self) -> tuple[int, int, int]:
        if self.ptr < 0:
            return 0, 0, 0
        p = self.ptr
        return int(self.waiting[p]), int(self.running[p]), int(self.used[p])

    def cached_blocks(self, hashes) -> int:
        n = 0
        for h in hashes:
            if h not in self.cache:
                break
            n += 1
        return n

    def dispatch(self, req) -> None:
        first = self.first_of.get(req.id, math.nan)
        if not math.isnan(first):
            self.first_tokens.append((req.id, first))
        end = self.finish_of.get(req.id, math.nan)
        if not math.isnan(end):
            self.finished.append((req.id, end))


def _served(replicas: list[RecordedReplica]) -> tuple[list, dict]:
    reqs, served = [], {}
    for i, rep in enumerate(replicas):
        for q in rep.requests:
            if served.get(q.id) == i:   # a duplicated add line: not a second replica's request
                raise ValueError(f"request {q.id} is added twice in the recording of {rep.name}; a request is "
                                 "added once (a line written twice?)")
            if q.id in served:
                raise ValueError(f"request {q.id} is in the recordings of both {replicas[served[q.id]].name} and "
                                 f"{rep.name}; each request is served by one replica")
            served[q.id] = i
            reqs.append(q)
    order = sorted(range(len(reqs)), key=lambda k: (reqs[k].arrival_time, k))
    return [reqs[k] for k in order], served


def replay(replicas: list[RecordedReplica], settings: FleetSettings, timing: str = "recorded") -> FleetTrace:
    """The real fleet with `settings.router`'s prediction for every request (see the module)."""
    if timing not in TIMINGS:
        raise ValueError(f"timing must be recorded or simulated, not {timing!r}")
    if not replicas:
        raise ValueError("a fleet needs at least one recording")
    s = FleetSettings(**{**settings.__dict__, "replicas": len(replicas)}).check()
    reqs, served = _served(replicas)
    names = [r.name for r in replicas]
    if timing == "recorded":
        router = make_router(s.router, s.replicas, s.router_config, s.seed)
        backends = [RecordedBackend(i, rep) for i, rep in enumerate(replicas)]
        loop = RoutingLoop(backends, s, router)
        predicted, why = [], []
        for q in reqs:
            d = loop.route(q, target=served[q.id])
            predicted.append(d.replica)
            why.append(d.reason)
        loop.finish()
        loop.rows["served"] = list(loop.rows["replica"])
        loop.rows["predicted"] = predicted
        loop.rows["predicted_reason"] = why
        routes = loop.table()
        traces = [rep.trace for rep in replicas]
        busy = [float((t.steps["end"] - t.steps["start"])[~t.steps["idle"].astype(bool)].sum()) for t in traces]
        meta = {"source": "recorded", "time_unit": "ms", "names": names, "timing": timing,
                "settings": s.to_json(), "router_defaults": dict(router.config), "busy_time": busy,
                "num_requests": len(reqs)}
        return FleetTrace(routes=routes, replicas=traces, meta=meta)
    # each replica's recorded settings, simulated under the rules (version, sync or async) it ran with
    configs = [{**(rep.trace.meta.get("config") or {}), **rep.mode} for rep in replicas]
    costs = [rep.cost for rep in replicas]
    if any(c is None for c in costs):
        raise ValueError("timing simulated needs a cost model fitted on every recording")
    wl = Workload(list(reqs), {}, name="recorded fleet")
    fleet = simulate_fleet(wl, FleetSettings(**{**s.__dict__, "replica_configs": configs}), costs=costs)
    fleet.routes["served"] = fleet.routes["request"].map(served).astype(np.int64)
    fleet.routes["predicted"] = fleet.routes["replica"].to_numpy()
    fleet.routes["predicted_reason"] = fleet.routes["reason"].to_numpy()
    fleet.meta.update({"source": "simulated from recordings", "names": names, "timing": timing})
    return fleet


def agreement(fleet: FleetTrace) -> dict:
    """How many requests the policy sent where the real router did; and, where some of the
    policy's picks were its own random draw (a random router, a tie drawn: Router.drawn), how
    many (`drawn`) and the agreement over the others (`by_rule`): a real router draws its own, so
    a drawn pick agrees only by chance."""
    r = fleet.routes
    n = int(len(r))
    if "predicted" not in r or "served" not in r:
        return {"requests": n, "agree": None, "agreement": None}
    same = r["predicted"].to_numpy() == r["served"].to_numpy()
    agree = int(same.sum())
    out = {"requests": n, "agree": agree, "agreement": agree / n if n else None}
    cls = ROUTERS.get((fleet.meta.get("settings") or {}).get("router"))
    if cls is not None and "predicted_reason" in r:
        drawn = np.isin(r["predicted_reason"].astype(str).to_numpy(), sorted(cls.drawn(len(fleet.replicas))))
        k, kept = int(n - drawn.sum()), int(same[~drawn].sum())
        out["drawn"] = n - k
        out["by_rule"] = {"requests": k, "agree": kept, "agreement": kept / k if k else None}
    return out


def recorded_fleet(replicas: list[RecordedReplica]) -> FleetTrace:
    """The real fleet as it ran, without a policy: the routing table says which replica served
    each request (reason "recorded") and when its response left that replica."""
    reqs, served = _served(replicas)
    finish = {}
    for rep in replicas:
        r = rep.trace.requests
        finish.update(zip(r["request"].astype(str), r["finish_time"].to_numpy(dtype=float)))
    rows = {"request": [q.id for q in reqs], "tenant": [q.tenant for q in reqs],
            "prompt_len": [q.prompt_len for q in reqs], "arrival": [float(q.arrival_time) for q in reqs],
            "replica": [served[q.id] for q in reqs], "reason": ["recorded"] * len(reqs),
            "candidates": [""] * len(reqs), "scores": [""] * len(reqs), "detail": [""] * len(reqs),
            "reached": [float(q.arrival_time) for q in reqs], "released": [finish.get(q.id, math.nan) for q in reqs],
            "served": [served[q.id] for q in reqs]}
    traces = [rep.trace for rep in replicas]
    meta = {"source": "recorded", "time_unit": "ms", "names": [r.name for r in replicas], "timing": "recorded",
            "num_requests": len(reqs)}
    return FleetTrace(routes=routes_frame(rows), replicas=traces, meta=meta)
