"""The live engine's side of the simulator: workload presets timed in milliseconds, and a Trace
rebuilt from the engine service's snapshots while the engine runs.

No torch here: the engine service (engine/service.py) publishes plain dicts per step, and
this module turns them into the standard Trace tables, so the Playback figures draw a
running engine as they draw a finished run.

    reqs = preset_requests("burst", batch=1, start_ms=svc.now_ms())   # ids "b1-0", "b1-1", ...
    live = LiveRun()
    live.update(svc.snapshot)          # fetches only the steps it has not seen (a new run resets it)
    trace = live.trace(last_steps=150) # steps/batch/events of the last 150 steps; the full KV log
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np
import pandas as pd

from .trace import Trace, table_from_columns
from .workload import Request, generate

PHASES = ("t_schedule", "t_swap", "t_prepare", "t_forward", "t_sample", "t_update")
DONE = ("finished", "rejected", "cancelled")


# ---------------------------------------------------------------------------------------------
# Workload presets (arrival times in ms after sending; sized for the tiny model on one CPU core)
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LivePreset:
    key: str
    title: str
    blurb: str
    build: Callable[[int], list[Request]]  # seed -> requests, arrival_time = ms after sending
    tag: str  # id prefix: the n-th send of this preset names its requests f"{tag}{n}-{i}"


def _timed(reqs: list[Request], times_ms) -> list[Request]:
    return [replace(r, arrival_step=0, arrival_time=float(t)) for r, t in zip(reqs, times_ms)]


def _burst(seed: int) -> list[Request]:
    wl = generate(12, seed=seed, prompt={"dist": "uniform", "low": 16, "high": 96},
                  output={"dist": "uniform", "low": 24, "high": 64}, shared_prefix_groups=3)
    return _timed(wl.requests, [0.0] * 12)


def _poisson(seed: int) -> list[Request]:
    # 10 ms ticks at 0.04 per tick: about 4 requests a second
    wl = generate(24, seed=seed, arrival="poisson", rate=0.04,
                  prompt={"dist": "lognormal", "median": 40, "sigma": 0.7, "max": 200},
                  output={"dist": "lognormal", "median": 24, "sigma": 0.6, "max": 64})
    return _timed(wl.requests, [10.0 * r.arrival_step for r in wl.requests])


def _long_prompt(seed: int) -> list[Request]:
    chats = generate(6, seed=seed, prompt={"dist": "uniform", "low": 12, "high": 32}, output=40).requests
    chats = _timed(chats, [0, 0, 0, 0, 400, 550])
    long = Request("long", prompt_len=768, max_tokens=8, arrival_time=150.0)
    return sorted(chats + [long], key=lambda r: r.arrival_time)


def _two_tenants(seed: int) -> list[Request]:
    a = generate(10, seed=seed, prompt={"dist": "uniform", "low": 24, "high": 64}, output=32,
                 tenants={"A": 1.0}).requests
    b = generate(3, seed=seed + 1, prompt={"dist": "uniform", "low": 8, "high": 24}, output=16,
                 tenants={"B": 1.0}, id_prefix="b").requests
    return _timed(a, [0.0] * len(a)) + _timed(b, [100.0 + 150.0 * i for i in range(len(b))])


LIVE_PRESETS: dict[str, LivePreset] = {p.key: p for p in (
    LivePreset("burst", "Burst: 12 requests at once",
               "Twelve requests land together (prompts of 16-96 tokens in three groups sharing a prefix, "
               "24-64 tokens out). Watch the first steps fill the token budget with prompt chunks, then "
               "settle into decoding; a small KV pool makes the newest requests get preempted.", _burst, "b"),
    LivePreset("poisson", "Poisson stream: 24 requests, about 4 a second",
               "A steady random stream with long-tailed prompt and output lengths: the batch grows and "
               "shrinks as requests come and go, and the step time follows the batch.", _poisson, "p"),
    LivePreset("long_prompt", "One long prompt among chatters",
               "Four short chats are decoding when a 768-token prompt arrives. With a small token budget "
               "the prompt is cut into chunks and the chats keep getting a token every step; raise the "
               "budget to 1,024 to see one long step stall them.", _long_prompt, "l"),
    LivePreset("two_tenants", "Two tenants",
               "Tenant A sends ten requests at once; tenant B sends three small ones shortly after. Under "
               "FCFS with few slots B waits behind A; try round-robin by tenant or VTC.", _two_tenants, "t"),
)}


def preset_requests(key: str, seed: int = 0, batch: int = 1, start_ms: float = 0.0) -> list[Request]:
    """The preset's requests for its `batch`-th send: ids f"{tag}{batch}-{i}", arrival times
    shifted by start_ms (the engine clock when sending)."""
    p = LIVE_PRESETS[key]
    reqs = p.build(seed)
    return [replace(r, id=f"{p.tag}{batch}-{i}", arrival_time=start_ms + float(r.arrival_time or 0.0))
            for i, r in enumerate(reqs)]


# ---------------------------------------------------------------------------------------------
# A Trace from the service's snapshots
# ---------------------------------------------------------------------------------------------

class LiveRun:
    """What a viewer has seen of the engine's current run: every published step, the request
    states and the run info. update() fetches only new steps; a new run starts over."""

    def __init__(self):
        self.run: int | None = None
        self.steps: list[dict] = []
        self.requests: dict[str, dict] = {}
        self.info: dict = {}
        self.running = False
        self.driver: str | None = None
        self.error: str | None = None

    def update(self, snapshot: Callable[[int], dict]) -> int:
        """Pull from `snapshot(since_step)` (EngineService.snapshot); returns how many new steps."""
        snap = snapshot(len(self.steps))
        if snap["run"] != self.run or snap["num_steps"] < len(self.steps):
            self.__init__()
            snap = snapshot(0)
            self.run = snap["run"]
        self.steps.extend(snap["steps"])
        self.requests = snap["requests"]
        self.info = snap["info"]
        self.running, self.driver, self.error = snap["running"], snap["driver"], snap["error"]
        return len(snap["steps"])

    # -- facts ----------------------------------------------------------------------------
    @property
    def num_steps(self) -> int:
        return len(self.steps)

    def all_done(self) -> bool:
        """Some requests were sent and every one has finished (or was rejected / cancelled)."""
        return bool(self.requests) and all(r["status"] in DONE for r in self.requests.values())

    def stats(self, window_ms: float = 2000.0) -> dict:
        """Live numbers: steps, tokens/s over the last window_ms of engine time, mean step time
        over that window, queue lengths now, preemptions, requests finished."""
        s = self.steps
        out = {"steps": len(s), "tokens_per_s": float("nan"), "step_ms": float("nan"), "running": 0,
               "waiting": 0, "free_blocks": None, "preemptions": sum(len(x["preempted"]) for x in s),
               "generated": sum(len(r["generated"]) for r in self.requests.values()),
               "finished": sum(r["status"] == "finished" for r in self.requests.values()),
               "requests": len(self.requests)}
        if not s:
            return out
        last = s[-1]
        out.update(running=last["running"], waiting=last["waiting"], free_blocks=last["free_blocks"])
        t_end = last["end"]
        recent = [x for x in s if x["end"] > t_end - window_ms]
        span = t_end - recent[0]["start"]
        if span > 0:
            out["tokens_per_s"] = 1000.0 * sum(len(x["sampled"]) for x in recent) / span
        out["step_ms"] = float(np.mean([x["end"] - x["start"] for x in recent]))
        return out

    def text_rows(self, decode: Callable[[list[int]], str], max_tokens: int = 40) -> pd.DataFrame:
        """One row per request: tenant, status, prompt length, tokens generated of the most
        asked, preemptions, and the last `max_tokens` generated tokens as text and as ids."""
        rows = []
        for rid, r in self.requests.items():
            gen = r["generated"]
            tail = gen[-max_tokens:]
            lead = "… " if len(gen) > len(tail) else ""
            rows.append({"request": rid, "tenant": r["tenant"], "status": r["status"], "prompt": r["prompt_len"],
                         "tokens": f"{len(gen)} / {r['max_tokens']}", "preemptions": r["preemptions"],
                         "text": lead + decode(tail), "token ids": lead + " ".join(map(str, tail))})
        cols = ["request", "tenant", "status", "prompt", "tokens", "preemptions", "text", "token ids"]
        return pd.DataFrame(rows, columns=cols)

    # -- the Trace ------------------------------------------------------------------------
    def trace(self, last_steps: int | None = None) -> Trace:
        """The run so far as a Trace (source engine, ms). last_steps: only the last N steps in
        the steps, batch and events tables (the KV log is always whole, so the block map at
        any shown step is right)."""
        steps = self.steps if last_steps is None else self.steps[-last_steps:]
        return Trace(requests=self._requests_table(), steps=self._steps_table(steps),
                     batch=self._batch_table(steps), events=self._events_table(steps),
                     kv=self._kv_table(), meta=self._meta())

    def _meta(self) -> dict:
        i = self.info
        return {"source": "engine", "scheduler": "vllm", "time_unit": "ms", "live": True,
                "config": dict(i.get("scheduler") or {}), "num_blocks": i.get("num_blocks", 0),
                "block_size": i.get("block_size"), "device": i.get("device"), "dtype": i.get("dtype"),
                "model_params": i.get("model_params"), "num_requests": len(self.requests)}

    def _requests_table(self) -> pd.DataFrame:
        rs = list(self.requests.items())
        done = [r["status"] == "finished" for _, r in rs]
        return table_from_columns("requests", {
            "request": [k for k, _ in rs], "tenant": [r["tenant"] for _, r in rs], "priority": [0] * len(rs),
            "prompt_len": [r["prompt_len"] for _, r in rs], "max_tokens": [r["max_tokens"] for _, r in rs],
            "arrival_time": [r["arrival_ms"] for _, r in rs],
            "first_token_time": [r["first_token_ms"] for _, r in rs],
            "finish_time": [r["finish_ms"] for _, r in rs],
            "output_tokens": [len(r["generated"]) if d else None for (_, r), d in zip(rs, done)],
            "preemptions": [r["preemptions"] for _, r in rs], "recomputed_tokens": [0] * len(rs),
            "rejected": [r["status"] == "rejected" for _, r in rs],
            "finish_reason": [r["finish_reason"] or "" for _, r in rs]})

    @staticmethod
    def _steps_table(steps: list[dict]) -> pd.DataFrame:
        def tokens(s, kind):
            return sum(n for _r, k, n, _b in s["entries"] if k == kind)
        cols = {
            "step": [s["step"] for s in steps], "start": [s["start"] for s in steps], "end": [s["end"] for s in steps],
            "num_tokens": [s["num_tokens"] for s in steps],
            "prefill_tokens": [tokens(s, "prefill") for s in steps],
            "decode_tokens": [tokens(s, "decode") for s in steps],
            "recompute_tokens": [tokens(s, "recompute") for s in steps],
            "num_seqs": [len(s["entries"]) for s in steps], "running": [s["running"] for s in steps],
            "waiting": [s["waiting"] for s in steps], "free_blocks": [s["free_blocks"] for s in steps],
            "preempted": [len(s["preempted"]) for s in steps], "finished": [len(s["finished"]) for s in steps],
            "arrived": [0] * len(steps), "idle": [False] * len(steps),
        }
        for p in PHASES:
            cols[p] = np.asarray([s["phases"].get(p, np.nan) for s in steps], dtype=np.float64)
        return table_from_columns("steps", cols)

    @staticmethod
    def _batch_table(steps: list[dict]) -> pd.DataFrame:
        cols = {k: [] for k in ("step", "request", "slot", "kind", "tokens", "computed_before", "sampled")}
        for s in steps:
            slots = s.get("slots") or [None] * len(s["entries"])
            for (rid, kind, n, before), slot in zip(s["entries"], slots):
                for k, v in (("step", s["step"]), ("request", rid), ("slot", slot), ("kind", kind), ("tokens", n),
                             ("computed_before", before), ("sampled", rid in s["sampled"])):
                    cols[k].append(v)
        return table_from_columns("batch", cols)

    @staticmethod
    def _events_table(steps: list[dict]) -> pd.DataFrame:
        cols = {k: [] for k in ("step", "time", "request", "kind", "detail")}

        def add(step, time, rid, kind, detail=""):
            for k, v in (("step", step), ("time", time), ("request", rid), ("kind", kind), ("detail", detail)):
                cols[k].append(v)
        for s in steps:
            for rid in s["preempted"]:
                add(s["step"], s["start"], rid, "preempt", "preempted to free KV blocks")
            for rid in s["admitted"]:
                add(s["step"], s["start"], rid, "admit")
            for rid in s["finished"]:
                add(s["step"], s["end"], rid, "finish")
        return table_from_columns("events", cols)

    def _kv_table(self) -> pd.DataFrame:
        rows = [(s["step"], b, r, op) for s in self.steps for b, r, op in s["kv"]]
        return table_from_columns("kv", {"step": [x[0] for x in rows], "block": [x[1] for x in rows],
                                         "request": [x[2] for x in rows], "op": [x[3] for x in rows]})


def throughput(trace: Trace, window_ms: float = 1000.0) -> pd.DataFrame:
    """Per step: tokens sampled in the window_ms of engine time ending with it, per second.
    (The first window is shorter: it divides by the time elapsed since the first step began.)"""
    s = trace.steps
    if s.empty:
        return pd.DataFrame({"step": [], "end": [], "tokens_per_s": []})
    b = trace.batch
    n = b[b["sampled"].to_numpy(dtype=bool)].groupby("step").size()
    steps = s["step"].to_numpy(dtype=np.int64)
    end = s["end"].to_numpy(dtype=float)
    tok = n.reindex(steps, fill_value=0).to_numpy(dtype=float)
    cum = np.concatenate([[0.0], np.cumsum(tok)])
    lo = np.searchsorted(end, end - window_ms, side="right")  # first step inside the window
    t0 = float(s["start"].iloc[0])
    span = np.minimum(window_ms, end - t0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(span > 0, 1000.0 * (cum[1:] - cum[lo]) / span, np.nan)
    return pd.DataFrame({"step": steps, "end": end, "tokens_per_s": rate})
