"""The workload a server log implies, simulated, beside what the log says.

    imp = implied_workload(read)        # read: a LogRead (servers.sglang_log / vllm_log / lmdeploy_log)
    imp.workload, imp.config, imp.assumed, imp.totals      # or imp.why when the log cannot give one
    res = resimulate(read)              # Resim: imp, the simulated Trace, `compare` (log vs simulator)

What each log gives, and what is assumed (said in `assumed`, word for word on the page and in
`python -m sim log FILE --resimulate`):

- vLLM: one request per `Received request` line (`--enable-log-requests`; `Added request` lines
  when there are none) at its logged second, with its max_tokens. vLLM 0.32 prints no prompt
  length at INFO (older builds' `prompt_token_ids: [...]` do, and are used), so prompt lengths come
  from the stats lines: each line's prompt throughput x the stats interval is the prompt tokens
  of the requests whose first token came in that interval (vLLM counts a prompt once, then); the
  requests that started in it (arrived by then, minus those still waiting at the line, first come
  first served; with those of earlier lines that counted no prompt tokens) share them evenly. Those are computed tokens:
  prefix-cache hits are not in them, and the simulator runs without prefix caching. Outputs are
  max_tokens (exactly right with ignore_eos), scaled down to the log's generated-token total
  (generation throughput x interval) when their sum is more than 5% above it; without max_tokens
  the total is shared evenly.
- SGLang: one request per `#new-seq` of each prefill batch line, arriving at that line's second
  (when its prefill ran: at or after it arrived), the batch's prompt tokens (`#new-token` +
  `#cached-token`) shared evenly; a chunked prefill's later chunks count as requests of their own
  (the line does not say which request a chunk continues). Outputs: the decode tokens the decode
  lines imply (#running-req per logged step x the decode-log interval: measured from #token, else
  SGLang's default 40) shared evenly. The simulator's scheduler is vLLM-style (the same for both).
- LMDeploy: one request per start line (`session=N, ..., input_tokens=N, max_new_tokens=N`, INFO)
  at its logged time (to the ms) with its input tokens as the prompt; outputs from the request's
  `session N finished, ..., output_tokens N` line (else the mean of those). Settings from the
  engine's config line under vLLM's names (max_batch_size, max_prefill_token_num, block_size,
  session_len). Step cost fitted to the PyTorch engine's forward lines (DEBUG; each forward's
  time the time to the next), else to the stats lines as vLLM's.
- Settings: what the log states (vLLM's start-up lines: `non-default args`, `Chunked prefill is
  enabled with max_num_batched_tokens=N`, `KV cache size: N tokens`; SGLang: the KV pool from
  `#token` / `token usage`, the largest batch seen), the simulator's vLLM defaults for the rest.
- Step cost (seconds): `time = per_step + per_token x tokens`, fitted to the log: vLLM's
  timed steps where it logged them (`--enable-logging-iteration-details`: each step's tokens and
  elapsed time), else its intervals with requests waiting at their end (the engine busy
  throughout: interval = steps x per_step + tokens x per_token, steps = generated tokens /
  running); SGLang's decode lines (a step of #running-req tokens takes #running-req / gen
  throughput seconds).

No per-request truth is in these logs: the comparison is of the gauges (running, waiting, KV
usage, throughputs) at the log's own times; the simulated throughputs are counted as vLLM counts
them (a prompt when its first token comes, recomputation after a preemption not again; every
sampled token).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from sim.cost import CalibratedCost
from sim.simulate import simulate
from sim.trace import Trace
from sim.versions import NEWEST, normalize, unchecked
from sim.workload import DEFAULT_CONFIG, Request, Workload

MAX_REQUESTS = 100_000
MAX_STEPS = 2_000_000
MAX_TOKENS = 20_000_000       # prompt + output tokens of the whole implied workload
MAX_REQUEST_TOKENS = 1_000_000  # of one request
SGLANG_DEFAULT_INTERVAL = 40
CONFIG_KEYS = ("max_num_seqs", "max_num_batched_tokens", "block_size", "enable_chunked_prefill", "max_model_len")


@dataclass
class Implied:
    engine: str
    workload: Workload | None = None
    config: dict = field(default_factory=dict)          # the simulator's settings
    from_log: dict = field(default_factory=dict)        # what the log said of them
    assumed: list[str] = field(default_factory=list)
    totals: dict = field(default_factory=dict)          # the log's own totals and the workload's
    cost: CalibratedCost | None = None
    why: str = ""                                       # why there is no workload

    def to_json(self) -> dict:
        w = self.workload
        return {"engine": self.engine, "requests": len(w.requests) if w else 0, "why_not": self.why or None,
                "config": self.config, "from_log": self.from_log, "assumed": self.assumed, "totals": self.totals,
                "cost": self.cost.describe() if self.cost else None}


@dataclass
class Resim:
    implied: Implied
    trace: Trace | None = None
    compare: pd.DataFrame | None = None      # time, gauge, log, sim
    preemptions: dict | None = None          # the log's count (or what it can say) beside the simulator's

    def to_json(self) -> dict:
        out = {"implied": self.implied.to_json()}
        if self.compare is not None:
            c = self.compare
            out["compare"] = {g: {"time": d["time"].tolist(), "log": d["log"].tolist(), "sim": d["sim"].tolist()}
                              for g, d in c.groupby("gauge", sort=False)}
            out["compare_summary"] = compare_summary(c)
        if self.preemptions is not None:
            out["preemptions"] = self.preemptions
        return out


def preemptions(read, trace: Trace) -> dict:
    """The simulator's preemptions beside what the log says of the server's: SGLang's retracted
    requests (each retraction is logged), vLLM V0's count at its last preemption warning (a lower
    bound: it warns at every 50th), the Preemptions fields of a vLLM build that prints them, or
    None where the log cannot say (vLLM V1: its logger never prints the field)."""
    ev = trace.events
    out = {"sim": int((ev["kind"].astype(str).to_numpy() == "preempt").sum()) if len(ev) else 0}
    warned = read.extra.get("preemption_warnings") or {}
    fields = [r["preemptions"] for r in read.stats if r.get("preemptions").__class__ is int]   # whole counts only
    if read.engine == "lmdeploy":
        out["log"] = None
        out["log_is"] = "LMDeploy's log does not count preemptions"
    elif read.engine == "sglang":
        out["log"] = sum(x.get("retracted") or 0 for x in read.extra.get("retractions") or ())
        out["log_is"] = "the requests its retraction lines sent back (#retracted_reqs)"
    elif warned.get("cumulative_max"):
        out["log"] = warned["cumulative_max"]
        out["log_is"] = ("at least this many: the server's count at its last preemption warning (V0 warns at "
                         "every 50th)")
    elif fields:
        out["log"] = sum(fields)
        out["log_is"] = "the stats lines' Preemptions fields, summed"
    else:
        out["log"] = None
        out["log_is"] = "V1's stats lines never carry the count, and V0 warns only at every 50th"
    return out


def _shares(total: int, n: int) -> list[int]:
    """`total` split into n integer parts that differ by at most one (the sum kept exact)."""
    if n <= 0:
        return []
    q, r = divmod(max(int(total), 0), n)
    return [q + 1 if i < r else q for i in range(n)]


def _nnls2(x1: np.ndarray, x2: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """y ~ a*x1 + b*x2 with a, b >= 0 (least squares; a term pinned to 0 when it comes out negative)."""
    A = np.column_stack([x1, x2])
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    if (coef >= 0).all():
        return float(coef[0]), float(coef[1])
    a = float((x1 @ y) / (x1 @ x1)) if (x1 @ x1) > 0 else 0.0
    b = float((x2 @ y) / (x2 @ x2)) if (x2 @ x2) > 0 else 0.0
    ra = ((y - a * x1) ** 2).sum() if a >= 0 else math.inf
    rb = ((y - b * x2) ** 2).sum() if b >= 0 else math.inf
    return (max(a, 0.0), 0.0) if ra <= rb else (0.0, max(b, 0.0))


MAX_BLOCKS = 1_000_000     # a KV pool the simulator takes (a log may say anything)
INT_LIMITS = {"max_num_seqs": 1 << 16, "max_num_batched_tokens": 1 << 24, "block_size": 1 << 12,
              "max_model_len": MAX_REQUEST_TOKENS, "num_gpu_blocks_override": MAX_BLOCKS,
              "kv_cache_tokens": MAX_BLOCKS << 12}


def _settings(said: dict, assumed: list[str], need_len: int) -> dict:
    said = dict(said)
    for k, top in INT_LIMITS.items():   # a number no server runs with is not taken
        v = said.get(k)
        if v is not None and not (isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= top):
            del said[k]
            assumed.append(f"the log's {k} ({v!r}) is not taken: out of range")
    cfg = {k: DEFAULT_CONFIG[k] for k in ("num_gpu_blocks", "block_size", "max_num_batched_tokens", "max_num_seqs",
                                          "enable_chunked_prefill")}
    cfg["enable_prefix_caching"] = False
    missing = []
    for k in CONFIG_KEYS:
        if said.get(k) is not None:
            cfg[k] = said[k]
        elif k != "max_model_len":
            missing.append(f"{k} {cfg[k]}")
    bs = int(cfg["block_size"])
    if said.get("num_gpu_blocks_override"):
        cfg["num_gpu_blocks"] = int(said["num_gpu_blocks_override"])
    elif said.get("kv_cache_tokens"):
        cfg["num_gpu_blocks"] = max(int(said["kv_cache_tokens"]) // bs, 2)
    else:
        missing.append(f"a KV pool of {cfg['num_gpu_blocks']:,} blocks")
    if missing:
        assumed.append("settings the log does not state, the simulator's vLLM defaults: " + ", ".join(missing))
    mml = cfg.get("max_model_len")
    if mml is not None and mml < need_len:
        cfg["max_model_len"] = need_len   # an implied request longer than the server allowed: our estimate's fault
        assumed.append(f"max_model_len raised to {need_len:,} to hold the longest implied request")
    if cfg["num_gpu_blocks"] > MAX_BLOCKS:
        cfg["num_gpu_blocks"] = MAX_BLOCKS
        assumed.append(f"KV pool capped at {MAX_BLOCKS:,} blocks")
    usable = (cfg["num_gpu_blocks"] - 1) * bs
    if usable < need_len:
        cfg["num_gpu_blocks"] = -(-need_len // bs) + 1
        assumed.append(f"KV pool enlarged to {cfg['num_gpu_blocks']:,} blocks to hold the longest implied request")
    return cfg


# ---------------------------------------------------------------------------------------------
# vLLM
# ---------------------------------------------------------------------------------------------

def _vllm(read) -> Implied:
    imp = Implied("vllm")
    lanes = sorted({r["engine"] for r in read.stats if r["engine"]})   # unlabelled lines: one engine (before labels)
    if len(lanes) > 1:
        imp.why = "the log has several engines (data parallel): which engine served which request is not logged"
        return imp
    stats = [r for r in read.stats if r["t"] is not None]
    received = [q for q in read.requests if q["kind"] == "received" and q.get("t") is not None]
    added = [q for q in read.requests if q["kind"] == "added" and q.get("t") is not None]
    reqs = received or added
    if not reqs:
        imp.why = ("no request lines with times: start vLLM with --enable-log-requests (a `Received request` line "
                   "per request) to re-simulate its workload")
        return imp
    if not stats:
        imp.why = "no stats lines: the prompt and output tokens cannot be estimated"
        return imp
    reqs = sorted(reqs, key=lambda q: q["t"])[:MAX_REQUESTS + 1]   # one more than may be taken: said, not cut
    n = len(reqs)
    interval = float(read.extra.get("stats_interval_s") or 10.0)
    assumed = imp.assumed
    assumed.append(f"{n:,} requests, one per `{'Received' if received else 'Added'} request` line, arriving at its "
                   "logged second (1 s resolution)")
    p_int = [(s.get("prompt_throughput") or 0.0) * interval for s in stats]
    g_int = [(s.get("generation_throughput") or 0.0) * interval for s in stats]
    p_total, g_total = sum(p_int), sum(g_int)
    # prompt lengths
    arr = np.array([q["t"] for q in reqs])
    known = [q.get("prompt_tokens") for q in reqs]
    if all(k for k in known):
        prompts = [int(k) for k in known]
        assumed.append("prompt lengths from the request lines (`prompt_token_ids`)")
    else:
        prompts = [0] * n
        started_prev, last_group, pending = 0, None, []
        carry = 0.0
        for s, p in zip(stats, p_int):
            arrived = int(np.searchsorted(arr, s["t"], side="right"))
            started = min(max(arrived - int(s.get("waiting") or 0), started_prev), n)
            pending += range(started_prev, started)
            started_prev = started
            if pending and round(p + carry) > 0:      # their prompts counted in this line
                for i, x in zip(pending, _shares(round(p + carry), len(pending))):
                    prompts[i] = x
                carry, last_group, pending = 0.0, pending, []
            elif p > 0 and last_group is not None and not pending:   # more of requests already started
                for i, x in zip(last_group, _shares(round(p), len(last_group))):
                    prompts[i] += x
            else:   # tokens before any request line, or started requests whose prompts come in a later line
                carry += p
        left = [i for i in range(n) if prompts[i] == 0]
        assigned = [x for x in prompts if x > 0]
        mean = round(sum(assigned) / len(assigned)) if assigned else 1
        for i in left:
            prompts[i] = mean
        assumed.append(f"prompt lengths from the stats lines: each interval's prompt throughput x {interval:g} s, "
                       "shared evenly by the requests that started in it (arrived, less those waiting at the line, "
                       "first come first served); computed tokens, so prefix-cache hits are not in them")
        if left:
            assumed.append(f"{len(left):,} request(s) whose prompt no stats line counted (the log ends first): the "
                           f"mean implied prompt ({mean:,} tokens) each")
        prompts = [max(1, x) for x in prompts]
    # output lengths
    maxes = [q.get("max_tokens") for q in reqs]
    if all(m for m in maxes):
        outs = [int(m) for m in maxes]
        s_max = sum(outs)
        eos = all(q.get("ignore_eos") for q in reqs)
        if g_total > 0 and s_max > 1.05 * g_total:
            f = g_total / s_max
            outs = [max(1, round(m * f)) for m in outs]
            assumed.append(f"outputs: each request's max_tokens x {f:.3g}, so that they sum to the log's generated "
                           f"tokens ({g_total:,.0f}; the max_tokens sum to {s_max:,})")
        else:
            assumed.append("outputs: each request's max_tokens" + (" (ignore_eos: exactly)" if eos else
                                                                   " (a request may stop earlier at EOS)"))
    else:
        outs = [max(1, x) for x in _shares(round(g_total), n)]
        assumed.append(f"outputs: the log's generated tokens ({g_total:,.0f}) shared evenly (no max_tokens logged)")
    said = dict(read.extra.get("server_config") or {})
    imp.from_log = said
    need = max(p + o for p, o in zip(prompts, outs))
    imp.config = _settings(said, assumed, need)
    version = read.extra.get("vllm_version")
    if version:   # the scheduler's rules of the version the log states, where the simulator has them
        try:
            imp.config["vllm_version"] = normalize(version)
            assumed.append(f"the scheduler's rules of vLLM {imp.config['vllm_version']} (the log's version, {version})"
                           if not unchecked(version) else f"the scheduler's rules of vLLM {imp.config['vllm_version']}, "
                           f"the nearest version the simulator was checked against to the log's {version}")
        except ValueError:
            assumed.append(f"the scheduler's rules of vLLM {NEWEST}: the simulator has none for the log's {version}")
    if said.get("enable_prefix_caching", True):
        assumed.append("prefix caching off in the simulator (which prompts share a prefix is not logged)")
    imp.workload = Workload([Request(id=q["request"], prompt_len=p, max_tokens=o, arrival_time=float(q["t"]))
                             for q, p, o in zip(reqs, prompts, outs)], dict(imp.config), name=read.name)
    imp.totals = {"request_lines": n, "log_prompt_tokens": round(p_total), "implied_prompt_tokens": sum(prompts),
                  "log_generated_tokens": round(g_total), "implied_output_tokens": sum(outs),
                  "stats_interval_s": interval}
    imp.cost = _vllm_cost(stats, p_int, g_int, interval, assumed, read.batches)
    return imp


def _vllm_cost(stats, p_int, g_int, interval, assumed, logged_steps=(),
               steps_said: str = "the log's Iteration lines time") -> CalibratedCost:
    timed = [b for b in logged_steps if not b.get("dummy") and b.get("elapsed_ms", 0) > 0]
    if len(timed) >= 2:   # --enable-logging-iteration-details: each step's tokens and time, as vLLM measured them
        tok = np.array([b["context_tokens"] + b["generation_tokens"] for b in timed], dtype=float)
        a, b = _nnls2(tok, np.ones(len(tok)), np.array([x["elapsed_ms"] / 1000 for x in timed]))
        how = (f"fitted to the {len(timed):,} steps {steps_said}: {b * 1000:.3g} ms per step + "
               f"{a * 1000:.3g} ms per token")
        if a > 0 or b > 0:
            assumed.append("step cost " + how)
            return CalibratedCost(per_token=a, per_step=b, unit="s", fit_info={"samples": len(timed), "how": how})
    tok, steps, busy = [], [], []
    for i, s in enumerate(stats):
        t = p_int[i] + g_int[i]
        run = s.get("running") or 0
        if t > 0 and (s.get("waiting") or 0) > 0:
            tok.append(t)
            steps.append(g_int[i] / max(run, 1))
            busy.append(interval)
    if len(tok) >= 2:
        a, b = _nnls2(np.array(tok), np.array(steps), np.array(busy))
        how = (f"fitted to the {len(tok)} stats intervals with requests waiting at their end (busy throughout): "
               f"{b * 1000:.3g} ms per step + {a * 1000:.3g} ms per token")
    else:
        allt = [p + g for p, g in zip(p_int, g_int)]
        a, b = interval / max(max(allt), 1.0), 0.0
        how = (f"the busiest interval taken as busy throughout ({max(allt):,.0f} tokens in {interval:g} s): "
               f"{a * 1000:.3g} ms per token, nothing per step"
               + (" (too few intervals with a queue to fit a cost per step)" if tok else ""))
    if a <= 0 and b <= 0:
        a = 1e-3
    assumed.append("step cost " + how)
    return CalibratedCost(per_token=a, per_step=b, unit="s", fit_info={"samples": len(tok), "how": how})


# ---------------------------------------------------------------------------------------------
# LMDeploy
# ---------------------------------------------------------------------------------------------

LMDEPLOY_NAMES = {"max_batch_size": "max_num_seqs", "max_prefill_token_num": "max_num_batched_tokens",
                  "block_size": "block_size", "session_len": "max_model_len"}


def _lmdeploy(read) -> Implied:
    """Each request's start line (its arrival to the ms, input tokens, max_new_tokens) and end line
    (its output tokens); the engine's settings under vLLM's names; the step cost fitted to the
    PyTorch engine's timed forward lines, else to the stats lines as vLLM's are."""
    imp = Implied("lmdeploy")
    lanes = sorted({r["engine"] for r in read.stats})
    if len(lanes) > 1:
        imp.why = "the log has several DP ranks: which rank served which request is not logged"
        return imp
    started = sorted((q for q in read.requests if q["kind"] == "received" and q.get("t") is not None
                      and q.get("prompt_tokens")), key=lambda q: q["t"])[:MAX_REQUESTS + 1]
    if not started:
        imp.why = ("no request lines with times: start LMDeploy with --log-level INFO (a `session=N, ... "
                   "input_tokens=N` line per request) to re-simulate its workload")
        return imp
    ends = {q["request"]: q for q in read.requests if q["kind"] == "finished"}
    assumed = imp.assumed
    assumed.append(f"{len(started):,} requests, one per start line (`session=N, input_tokens=N, ...`), arriving at "
                   "its logged time (to the millisecond), with its input tokens as the prompt")
    known = [ends[q["request"]]["completion_tokens"] for q in started if q["request"] in ends]
    mean = round(sum(known) / len(known)) if known else 256
    outs = []
    for q in started:
        e = ends.get(q["request"])
        outs.append(max(1, int(e["completion_tokens"])) if e and e.get("completion_tokens") is not None
                    else max(1, min(int(q.get("max_tokens") or mean), mean)))
    assumed.append(f"outputs: each request's output_tokens from its `finished` line ({len(known):,} of "
                   f"{len(started):,}); the rest {mean:,} tokens (the mean of those, capped by max_new_tokens)")
    said = {LMDEPLOY_NAMES[k]: v for k, v in (read.extra.get("server_config") or {}).items() if k in LMDEPLOY_NAMES}
    said["enable_chunked_prefill"] = True
    imp.from_log = dict(read.extra.get("server_config") or {})
    prompts = [int(q["prompt_tokens"]) for q in started]
    need = max(p + o for p, o in zip(prompts, outs))
    imp.config = _settings(said, assumed, need)
    assumed.append("LMDeploy's scheduler played by this project's vLLM-style scheduler, chunked prefill on, prefix "
                   "caching off (which prompts share a prefix is not logged)")
    imp.workload = Workload([Request(id=f"session {q['request']}", prompt_len=p, max_tokens=o, arrival_time=float(q["t"]))
                             for q, p, o in zip(started, prompts, outs)], dict(imp.config), name=read.name)
    stats = [r for r in read.stats if r["t"] is not None]
    interval = float(read.extra.get("stats_interval_s") or 10.0)
    p_int = [(r.get("prompt_throughput") or 0.0) * interval for r in stats]
    g_int = [(r.get("generation_throughput") or 0.0) * interval for r in stats]
    imp.totals = {"request_lines": len(started), "log_prompt_tokens": round(sum(p_int)),
                  "implied_prompt_tokens": sum(prompts), "log_generated_tokens": round(sum(g_int)),
                  "implied_output_tokens": sum(outs), "stats_interval_s": interval}
    timed = [b for b in read.batches if b.get("t") is not None]
    steps = [{"context_tokens": a["prefill_tokens"], "generation_tokens": a["decode_tokens"],
              "elapsed_ms": 1000.0 * (b["t"] - a["t"])} for a, b in zip(timed, timed[1:]) if 0 < b["t"] - a["t"] < 2.0]
    if steps:
        assumed.append("each forward's time: the time to the next forward line (the PyTorch engine's DEBUG lines, "
                       "to the ms; gaps of 2 s or more are idle, not taken)")
    if steps or stats:
        imp.cost = _vllm_cost(stats, p_int, g_int, interval, assumed, steps, "the log's forward lines time")
    else:
        imp.cost = CalibratedCost(per_token=1e-3, per_step=0.0, unit="s", fit_info={"samples": 0, "how": "a guess"})
        assumed.append("step cost 1 ms per token, a guess (no stats or timed forward line to fit one)")
    return imp


# ---------------------------------------------------------------------------------------------
# SGLang
# ---------------------------------------------------------------------------------------------

def _sglang(read) -> Implied:
    imp = Implied("sglang")
    lanes = sorted({b["lane"] for b in read.batches})
    if len(lanes) > 1:
        imp.why = "the log has several DP ranks: which rank served which request is not logged"
        return imp
    pre = [b for b in read.batches if b["kind"] == "prefill" and b["t"] is not None and b.get("new_seqs")]
    dec = [b for b in read.batches if b["kind"] == "decode" and b["t"] is not None]
    if not pre:
        imp.why = "no prefill batch lines with times: nothing says when requests came or how long their prompts were"
        return imp
    assumed = imp.assumed
    reqs: list[tuple[float, int]] = []
    for b in pre:
        tokens = int(b.get("new_tokens") or 0) + int(b.get("cached_tokens") or 0)
        k = min(int(b["new_seqs"]), MAX_REQUESTS + 1 - len(reqs))   # one more than may be taken: said, not cut
        for x in _shares(tokens, k):
            reqs.append((float(b["t"]), max(1, x)))
        if len(reqs) > MAX_REQUESTS:
            break
    n = len(reqs)
    assumed.append(f"{n:,} requests, one per #new-seq of the {len(pre):,} prefill batch lines, arriving at the "
                   "line's second (when the prefill ran: at or after they arrived), the batch's #new-token + "
                   "#cached-token shared evenly; a chunked prefill's later chunks count as requests of their own")
    interval = read.extra.get("decode_log_interval")
    k = float(interval) if interval else float(SGLANG_DEFAULT_INTERVAL)
    if not interval:
        assumed.append(f"decode lines every {SGLANG_DEFAULT_INTERVAL} decode steps (SGLang's default; the log "
                       "does not show its interval)")
    g_total = sum(int(b.get("running") or 0) for b in dec) * k
    outs = [max(1, x) for x in _shares(round(g_total), n)]
    assumed.append(f"outputs: the decode tokens the decode lines imply ({g_total:,.0f}: #running-req x {k:g} "
                   "steps per line) shared evenly")
    said: dict = {}
    limits = read.extra.get("server_config") or {}   # the scheduler's start-up line, where the log has it
    pools = [b["kv_tokens"] / b["kv_usage"] for b in dec if b.get("kv_tokens") and (b.get("kv_usage") or 0) >= 0.05]
    if limits.get("max_total_num_tokens", 0) > 0:
        said["kv_cache_tokens"] = limits["max_total_num_tokens"]
    elif pools:
        said["kv_cache_tokens"] = int(np.median(pools))
    runs = [int(b.get("running") or 0) + int(b.get("new_seqs") or 0) for b in read.batches]
    seqs = limits.get("max_running_requests", 0)
    said["max_num_seqs"] = seqs if seqs > 0 else max(max(runs), 1)
    chunk = limits.get("chunked_prefill_size", 0)   # -1: chunking off, a prefill takes max_prefill_tokens
    chunk = chunk if chunk > 0 else limits.get("max_prefill_tokens", 0)
    said["max_num_batched_tokens"] = chunk if chunk > 0 else max(max(int(b.get("new_tokens") or 0) for b in pre), 1)
    if limits.get("context_len", 0) > 0:
        said["max_model_len"] = limits["context_len"]
    imp.from_log = dict(said)
    if limits:
        assumed.append("settings from the scheduler's start-up line: " + ", ".join(
            f"{k}={v:,}" for k, v in limits.items()) + "; what it leaves out, from the batch lines")
    if "max_total_num_tokens" not in limits:
        assumed.append("settings from the log: the KV pool from #token / token usage" if pools else
                       "no KV pool in the log (no decode line with usage over 5%)")
    assumed.append(f"max_num_seqs {said['max_num_seqs']} "
                   + ("(max_running_requests)" if seqs > 0 else "(the most requests seen running)")
                   + f" and max_num_batched_tokens {said['max_num_batched_tokens']:,} "
                   + ("(its chunk size)" if chunk > 0 else "(the largest prefill batch)")
                   + "; a vLLM-style scheduler, not SGLang's own")
    assumed.append("prefix caching off in the simulator: the cached tokens are computed again")
    need = max(p + o for (_, p), o in zip(reqs, outs))
    imp.config = _settings(said, assumed, need)
    imp.workload = Workload([Request(id=f"r{i}", prompt_len=p, max_tokens=o, arrival_time=t)
                             for i, ((t, p), o) in enumerate(zip(reqs, outs))], dict(imp.config), name=read.name)
    imp.totals = {"prefill_lines": len(pre), "log_new_seqs": sum(int(b["new_seqs"]) for b in pre),
                  "log_prompt_tokens": sum(int(b.get("new_tokens") or 0) + int(b.get("cached_tokens") or 0) for b in pre),
                  "log_cached_tokens": sum(int(b.get("cached_tokens") or 0) for b in pre),
                  "implied_requests": n, "implied_prompt_tokens": sum(p for _, p in reqs),
                  "log_decode_tokens": round(g_total), "implied_output_tokens": sum(outs)}
    imp.cost = _sglang_cost(dec, pre, assumed)
    return imp


def _sglang_cost(dec, pre, assumed) -> CalibratedCost:
    r = np.array([float(b.get("running") or 0) for b in dec if (b.get("throughput") or 0) > 0 and b.get("running")])
    tp = np.array([float(b["throughput"]) for b in dec if (b.get("throughput") or 0) > 0 and b.get("running")])
    if len(r) >= 2:
        a, b = _nnls2(r, np.ones(len(r)), r / tp)
        how = (f"fitted to {len(r):,} decode lines (a step of #running-req tokens takes #running-req / gen "
               f"throughput s): {b * 1000:.3g} ms per step + {a * 1000:.3g} ms per token")
    else:
        a, b = 1e-3, 0.0
        how = "no decode line with a throughput: 1 ms per token, a guess"
    if a <= 0 and b <= 0:
        a = 1e-3
    assumed.append("step cost " + how)
    return CalibratedCost(per_token=a, per_step=b, unit="s", fit_info={"samples": int(len(r)), "how": how})


# ---------------------------------------------------------------------------------------------

def implied_workload(read, max_requests: int = MAX_REQUESTS) -> Implied:
    """The workload (and settings, step cost) a LogRead implies, with what was assumed; or why not
    (also when it is beyond what a re-simulation takes: more than `max_requests` requests, more
    than MAX_TOKENS tokens, a request over MAX_REQUEST_TOKENS)."""
    if read.engine == "vllm":
        imp = _vllm(read)
    elif read.engine == "sglang":
        imp = _sglang(read)
    elif read.engine == "lmdeploy":
        imp = _lmdeploy(read)
    else:
        return Implied(read.engine, why=(
            "a TensorRT-LLM log names no request (no arrival, prompt or output length), so it implies no workload to "
            "simulate" if read.engine == "trtllm" else
            "a text-generation-inference log times each request but gives no prompt length, so it implies no workload "
            "to simulate" if read.engine == "tgi" else
            "an Ollama log's access lines give no prompt or output length, so it implies no workload to simulate"
            if read.engine == "ollama" else
            f"re-simulation reads SGLang and vLLM logs (this is {read.engine}'s)"))
    w = imp.workload
    if w is not None:
        n = len(w.requests)
        total = sum(r.prompt_len + r.max_tokens for r in w.requests)
        longest = max(r.prompt_len + r.max_tokens for r in w.requests)
        why = (f"the log implies {n:,} requests, more than {max_requests:,}" if n > max_requests else
               f"the log implies {total:,} tokens, more than {MAX_TOKENS:,}" if total > MAX_TOKENS else
               f"the log implies a request of {longest:,} tokens, more than {MAX_REQUEST_TOKENS:,}"
               if longest > MAX_REQUEST_TOKENS else "")
        if why:
            imp.why = why + ": too much to re-simulate here"
            imp.workload = None
    return imp


def _at(times: np.ndarray, step_start: np.ndarray, col: np.ndarray) -> np.ndarray:
    """The column's value in the last simulated step that started at or before each time (NaN before any)."""
    i = np.searchsorted(step_start, times, side="right") - 1
    out = np.full(len(times), np.nan)
    ok = i >= 0
    out[ok] = col[i[ok]]
    return out


