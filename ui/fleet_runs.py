"""The Fleet page's cached runs: a workload on a simulated fleet, a real fleet replayed under a
router policy, and what the page draws from a run (its numbers, its routing table), each made
once per input and kept once for every session (ui.runs.RunStore, as a single run: keyed on the
workload's digest, the settings JSON, the config JSON and the cost preset; the page only reads them).

    fleet = run_fleet(workload, settings, config, cost_key)   # ValueError / RuntimeError: one sentence
    key = fleet_key(workload, settings, config, cost_key)
    numbers = fleet_numbers(key, fleet)                       # summary, headline, per replica, routing table

Limits (one visitor must not take the server's memory): at most MAX_PAGE_REQUESTS requests and
ui.fleet_controls.MAX_PAGE_REPLICAS replicas a run, and at most MAX_TOKEN_ROWS token rows (a
batch entry per request per step: the output tokens plus the prompt's chunks, estimated before
the run; a 16-replica run of 2.9M rows peaked at 2.3 GB) and MAX_PROMPT_TOKENS prompt tokens.
"""
from __future__ import annotations

import hashlib
import json
import math
import time

import streamlit as st

from figures.fleet import headline, per_replica_table, routing_table
from sim.cost import cost_from_preset
from sim.fleet import FleetSettings, FleetTrace, fleet_summary, simulate_fleet
from sim.fleet.recorded import agreement, replay
from sim.workload import Workload, effective_config
from ui.runs import ProgressBar, run_store, workload_digest

MAX_PAGE_REQUESTS = 50_000
MAX_TOKEN_ROWS = 4_000_000
# prompt tokens a run holds (their ids are made up front, and the cache-aware routers keep every
# prompt sent in a tree): 16 replicas x 20,000 requests of 22M prompt tokens peaked at 2.1 GB
MAX_PROMPT_TOKENS = 25_000_000


def _texts(settings: FleetSettings, config: dict) -> tuple[str, str]:
    return json.dumps(settings.to_json(), sort_keys=True), json.dumps(config, sort_keys=True)


def _key(workload: Workload, settings: FleetSettings, config: dict, cost_key: str) -> str:
    s, c = _texts(settings, config)
    return hashlib.sha256(f"fleet\0{workload_digest(workload)}\0{s}\0{c}\0{cost_key}\0{workload.name}".encode()
                          ).hexdigest()


def fleet_key(workload: Workload, settings: FleetSettings, config: dict, cost_key: str) -> str:
    return _key(workload, settings, config, cost_key)[:16]


def token_rows(workload: Workload, config: dict) -> int:
    """The batch rows a run will hold, about: each request's output tokens plus its prompt's
    chunks of the token budget (preemptions add more)."""
    budget = int(effective_config({**workload.config, **config}).get("max_num_batched_tokens") or 2048)
    return sum(int(r.max_tokens) + math.ceil(int(r.prompt_len) / max(budget, 1)) for r in workload.requests)


def check_size(workload: Workload, config: dict) -> None:
    """ValueError (one sentence) for a run too big for the page."""
    n = len(workload.requests)
    if n > MAX_PAGE_REQUESTS:
        raise ValueError(f"the workload has {n:,} requests; a fleet on this page runs at most {MAX_PAGE_REQUESTS:,} "
                         "(use `python -m sim fleet` for more, or fewer requests under Request traces)")
    prompt = sum(int(r.prompt_len) for r in workload.requests)
    if prompt > MAX_PROMPT_TOKENS:
        raise ValueError(f"the workload's prompts add up to {prompt:,} tokens; a fleet on this page takes at most "
                         f"{MAX_PROMPT_TOKENS:,} (use `python -m sim fleet`, or fewer requests)")
    rows = token_rows(workload, config)
    if rows > MAX_TOKEN_ROWS:
        raise ValueError(f"this run would hold about {rows:,} token rows (output tokens plus prompt chunks); the page "
                         f"keeps at most {MAX_TOKEN_ROWS:,} (use `python -m sim fleet`, which keeps none, or fewer "
                         "requests)")


def _simulate_fleet(wl: Workload, settings: FleetSettings, config: dict, cost_key: str) -> tuple:
    t0 = time.perf_counter()
    bar = ProgressBar(f"Simulating {settings.replicas} replicas ({settings.router})…")
    try:
        fleet = simulate_fleet(wl, settings, dict(config), cost=cost_from_preset(cost_key),
                               max_requests=MAX_PAGE_REQUESTS, progress=bar)
    finally:
        bar.close()
    return fleet, time.perf_counter() - t0


def run_fleet(workload: Workload, settings: FleetSettings, config: dict, cost_key: str) -> tuple[FleetTrace, float]:
    """(the FleetTrace of `workload` on `settings`' fleet, the seconds its simulation took when it
    ran; kept for every session). Raises ValueError / RuntimeError with a plain message for a run
    that cannot finish or is too big for the page."""
    check_size(workload, config)
    with st.spinner(f"Simulating {len(workload.requests):,} requests on {settings.replicas} replicas "
                    f"({settings.router})…"):
        return run_store().get(_key(workload, settings, config, cost_key),
                               lambda: _simulate_fleet(workload, settings, config, cost_key))


@st.cache_resource(max_entries=8, show_spinner="Replaying the recordings under the policy…")
def predicted_fleet(key: str, settings_json: str, timing: str, _reps: list) -> FleetTrace:
    """A real fleet (its RecordedReplica list) replayed under a router policy."""
    s = json.loads(settings_json)
    return replay(_reps, FleetSettings(**s), timing=timing)


def fleet_agreement(fleet: FleetTrace) -> dict:
    return agreement(fleet)


@st.cache_resource(max_entries=16, show_spinner="Adding up the numbers…")
def fleet_numbers(key: str, _fleet: FleetTrace) -> dict:
    """Everything the page shows of a run that takes a pass over it: fleet_summary, the headline
    (with TTFT / TPOT / E2E percentiles), the per-replica table and the routing table."""
    summ = fleet_summary(_fleet, fairness=False)   # the page shows no per-replica tenant fairness: not computed
    return {"summary": summ, "headline": headline(_fleet, summ), "per_replica": per_replica_table(_fleet, summ),
            "routes": routing_table(_fleet)}
