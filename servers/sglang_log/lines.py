"""SGLang's scheduler lines: one regex per form, and the fields each holds (see docs/server-logs.md).

- `[2025-09-03 18:33:18 TP0] Prefill batch. #new-seq: 1, #new-token: 103, #cached-token: 1, token
  usage: 0.00, #running-req: 0, #queue-req: 0, ` (period style, 2025; a trailing `, ` on some builds)
- `[2026-03-17 17:35:07 DP9 TP9] Decode batch, #running-req: 12, #token: 768, ...` (comma style,
  late 2025 on); ranks ` TP0`, ` DP2 TP2`, ` TP0 EP0`, ` ATTN_CP4 TP4`, or none; `[gpu_id=0] ` in 2024
- `[16:43:29 TP0] Prefill batch. ..., cache hit rate: 2.76%, ...` (2024: time of day only)
- `[date time TP0] Prefill batch [1042], ...` (0.5.2x with SGLANG_LOG_FORWARD_ITERS: the forward
  iteration after the head), and 0.5.2x's fields (KEYS)
- `new fill batch. #seq: 1. #cached_token: 0. #new_token: 12. #remaining_req: 0. #running_req: 0.
  tree_cache_hit_rate: 0.00%.` and a bare `#running-req: 1, #token: 35, token usage: 0.00, gen
  throughput (token/s): 9.34, #queue-req: 0` decode line (2024-04 legacy)
- request lines: uvicorn's access line, `Receive: obj=...rid='...'` / `Finish: obj=..., out={...
  'meta_info': {...}}` (`--log-requests`), or their JSON form (`--log-requests-format json`: alone,
  or in 0.5.x `[date time] {"timestamp": ..., "event": "request.received", "rid": ...}`).
"""
from __future__ import annotations

import re

from servers.server_log.fields import norm_key, split

_BRACKET = (r"(?:\[(?:(?P<date>\d{4}-\d\d-\d\d) )?(?P<time>\d\d:\d\d:\d\d(?:[.,]\d{1,6})?)?"
            r"(?P<ranks>(?: ?[A-Z][A-Z_]{0,15}\d{1,5}){0,6})\] |\[gpu_id=(?P<gpu>\d{1,5})\] )?")
# ` [N]`: the forward iteration, with SGLANG_LOG_FORWARD_ITERS (0.5.2x metrics_reporter.py)
HEAD = re.compile(_BRACKET + r"(?P<head>Prefill batch|Decode batch|new fill batch)(?: \[(?P<iter>\d{1,15})\])?"
                  r"(?P<sep>[.,])(?= |$)")
BARE = re.compile(_BRACKET + r"(?=#running-req: \d+, #token: \d+)")
TIME_IN = re.compile(r"\[(?:(?P<date>\d{4}-\d\d-\d\d) )?(?P<time>\d\d:\d\d:\d\d)(?:[.,]\d{1,6})?[^\]\n]{0,60}\]")
ACCESS = re.compile(r"INFO: +(?P<client>\S{1,80}) - \"(?P<method>[A-Z]{3,7}) (?P<path>\S{1,200}) HTTP/[\d.]{1,3}\" "
                    r"(?P<status>\d{3})")
# the scheduler's decode-step retraction (KV pool full: requests sent back to the queue, their KV freed)
RETRACT = re.compile(_BRACKET + r"KV cache pool is full\. Retract requests\.(?:\s*#retracted_reqs: (?P<n>\d{1,9}))?"
                     r"(?:,\s*#new_tokens_gained: (?P<gained>\d{1,15}))?"
                     r"(?:,\s*#mamba_num_gained: (?P<mamba>\d{1,15}))?"
                     r"(?:,\s*#new_token_ratio: (?P<a>\d{1,6}(?:\.\d{1,8})?) -> (?P<b>\d{1,6}(?:\.\d{1,8})?))?")
# the scheduler's start-up line (scheduler.py): `max_total_num_tokens=N, chunked_prefill_size=N, max_prefill_tokens=N,
# max_running_requests=N, context_len=N[, available_gpu_mem=X GB]` (older builds: fewer of them, or `[gpu_id=0] ` first)
LIMIT_KEYS = ("max_total_num_tokens", "chunked_prefill_size", "max_prefill_tokens", "max_running_requests",
              "context_len")