def resimulate(read, max_steps: int = MAX_STEPS, max_requests: int = MAX_REQUESTS) -> Resim:
    """The implied workload simulated under the log's settings and step cost, and the gauges of the
    log beside the simulator's at the log's own times. RuntimeError past max_steps."""
    imp = implied_workload(read, max_requests)
    res = Resim(imp)
    if imp.workload is None:
        return res
    tr = simulate(imp.workload, imp.config, cost=imp.cost, max_steps=max_steps)
    res.trace = tr
    s = tr.steps
    start = s["start"].to_numpy(dtype=float)
    end = s["end"].to_numpy(dtype=float)
    blocks = float(imp.config["num_gpu_blocks"])
    free = s["free_blocks"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    kv = 1.0 - free / blocks
    rows = []
    if read.engine in ("vllm", "lmdeploy"):   # stats lines: gauges at the line, throughputs over the interval
        recs = [r for r in read.stats if r["t"] is not None]
        times = np.array([r["t"] for r in recs], dtype=float)
        interval = imp.totals["stats_interval_s"]
        # as vLLM counts them: a request's prompt (less cached tokens: none here) once, when its first
        # token comes; every sampled token (a request's first, then one per decode step)
        rq = tr.requests
        ft = rq["first_token_time"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
        pl = rq["prompt_len"].astype("Float64").to_numpy(dtype=float, na_value=0.0)
        order = np.argsort(np.where(np.isnan(ft), np.inf, ft), kind="stable")
        ft_sorted, pre = ft[order], np.cumsum(pl[order])
        first = np.cumsum(np.ones(len(ft_sorted)))
        dec = np.cumsum(s["decode_tokens"].to_numpy(dtype=float))

        def upto(x, keys, cum):
            i = np.searchsorted(keys, x, side="right")
            return np.where(i > 0, cum[np.maximum(i - 1, 0)] if len(cum) else 0.0, 0.0)

        def rate(keys, cum):
            return (upto(times, keys, cum) - upto(times - interval, keys, cum)) / interval
        gen = rate(end, dec) + rate(ft_sorted, first)
        gauges = {"running": ("running", _at(times, start, s["running"].to_numpy(dtype=float))),
                  "waiting": ("waiting", _at(times, start, s["waiting"].to_numpy(dtype=float))),
                  "kv_usage": ("kv_usage", _at(times, start, kv)),
                  "prompt_throughput": ("prompt_throughput", rate(ft_sorted, pre)),
                  "generation_throughput": ("generation_throughput", gen)}
    else:
        recs = [b for b in read.batches if b["t"] is not None]
        times = np.array([b["t"] for b in recs], dtype=float)
        gauges = {"running": ("running", _at(times, start, s["running"].to_numpy(dtype=float))),
                  "waiting": ("waiting", _at(times, start, s["waiting"].to_numpy(dtype=float))),
                  "kv_usage": ("kv_usage", _at(times, start, kv))}
    after = times > (end[-1] if len(end) else -math.inf)
    for g, (key, sim) in gauges.items():
        sim = sim.copy()
        if g in ("running", "waiting", "kv_usage"):
            sim[after] = 0.0        # the simulated server is done: nothing running or waiting
        log = np.array([np.nan if r.get(key) is None else float(r[key]) for r in recs])
        rows.append(pd.DataFrame({"time": times, "gauge": g, "log": log, "sim": sim}))
    res.compare = pd.concat(rows, ignore_index=True)
    res.preemptions = preemptions(read, tr)
    return res


def compare_summary(compare: pd.DataFrame) -> dict:
    """Per gauge: the log's and the simulator's means and the mean absolute difference."""
    out = {}
    for g, d in compare.groupby("gauge", sort=False):
        ok = d["log"].notna() & d["sim"].notna()
        lg, sm = d["log"][ok], d["sim"][ok]
        out[g] = {"points": int(ok.sum()), "log_mean": float(lg.mean()) if len(lg) else None,
                  "sim_mean": float(sm.mean()) if len(sm) else None,
                  "mean_abs_diff": float((lg - sm).abs().mean()) if len(lg) else None}
    return out
