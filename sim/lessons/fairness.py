"""Tenant fairness: the four schedulers of the lesson's Example 9 plus VTC, compared on the same
arrivals, and the numbers the Tenants page shows.

- ``policy_configs``: FCFS, round-robin by tenant, round-robin with a per-tenant running cap
  (the lesson's "cap") and the Virtual Token Counter, as scheduler config overrides.
- ``request_segments``: each request's timeline as waiting / running segments (a Gantt).
- ``waiting_backlog``: steps x tenants, True where a tenant has a request waiting (arrived, not
  finished, not in that step's batch) -- "backlogged" in the VTC paper's sense.
- ``service_gap``: the largest difference in weighted service two tenants received over any
  interval in which both were backlogged, and its running value step by step.
- ``vtc_bound``: Sheng et al.'s bound on that difference under VTC.
- ``jain_backlogged``: Jain's index of the service rates while tenants compete.
- ``flood_workload``: a flooding tenant against a light one, where the four policies differ
  (defined in sim.scenarios, whose tenant_flood scenario it is).

Service is VTC's cost function (sim.metrics.tenant_service): ``w_in`` per prompt token
computed, ``w_out`` per token generated; recomputation after a preemption is not service.

The bound (Y. Sheng, S. Cao, D. Li, B. Zhu, Z. Li, D. Zhuo, J. E. Gonzalez, I. Stoica,
"Fairness in Serving Large Language Models", OSDI 2024, arXiv:2401.00588): for two clients
backlogged over an interval, VTC keeps ``|W_f - W_g| <= 2 * max(w_in * L_input, w_out * M)``,
with ``L_input`` the longest prompt and ``M`` the most tokens the running batch can hold. The
argument: the scheduler always admits the backlogged client with the lowest counter, and no
counter can run further ahead of the lowest than one admission (``w_in * L_input``) or what the
running batch generates before it must free room (``w_out * M``).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..metrics import jain_index, tenant_service
from ..scenarios import flood_workload  # noqa: F401  (the Tenants page's; a core scenario too)
from ..trace import Trace
from ..workload import Workload

POLICY_ORDER = ("fcfs", "round_robin", "cap", "vtc")
POLICY_TITLES = {"fcfs": "FCFS", "round_robin": "Round-robin by tenant", "cap": "Round-robin + per-tenant cap",
                 "vtc": "VTC (Virtual Token Counter)"}


def policy_configs(cap: int = 3, w_in: float = 1.0, w_out: float = 2.0) -> dict[str, dict]:
    """Config overrides of the four compared schedulers. "cap" is the lesson's: round-robin by
    tenant with at most ``cap`` running requests per tenant."""
    return {"fcfs": {"policy": "fcfs", "tenant_cap": 0},
            "round_robin": {"policy": "round_robin", "tenant_cap": 0},
            "cap": {"policy": "round_robin", "tenant_cap": int(cap)},
            "vtc": {"policy": "vtc", "tenant_cap": 0, "vtc_w_in": float(w_in), "vtc_w_out": float(w_out)}}


# ---------------------------------------------------------------------------------------------
# Timelines
# ---------------------------------------------------------------------------------------------

def request_segments(trace: Trace) -> pd.DataFrame:
    """Each request's life as segments on the step axis (step s spans [s-1, s]):
    request, tenant, state ("waiting" or "running"), start, end, steps.

    Running: consecutive steps in which the request was in the batch. Waiting: from its
    arrival (it joins before step arrival_step+1, i.e. at arrival_step) to its first step, and
    any gap between runs (after a preemption). Rejected requests have no segments. Rows are
    in workload order, each request's segments in time order.
    """
    r = trace.requests
    names = r["request"].astype(str).to_numpy()
    b = trace.batch
    code = pd.Categorical(b["request"].astype(str), categories=names).codes.astype(np.int64)
    step = b["step"].to_numpy(dtype=np.int64)
    ok = code >= 0
    code, step = code[ok], step[ok]
    order = np.lexsort((step, code))
    code, step = code[order], step[order]
    keep = np.ones(len(code), dtype=bool)
    keep[1:] = (code[1:] != code[:-1]) | (step[1:] != step[:-1])  # one row per (request, step)
    code, step = code[keep], step[keep]
    new = np.ones(len(code), dtype=bool)
    new[1:] = (code[1:] != code[:-1]) | (step[1:] != step[:-1] + 1)
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(code) - 1)
    rc, rs, re = code[first], step[first] - 1, step[last]
    # waiting before each run: since the previous run of the request, or since its arrival
    arrival = r["arrival_step"].astype("Float64").to_numpy(dtype=float, na_value=0.0).astype(np.int64)
    same = np.zeros(len(rc), dtype=bool)
    same[1:] = rc[1:] == rc[:-1]
    ws = np.where(same, np.concatenate([[0], re[:-1]]), arrival[rc])
    waiting = ws < rs
    codes = np.concatenate([rc[waiting], rc])
    starts = np.concatenate([ws[waiting], rs])
    ends = np.concatenate([rs[waiting], re])
    state = np.concatenate([np.full(int(waiting.sum()), "waiting", dtype=object), np.full(len(rc), "running", dtype=object)])
    o = np.lexsort((starts, codes))
    codes, starts, ends, state = codes[o], starts[o], ends[o], state[o]
    tenants = r["tenant"].astype(str).to_numpy()
    return pd.DataFrame({"request": names[codes], "tenant": tenants[codes], "state": state,
                         "start": starts, "end": ends, "steps": ends - starts})


def waiting_backlog(trace: Trace) -> pd.DataFrame:
    """Steps x tenants (sorted): True where the tenant had a request waiting during the step --
    arrived, unfinished and not in the step's batch. The VTC paper's "backlogged": the tenant
    asks for more service than it is getting."""
    steps = trace.steps["step"].to_numpy(dtype=np.int64)
    tenants = sorted(trace.requests["tenant"].astype(str).unique())
    out = {t: np.zeros(len(steps) + 1, dtype=np.int64) for t in tenants}
    seg = request_segments(trace)
    w = seg[seg["state"].to_numpy() == "waiting"]
    # waiting over [start, end] on the axis = steps start+1 .. end
    for t, g in w.groupby("tenant", sort=False):
        a = np.searchsorted(steps, g["start"].to_numpy() + 1)
        e = np.searchsorted(steps, g["end"].to_numpy(), side="right")
        np.add.at(out[t], a, 1)
        np.add.at(out[t], e, -1)
    return pd.DataFrame({t: np.cumsum(v)[: len(steps)] > 0 for t, v in out.items()},
                        index=pd.Index(steps, name="step"))


def service_per_step(trace: Trace, w_in: float = 1.0, w_out: float = 2.0) -> pd.DataFrame:
    """Steps x tenants: the weighted service each tenant received in each step."""
    cum = tenant_service(trace, w_in, w_out)
    tenants = sorted(trace.requests["tenant"].astype(str).unique())
    cum = cum.reindex(columns=tenants, fill_value=0.0)
    return cum.diff().fillna(cum)


# ---------------------------------------------------------------------------------------------
# Service gap, its bound, Jain's index
# ---------------------------------------------------------------------------------------------

def service_gap(trace: Trace, w_in: float = 1.0, w_out: float = 2.0) -> dict:
    """The largest |W_f(t1,t2) - W_g(t1,t2)| over pairs of tenants and intervals [t1, t2] in
    which both were backlogged (``waiting_backlog``), where W is weighted service.

    Returns {"gap": the largest (0.0 if no two tenants were ever backlogged together),
    "pair": (f, g) or None, "interval": (first step, last step) of the worst interval or None,
    "series": pd.Series over steps -- the gap reached so far within the backlogged interval
    each step belongs to (the largest over pairs; 0 where no two tenants are backlogged)}.
    """
    svc = tenant_service(trace, w_in, w_out)
    bl = waiting_backlog(trace)
    steps = bl.index.to_numpy()
    tenants = list(bl.columns)
    svc = svc.reindex(index=steps, columns=tenants, fill_value=0.0)
    series = np.zeros(len(steps))
    best = {"gap": 0.0, "pair": None, "interval": None}
    for i, f in enumerate(tenants):
        for g in tenants[i + 1:]:
            both = (bl[f] & bl[g]).to_numpy()
            if not both.any():
                continue
            d = (svc[f] - svc[g]).to_numpy(dtype=float)
            prev = np.concatenate([[0.0], d[:-1]])  # difference before each step
            start = both & ~np.concatenate([[False], both[:-1]])
            run_id = np.cumsum(start)
            idx = np.flatnonzero(both)
            frame = pd.DataFrame({"run": run_id[idx], "d": d[idx], "p": prev[idx]})
            # the range of the difference over the interval so far, the value before it included
            hi = np.maximum(frame.groupby("run")["d"].cummax(), frame.groupby("run")["p"].transform("first"))
            lo = np.minimum(frame.groupby("run")["d"].cummin(), frame.groupby("run")["p"].transform("first"))
            gap = (hi - lo).to_numpy()
            series[idx] = np.maximum(series[idx], gap)
            k = int(np.argmax(gap))
            if gap[k] > best["gap"]:
                run = frame["run"].to_numpy() == frame["run"].iloc[k]
                first = int(steps[idx[run][0]])
                last = int(steps[idx[run][-1]])
                best = {"gap": float(gap[k]), "pair": (f, g), "interval": (first, last)}
    best["series"] = pd.Series(series, index=pd.Index(steps, name="step"), name="gap")
    return best


def batch_token_capacity(workload: Workload, config: dict) -> int:
    """M in the VTC bound: the most tokens the running batch can hold -- the KV cache's usable
    tokens ((num_gpu_blocks - 1) * block_size; block 0 is vLLM's null block), or max_num_seqs
    times the longest request (prompt + output) if that is smaller."""
    from ..simulate import resolve_config

    cfg, _ = resolve_config(workload, config)
    kv = (cfg.num_gpu_blocks - 1) * cfg.block_size
    longest = max((r.prompt_len + r.max_tokens for r in workload.requests), default=0)
    return int(min(kv, cfg.max_num_seqs * longest))


def vtc_bound(workload: Workload, config: dict, w_in: float = 1.0, w_out: float = 2.0) -> dict:
    """Sheng et al.'s bound on the service gap of two backlogged tenants under VTC:
    {"L_input", "M", "U": max(w_in * L_input, w_out * M), "bound": 2 * U}."""
    l_in = max((r.prompt_len for r in workload.requests), default=0)
    m = batch_token_capacity(workload, config)
    u = max(w_in * l_in, w_out * m)
    return {"L_input": int(l_in), "M": m, "U": float(u), "bound": float(2 * u)}


def jain_backlogged(trace: Trace, w_in: float = 1.0, w_out: float = 2.0) -> float:
    """Jain's index (sim.metrics.jain_index) of the tenants' service rates while they compete:
    each tenant's service per step over the steps in which it and at least one other tenant
    were backlogged. 1 = equal rates; 1/n = one tenant got everything. NaN if tenants never
    competed. (Over a whole run Jain's index of total service only says who asked for more.)"""
    bl = waiting_backlog(trace)
    per = service_per_step(trace, w_in, w_out).reindex(index=bl.index, columns=bl.columns, fill_value=0.0)
    n_bl = bl.sum(axis=1).to_numpy()
    rates = []
    for t in bl.columns:
        comp = bl[t].to_numpy() & (n_bl >= 2)
        if comp.any():
            rates.append(float(per[t].to_numpy()[comp].mean()))
    if len(rates) < 2:
        return math.nan
    return jain_index(rates)


def tenant_finishes(trace: Trace, tenant: str) -> list[tuple[str, int]]:
    """[(request, finish step)] of ``tenant``'s finished requests, in the lesson's print order:
    by finish step, and among requests finishing together the later-admitted first."""
    r = trace.requests
    r = r[(r["tenant"] == tenant).to_numpy() & r["finish_step"].notna().to_numpy()]
    rows = sorted(zip(r["finish_step"], r["first_scheduled_step"], range(len(r)), r["request"]),
                  key=lambda x: (int(x[0]), -int(x[1]), -x[2]))
    return [(str(rid), int(f)) for f, _, _, rid in rows]


def state_at(trace: Trace, step: int, w_in: float = 1.0, w_out: float = 2.0) -> pd.DataFrame:
    """Per tenant at ``step``: requests running (in the step's batch), waiting, finished by then,
    weighted service so far, and the VTC counter after the step (NaN if the run kept none)."""
    tenants = sorted(trace.requests["tenant"].astype(str).unique())
    req_tenant = trace.requests.set_index("request")["tenant"].astype(str)
    b = trace.batch
    here = b.loc[b["step"].to_numpy() == step, "request"].drop_duplicates().map(req_tenant)
    seg = request_segments(trace)
    w = seg[(seg["state"].to_numpy() == "waiting") & (seg["start"].to_numpy() < step)
            & (seg["end"].to_numpy() >= step)]
    fin = trace.requests["finish_step"].astype("Float64").to_numpy(dtype=float, na_value=np.inf) <= step
    svc = tenant_service(trace, w_in, w_out)
    upto = svc[svc.index <= step]
    c = trace.counters
    c = c[c["step"].to_numpy() <= step]
    last = c.groupby("tenant")["value"].last() if len(c) else pd.Series(dtype=float)
    return pd.DataFrame({
        "tenant": tenants,
        "running": [int((here == t).sum()) for t in tenants],
        "waiting": [int((w["tenant"] == t).sum()) for t in tenants],
        "finished": [int((fin & (req_tenant.to_numpy() == t)).sum()) for t in tenants],
        "service": [float(upto[t].iloc[-1]) if len(upto) and t in upto else 0.0 for t in tenants],
        "counter": [float(last.get(t, np.nan)) for t in tenants],
    })


def first_divergence(runs: dict[str, Trace]) -> int:
    """The first step at which the runs' batches hold different numbers of requests per tenant
    (where the policies start to differ); the first step if they never do."""
    tabs = []
    for tr in runs.values():
        b = tr.batch[["step", "request"]].drop_duplicates()
        t = b["request"].map(tr.requests.set_index("request")["tenant"])
        tabs.append(pd.crosstab(b["step"], t))
    steps = sorted(set().union(*(set(x.index) for x in tabs)))
    cols = sorted(set().union(*(set(x.columns) for x in tabs)))
    tabs = [x.reindex(index=steps, columns=cols, fill_value=0).to_numpy() for x in tabs]
    for i, s in enumerate(steps):
        if any((x[i] != tabs[0][i]).any() for x in tabs[1:]):
            return int(s)
    return int(steps[0]) if steps else 1


def compare_summary(runs: dict[str, Trace], bound: float, w_in: float = 1.0, w_out: float = 2.0,
                    focus: str | None = None, gaps: dict[str, dict] | None = None) -> pd.DataFrame:
    """One row per run: the focus tenant's finish steps, its mean latency (steps from arrival to
    finish), the largest service gap and whether it is within ``bound``, Jain's index while
    competing, and the step the last request finished. ``gaps``: each run's service_gap with
    the same weights, when the caller has them already."""
    rows = []
    for key, tr in runs.items():
        r = tr.requests
        lat = (r["finish_step"].astype("Float64") - r["arrival_step"].astype("Float64")).to_numpy(
            dtype=float, na_value=np.nan)
        mine = (r["tenant"] == focus).to_numpy() if focus else np.zeros(len(r), dtype=bool)
        finishes = tenant_finishes(tr, focus) if focus else []
        gap = (gaps[key] if gaps is not None else service_gap(tr, w_in, w_out))["gap"]
        rows.append({"policy": key,
                     "focus_finishes": " ".join(f"{rid}@{f}" for rid, f in finishes[:6])
                     + (" …" if len(finishes) > 6 else ""),
                     "focus_mean_latency": float(np.nanmean(lat[mine])) if mine.any() else math.nan,
                     "others_mean_latency": float(np.nanmean(lat[~mine])) if (~mine).any() else math.nan,
                     "max_gap": gap, "within_bound": gap <= bound,
                     "jain": jain_backlogged(tr, w_in, w_out),
                     "last_finish": int(r["finish_step"].astype("Float64").max()) if len(r) else 0})
    return pd.DataFrame(rows)