LIMITS = re.compile(r"\b(" + "|".join(LIMIT_KEYS) + r")=(-?\d{1,15})\b")
RECEIVE = re.compile(r"\bReceive: obj=\w{1,40}\(")
FINISH = re.compile(r"\bFinish: obj=\w{1,40}\(")
RID = re.compile(r"""\brid=['"](?P<rid>[^'"]{1,200})['"]|['"]id['"]: ['"](?P<id>[^'"]{1,200})['"]""")
JSON_RID = re.compile(r'"rid": ?"(?P<rid>[^"]{1,200})"')
JSON_START = re.compile(r"\s*(?:\[[^\]\n]{1,80}\] )?\{")   # the request logger's `[date time] ` first, or nothing
JSON_EVENT = re.compile(r'"event": ?"(?P<e>request\.[a-z_.]{1,40})"')
META_INT = re.compile(r"""['"](?P<k>prompt_tokens|completion_tokens|cached_tokens)['"]: (?P<v>\d{1,12})""")
META_E2E = re.compile(r"""['"]e2e_latency['"]: (?P<v>\d+(?:\.\d+)?)""")

KEYS = {
    "#new-seq": "new_seqs", "#seq": "new_seqs", "#new-token": "new_tokens", "#new_token": "new_tokens",
    "#cached-token": "cached_tokens", "#cached_token": "cached_tokens",
    "#running-req": "running", "#running_req": "running", "#queue-req": "waiting", "#remaining_req": "waiting",
    "token usage": "kv_usage", "full token usage": "full_kv_usage", "swa token usage": "swa_kv_usage",
    "mamba usage": "mamba_usage", "#token": "kv_tokens", "#full token": "full_kv_tokens",
    "#swa token": "swa_kv_tokens", "gen throughput (token/s)": "gen_throughput",
    "input throughput (token/s)": "input_throughput", "cache hit rate": "cache_hit_rate",
    "tree_cache_hit_rate": "cache_hit_rate", "cuda graph": "cuda_graph", "npu graph": "npu_graph",
    "#pending-token": "pending_tokens", "largest-len": "largest_len", "accept len": "accept_len",
    "accept rate": "accept_rate", "#prealloc-req": "prealloc_req", "#bootstrap-req": "bootstrap_req",
    "#inflight-req": "inflight_req", "#transfer-req": "transfer_req", "#retracted-req": "retracted_req",
    "pre-allocated usage": "prealloc_usage", "#unbootstrapped-req": "unbootstrapped_req",
    # SGLang 0.5.2x (scheduler_components/metrics_reporter.py, pool_stats_observer.py)
    "#replay-token": "replay_tokens", "cpu graph": "cpu_graph", "musa graph": "musa_graph",
    "mamba num": "mamba_num", "#gpu token": "gpu_kv_tokens", "gpu token usage": "gpu_kv_usage",
    "#cpu token": "cpu_kv_tokens", "cpu token usage": "cpu_kv_usage", "cap len": "cap_len",
    "block accept len": "block_accept_len", "#optimistic-req": "optimistic_req",
    "#host-receive-req": "host_receive_req", "waiting-image-req": "waiting_image_req",
}
GRAPH_FLAGS = {"cuda_graph", "npu_graph", "cpu_graph", "musa_graph"}
NUMERIC = set(KEYS.values()) - GRAPH_FLAGS
CORE = ("new_seqs", "new_tokens", "cached_tokens", "running", "waiting", "kv_usage", "throughput")
REQUIRED = {"prefill": ("new_seqs", "new_tokens", "cached_tokens", "running", "waiting"),
            "decode": ("running", "waiting")}
PD_PREFILL, PD_DECODE = {"prealloc_req", "bootstrap_req", "inflight_req"}, {"transfer_req", "retracted_req",
                                                                            "prealloc_usage"}
HYBRID = {"full_kv_usage", "swa_kv_usage", "mamba_usage", "full_kv_tokens", "swa_kv_tokens"}


