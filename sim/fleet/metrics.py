"""A fleet's numbers: everything `sim run` reports, for the whole fleet and per replica, and
what only a fleet has (prefix-cache hit rate, load imbalance, how requests were split).

The fleet's own row is sim.metrics.summary over the replicas' runs put end to end in one
Digest: latencies and percentiles over every request, tokens and cached prompt tokens summed,
duration from the first step to the last on the shared clock. Each replica's steps keep their
own numbers within it (offset in the joined table), so per-step counts add up; fairness between
tenants (jain_index, max_service_gap) is a per-replica idea and is left out of the fleet row.
Waits, TTFT and E2E run from each request's arrival at the router (a simulated fleet's
router_latency taken in, as a client measures them; from_router).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..digest import Digest
from ..metrics import digest_of, per_request, summary
from ..trace import Trace

STEP_COLUMNS_OF_REQUESTS = ("arrival_step", "first_scheduled_step", "first_token_step", "finish_step")


def _digest(t) -> Digest:
    return t if isinstance(t, Digest) else digest_of(t)


def router_latency(fleet) -> float:
    """How long a simulated fleet's requests took from the router to their replica (0 for a
    recorded fleet, whose replicas' runs are the recordings)."""
    if fleet.meta.get("source") not in ("simulator", "simulated from recordings"):
        return 0.0
    return float((fleet.meta.get("settings") or {}).get("router_latency") or 0.0)


def from_router(t, latency: float):
    """A replica's run with each request's arrival at the router, not at the replica: what a
    client measures (the fleet's waits, TTFT and E2E take in the router's latency). `t` itself
    when the latency is 0."""
    if not latency:
        return t
    from dataclasses import replace
    d = _digest(t)
    r = d.requests.copy()
    r["arrival_time"] = r["arrival_time"].to_numpy(dtype=float) - latency
    return replace(d, requests=r)


def fleet_digest(fleet) -> Digest:
    """The replicas' runs end to end as one Digest (step numbers offset per replica)."""
    reqs, steps, gaps, service = [], [], [], []
    useful, offset = 0, 0
    latency = router_latency(fleet)
    for t in fleet.replicas:
        d = _digest(from_router(t, latency))
        r = d.requests.copy()
        for c in STEP_COLUMNS_OF_REQUESTS:
            if c in r:
                r[c] = r[c] + offset
        s = d.steps.copy()
        s["step"] = s["step"].to_numpy() + offset
        sv = d.service.copy()
        sv["step"] = sv["step"].to_numpy() + offset
        reqs.append(r)
        steps.append(s)
        gaps.append(d.gaps)
        service.append(sv)
        useful += d.useful_slot_steps
        offset += int(d.steps["step"].max()) if len(d.steps) else 0
    configs = [(t.meta.get("config") or {}) for t in fleet.replicas]
    seqs = {c.get("max_num_seqs") for c in configs}
    meta = {"source": fleet.meta.get("source"), "time_unit": fleet.time_unit,
            "config": {"max_num_seqs": seqs.pop()} if len(seqs) == 1 else {}}
    return Digest(requests=pd.concat(reqs, ignore_index=True), steps=pd.concat(steps, ignore_index=True),
                  gaps=pd.concat(gaps), service=pd.concat(service, ignore_index=True), useful_slot_steps=useful,
                  meta=meta)


def busy_time(trace) -> float:
    """Time a replica spent in steps that did work."""
    s = trace.steps
    if not len(s):
        return 0.0
    busy = ~s["idle"].to_numpy(dtype=bool)
    return float((s["end"].to_numpy(dtype=float) - s["start"].to_numpy(dtype=float))[busy].sum())


def prefix_hit_rate(trace) -> float:
    """Prompt tokens found in the prefix cache / prompt tokens of the requests that were
    scheduled (NaN when the run says nothing of cached tokens)."""
    r = trace.requests
    c = r["cached_tokens"].astype("Float64")
    known = c.notna().to_numpy()
    if not known.any():
        return math.nan
    total = float(r["prompt_len"].astype("Float64")[known].sum())
    return float(c[known].sum()) / total if total else math.nan


def _fleet_extras(fleet, per: list[dict]) -> dict:
    busy = np.array([p["busy_time"] for p in per], dtype=float)
    mean = busy.mean() if len(busy) else math.nan
    cached = np.nansum([p["cached_prompt_tokens"] for p in per]) if any(
        not math.isnan(p["cached_prompt_tokens"]) for p in per) else math.nan
    prompt = float(sum(int(t.requests["prompt_len"].astype("Float64").sum()) for t in fleet.replicas))
    counts = np.array([p["requests"] for p in per], dtype=float)
    return {"replicas": len(per), "load_imbalance": float(busy.max() / mean) if mean and mean > 0 else math.nan,
            "busy_time_max": float(busy.max()) if len(busy) else math.nan, "busy_time_mean": float(mean),
            "request_imbalance": float(counts.max() / counts.mean()) if counts.mean() > 0 else math.nan,
            "prefix_hit_rate": float(cached / prompt) if prompt and not math.isnan(cached) else math.nan}


def _without_service(t):
    """A replica's Digest without its service per tenant and step: summary() then skips the
    tenant-fairness numbers (a steps x tenants x tenants pass: minutes with many tenants)."""
    from dataclasses import replace
    d = _digest(t)
    return replace(d, service=d.service.iloc[:0])


def replica_summaries(fleet, slo=None, fairness: bool = True) -> list[dict]:
    """sim.metrics.summary per replica, with latencies from the router (from_router)."""
    out = []
    latency = router_latency(fleet)
    idle: dict = {}   # an idle replica's row, per config: the same for every one (1,000 idle cost 8 s each time)
    for i, t in enumerate(fleet.replicas):
        key = None
        if not len(t.requests) and not len(t.steps):
            key = repr((sorted((t.meta.get("config") or {}).items()), t.meta.get("slots"), t.time_unit))
            if key in idle:
                out.append({**idle[key], "replica": i})
                continue
        t = from_router(t, latency)
        row = summary(t if fairness else _without_service(t), slo=slo)
        row.update(latency_stats(per_request(t)))
        row["replica"] = i
        row["busy_time"] = busy_time(t)
        row["prefix_hit_rate"] = prefix_hit_rate(t)
        if key is not None:
            idle[key] = row
        out.append(row)
    return out


def fleet_summary(fleet, slo=None, fairness: bool = True) -> dict:
    """{"metrics": the fleet's row, "per_replica": one row per replica}. Fairness between
    tenants is each replica's (jain_index, max_service_gap in its row; NaN with fairness=False,
    which a search's row wants: it costs steps x tenants^2); the fleet's row leaves it out."""
    per = replica_summaries(fleet, slo, fairness)
    dig = fleet_digest(fleet)
    dig.service = dig.service.iloc[:0]   # the fleet's row has no fairness numbers: not computed
    row = summary(dig, slo=slo)
    row.update(latency_stats(per_request(dig)))
    for k in ("jain_index", "max_service_gap"):
        row.pop(k, None)
    row.update(_fleet_extras(fleet, per))
    return {"metrics": row, "per_replica": per}


def unused_replicas(fleet) -> str | None:
    """A sentence when the router sent some replicas no request though there were enough to go
    round (a hash on one key sends every request to one replica), else None."""
    n = fleet.num_replicas
    routed = fleet.routes["replica"].to_numpy()
    idle = n - len(np.unique(routed))
    if not idle or len(routed) < n:
        return None
    said = f"{idle:,} of {n:,} replicas were sent no request"
    settings = fleet.meta.get("settings") or {}
    config = fleet.meta.get("router_defaults") or {}
    if settings.get("router") == "consistent_hash" and config.get("key") == "tenant" and "tenant" in fleet.routes:
        tenants = int(fleet.routes["tenant"].nunique(dropna=False))
        said += (f" (consistent_hash keys on the tenant, and the requests have {tenants:,} "
                 f"{'tenant' if tenants == 1 else 'tenants'})")
    return said