def parse_batch(text: str):
    """(record, complete, prefix, style) of an SGLang batch line, or None when the line holds none.
    style: "comma", "period", "legacy" or "bare"."""
    if "batch" in text:
        m = HEAD.search(text)
        style = None
        if m:
            style = "legacy" if m["head"] == "new fill batch" else ("comma" if m["sep"] == "," else "period")
            kind = "prefill" if m["head"] != "Decode batch" else "decode"
    else:
        m = None
    if m is None:
        if "#running-req: " not in text:
            return None
        m = BARE.search(text)
        if m is None:
            return None
        style, kind = "bare", "decode"
    fields, whole = split(text[m.end():])
    rec: dict = {"kind": kind}
    other: dict = {}
    ok = whole
    for k, v, numeric in fields:
        name = KEYS.get(k)
        if name is None:
            other[norm_key(k)] = v
        elif name in NUMERIC and (not numeric or isinstance(v, bool)):
            ok = False      # a number expected, something else found: damaged
        else:
            rec[name] = v
    if "kv_usage" not in rec and "full_kv_usage" in rec:
        rec["kv_usage"] = rec["full_kv_usage"]      # hybrid models: the full-attention pool
    elif "kv_usage" not in rec and "gpu_kv_usage" in rec:
        rec["kv_usage"] = rec["gpu_kv_usage"]       # hierarchical sparse KV: the pool on the GPU
    if m.groupdict().get("iter") is not None:   # (a bare decode line has none)
        rec["forward_iter"] = int(m["iter"])
    rec["throughput"] = rec.get("input_throughput" if kind == "prefill" else "gen_throughput")
    ok = ok and all(k in rec for k in REQUIRED[kind]) and len(fields) >= 3
    if other:
        rec["other"] = other
    meta = {"date": m["date"], "time": m["time"], "ranks": (m["ranks"] or "").strip()
            or (f"gpu_id={m['gpu']}" if m["gpu"] else ""), "style": style}
    return rec, ok, text[:m.start()], meta


def time_of(text: str):
    """(date, time) of SGLang's own `[date time ...]` prefix in a non-record line, or (None, None)."""
    m = TIME_IN.search(text, 0, 120)
    return (m["date"], m["time"]) if m else (None, None)


def request_line(text: str):
    """A request record (kind http / receive / finish / json) from a line, or None."""
    if "INFO:" in text and "HTTP/" in text:
        m = ACCESS.search(text)
        if m:
            return {"kind": "http", "method": m["method"], "path": m["path"], "status": int(m["status"])}
    for kind, rx in (("receive", RECEIVE), ("finish", FINISH)):
        if rx.search(text):
            rec = {"kind": kind}
            m = RID.search(text)
            if m:
                rec["request"] = m["rid"] or m["id"]
            if kind == "finish":
                _meta_info(text, rec, True)
            return rec
    if '"rid"' in text and JSON_START.match(text):
        m = JSON_RID.search(text)
        if m:
            # 0.5.x's request logger: `[date time] {"timestamp": ..., "event": "request.received" |
            # "request.finished", "rid": ...}` (utils/request_logger.py, log_utils.py log_json); earlier
            # builds printed the object alone, with no event
            ev = JSON_EVENT.search(text)
            kind = {"request.received": "receive", "request.finished": "finish"}.get(ev["e"] if ev else "", "json")
            return _meta_info(text, {"kind": kind, "request": m["rid"]}, kind == "finish")
    return None


def _meta_info(text: str, rec: dict, latency: bool) -> dict:
    """rec with the token counts a request line's meta_info gives (and its e2e latency)."""
    for mm in META_INT.finditer(text):
        rec[mm["k"]] = int(mm["v"])
    if latency:
        mm = META_E2E.search(text)
        if mm:
            rec["e2e_latency"] = float(mm["v"])
    return rec


def retract_line(text: str):
    """A retraction record (how many requests, the new-token ratio before -> after, the tokens
    gained where printed) and the ranks of its prefix (`DP1 TP0`, "" for none), or None."""
    m = RETRACT.search(text)
    if m is None:
        return None
    rec = {"retracted": int(m["n"]) if m["n"] else None}
    if m["gained"]:
        rec["new_tokens_gained"] = int(m["gained"])
    if m["mamba"]:
        rec["mamba_num_gained"] = int(m["mamba"])
    if m["a"]:
        rec["new_token_ratio"] = [float(m["a"]), float(m["b"])]
    return rec, (m["ranks"] or "").strip()


def limits_line(text: str) -> dict | None:
    """The scheduler's limits its start-up line states ({key: int} of LIMIT_KEYS), or None."""
    if "max_total_num_tokens=" not in text:
        return None
    return {k: int(v) for k, v in LIMITS.findall(text)} or None