def turned_away(fleet) -> str | None:
    """A sentence when replicas turned requests away for being longer than their max_model_len
    (replicas of different settings: the router does not know it), else None."""
    counts = fleet.meta.get("turned_away") or []
    limits = fleet.meta.get("context_limits") or []
    names = fleet.names
    by = [f"{k:,} by {names[i]}, whose max_model_len is {limits[i]:,}" for i, k in enumerate(counts) if k]
    if not by:
        return None
    total = sum(counts)
    one = total == 1
    return (f"{total:,} {'request was' if one else 'requests were'} longer than the max_model_len of the replica "
            f"the router sent {'it' if one else 'them'} to, and {'was' if one else 'were'} turned away at once, as "
            f"vLLM answers HTTP 400 ({'; '.join(by)})")


def fleet_warnings(fleet) -> list[str]:
    """What a user should know of a run beside its numbers: replicas sent nothing, requests
    turned away."""
    return [w for w in (unused_replicas(fleet), turned_away(fleet)) if w]


def group_placement(fleet, groups: pd.Series) -> pd.DataFrame:
    """Where each shared-prefix group's requests went: groups x replicas counts. `groups`
    maps request id -> group label."""
    r = fleet.routes
    g = r["request"].map(groups)
    known = g.notna()
    tab = pd.crosstab(g[known], r["replica"][known])
    return tab.reindex(columns=range(fleet.num_replicas), fill_value=0)


def prefix_group(req, tokens: int = 64):
    """The shared-prefix group a request belongs to, as a label, or None when it names none:
    its first prompt block id, its prompt seed (seeded prompts share a prefix), else its first
    `tokens` prompt token ids (a recording's prompts) as a short digest."""
    if req.prompt_blocks:
        return f"block {req.prompt_blocks[0]}"
    if req.prompt_seed is not None:
        return f"seed {req.prompt_seed}"
    if req.prompt_token_ids is not None and len(req.prompt_token_ids) >= tokens:
        import zlib
        return f"prefix {zlib.crc32(np.asarray(req.prompt_token_ids[:tokens], dtype=np.int64).tobytes()):08x}"
    return None


def prefix_groups(requests, tokens: int = 64) -> pd.Series:
    """request id -> shared-prefix group, for the groups two or more requests share."""
    labels = pd.Series({r.id: prefix_group(r, tokens) for r in requests}, dtype=object)
    labels = labels[labels.notna()]
    counts = labels.value_counts()
    return labels[labels.map(counts) >= 2]


def fleet_requests(fleet) -> pd.DataFrame:
    """sim.metrics.per_request of every replica, one table, with the replica's index (times from
    the router, as from_router)."""
    parts = []
    latency = router_latency(fleet)
    for i, t in enumerate(fleet.replicas):
        p = per_request(from_router(t, latency))
        p.insert(1, "replica", i)
        parts.append(p)
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def latency_stats(pr: pd.DataFrame) -> dict:
    """TTFT, TPOT (a request's mean gap between tokens after its first) and E2E, p50 and p99,
    over the requests served (not rejected, finished)."""
    done = pr[~pr["rejected"] & pr["e2e"].notna()] if len(pr) else pr
    out = {}
    for key, col in (("ttft", "ttft"), ("tpot", "itl_mean"), ("e2e", "e2e")):
        v = done[col].dropna().to_numpy(dtype=float) if len(done) else np.array([])
        for p in (50, 99):
            out[f"{key}_p{p}"] = float(np.percentile(v, p)) if len(v) else math.nan
    return out


def request_changes(a, b) -> pd.DataFrame:
    """Per request served in both fleets: TTFT and E2E under A and B and B - A (the table
    figures.compare.change_figure draws), with the replica each went to on both sides."""
    pa = fleet_requests(a).set_index("request")
    pb = fleet_requests(b).set_index("request")
    common = pa.index.intersection(pb.index)
    d = pd.DataFrame({"tenant": pa.loc[common, "tenant"], "replica_A": pa.loc[common, "replica"],
                      "replica_B": pb.loc[common, "replica"],
                      "ttft_A": pa.loc[common, "ttft"], "ttft_B": pb.loc[common, "ttft"],
                      "e2e_A": pa.loc[common, "e2e"], "e2e_B": pb.loc[common, "e2e"]})
    d["ttft_change"] = d["ttft_B"] - d["ttft_A"]
    d["e2e_change"] = d["e2e_B"] - d["e2e_A"]
    return d.sort_values("e2e_change", kind="stable")
