"""TensorRT-LLM's log lines: the PyTorch executor's per-iteration line, the start-up lines that
state the scheduler's settings, the version banner.

Prefixes: the Python logger's `[MM/DD/YYYY-HH:MM:SS] [TRT-LLM] [I] ` (tensorrt_llm/logger.py:
`%m/%d/%Y-%H:%M:%S`, a severity letter F/E/W/I/V), with a rank or a module tag where a build
adds one (`[TRT-LLM] [RANK 0] [I] `, `[TRT-LLM] [MPI_Rank 1] [I] `, `[TRT-LLM] [I] [_torch][RANK 0] `);
the C++ logger's `[TensorRT-LLM][INFO] ` (no time) or, in 2026 builds, `MM-DD-YYYY HH:MM:SS.uuuuuu
[TRT-LLM] [I] `; srun's `0: ` before any of them.

The iteration line (`print_iter_log: true`; tensorrt_llm/_torch/pyexecutor/py_executor.py, printed
by the first rank, or the ranks in TLLM_PROFILE_LOG_RANKS), by era:
- early 2025: `iter = N, global_rank = G, rank = R, currank_total_requests = A/B, elapsed_time = Xs,
  timestamp = YYYY-MM-DD HH:MM:SS[, num_scheduled_requests: S], states = {'num_ctx_requests': C,
  'num_ctx_tokens': T, 'num_generation_tokens': D}` (num_scheduled_requests from NVIDIA/TensorRT-LLM
  PR 3914, April 2025);
- from PR 6906 (August 2025): `elapsed_time` became `host_step_time = Xms, prev_device_step_time =
  Yms` (`N/A` on the first step): the host's time of this loop pass, and the GPU's time of the
  pass before it;
- 2026 (PR 14206): `num_scheduled_requests = S, [adp_dummy_ctx_tokens = N, adp_dummy_gen_tokens = N, ]
  kv_cache_util = U` (used share of the KV blocks, or N/A) after the ranks; `states` may hold
  `cached_kv_tokens` (PR 14734).
The Triton backend (tensorrtllm_backend's libtensorrtllm.cc, at `--log-verbose`) prints each
iteration's stats as one JSON object after glog's prefix (`I1218 03:35:37.688135 20559
libtensorrtllm.cc:1205] {"Active Request Count":1,"Context Requests":1,...,"Iteration Counter":0,
...,"Scheduled Requests":1,"Timestamp":"12-18-2023 03:35:37",...,"Total Context Tokens":2048,"Used KV
cache blocks":1}`): its context and generation requests, the context tokens, the KV blocks used of
the pool's, the active requests; no generation token count (one a generation request, beam width 1).

`currank_total_requests` counts the requests fetched so far (this rank's under attention DP, all
ranks'); `num_generation_tokens` counts generation requests plus draft tokens and, before
`num_scheduled_requests` existed, CUDA-graph padding; `num_scheduled_requests` is the batch's size
(context + generation requests).
"""
from __future__ import annotations

import json
import re

from servers.server_log.fields import INT_MAX

# `[04/28/2025-09:56:44] [TRT-LLM] ...` (Python) or `05-20-2026 23:24:41.123456 [TRT-LLM] ...` (2026 C++)
PREFIX = re.compile(r"(?:\[(?P<md>\d\d)/(?P<dd>\d\d)/(?P<y>\d{4})-(?P<hms>\d\d:\d\d:\d\d)\] "
                    r"|(?P<md2>\d\d)-(?P<dd2>\d\d)-(?P<y2>\d{4}) (?P<hms2>\d\d:\d\d:\d\d)(?:\.\d{1,6})? )"
                    r"\[TRT-LLM\](?P<tags>(?: ?\[[^\[\]]{1,40}\]){0,6}) ?")
RANK_TAG = re.compile(r"\[(?:RANK|MPI_Rank) (\d{1,6})\]")
ITER_HEAD = re.compile(r"\biter = (?P<iter>\d{1,15}), global_rank = (?P<grank>\d{1,6}), rank = (?P<rank>\d{1,6}), ")
# one field of the line: `key = value` or (early 2025) `num_scheduled_requests: N`
FIELD = re.compile(r"(?P<k>[a-z_]{1,40})(?: = |: )(?P<v>[^,{}]{0,60}?)(?:, |\s*$)")
STATES = re.compile(r"states = \{(?P<body>[^{}]{0,2000})\}")
STATE = re.compile(r"'(?P<k>\w{1,60})': (?P<v>-?\d{1,18}(?:\.\d{1,12})?|True|False|None)")
NEEDED_STATES = ("num_ctx_requests", "num_ctx_tokens", "num_generation_tokens")
MS = re.compile(r"(\d{1,12}(?:\.\d{1,20})?(?:[eE][+-]?\d{1,3})?)(ms|s)")
DATE_TIME = re.compile(r"(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)")
COUNT_PAIR = re.compile(r"(\d{1,15})/(\d{1,15})")

VERSION = re.compile(r"TensorRT-LLM version: (?P<v>\d{1,3}\.\d{1,3}[\w.+-]{0,40})")
# the start-up lines that state the scheduler's settings (the names as TensorRT-LLM prints them)
SETTINGS_LINE = re.compile(r"\b(max_seq_len|max_num_requests|max_num_tokens|max_batch_size)=(\d{1,12})\b")
BLOCKS_LINE = re.compile(r"Max KV cache blocks per sequence: (\d{1,12})(?: \[window size=\d{1,12}\])?, "
                         r"tokens per block=(\d{1,6}), primary blocks=(\d{1,12}), secondary blocks=(\d{1,12})")
TOKENS_PER_BLOCK = re.compile(r"Number of tokens per block: (\d{1,6})")
PRIMARY_POOL = re.compile(r"Number of blocks in KV cache primary pool: (\d{1,12})")
KV_TOKENS = re.compile(r"Allocated [\d.]{1,12} GiB for max tokens in paged KV cache \((\d{1,15})\)")
GPT_MODEL = re.compile(r"TRT ?GptModel (maxNumSequences|maxBatchSize|maxNumTokens|maxInputLen|maxSequenceLen|"
                       r"maxBeamWidth): (\d{1,12})")
POLICY = re.compile(r"(Capacity Scheduler Policy|Context Chunking Scheduler Policy): (\w{2,40})")
GPT_NAMES = {"maxNumSequences": "max_num_sequences", "maxBatchSize": "max_batch_size",
             "maxNumTokens": "max_num_tokens", "maxInputLen": "max_input_len", "maxSequenceLen": "max_seq_len",
             "maxBeamWidth": "max_beam_width"}
POLICY_NAMES = {"Capacity Scheduler Policy": "capacity_scheduler_policy",
                "Context Chunking Scheduler Policy": "context_chunking_policy"}


JSON_TIME = re.compile(r"(\d\d)-(\d\d)-(\d{4}) (\d\d:\d\d:\d\d)")
JSON_NEEDED = ("Iteration Counter", "Context Requests", "Generation Requests", "Total Context Tokens")


def _int(v: str):
    n = int(v)
    return n if n <= INT_MAX else None


def _ms(v: str) -> float | None:
    """`12.5ms` or `0.0050s` (early 2025's elapsed_time) in ms; None for `N/A` or anything else."""
    m = MS.fullmatch(v.strip())
    if m is None:
        return None
    x = float(m[1]) * (1.0 if m[2] == "ms" else 1000.0)
    return x if x < 1e15 else None


def prefix_time(text: str, end: int):
    """(date `YYYY-MM-DD`, `HH:MM:SS`, rank from a tag or None, where the prefix starts) of the
    logger's prefix before `end`, or None."""
    m = PREFIX.search(text, 0, end)
    if m is None:
        return None
    if m["md"]:
        date, hms = f"{m['y']}-{m['md']}-{m['dd']}", m["hms"]
    else:
        date, hms = f"{m['y2']}-{m['md2']}-{m['dd2']}", m["hms2"]
    r = RANK_TAG.search(m["tags"] or "")
    return date, hms, (int(r[1]) if r else None), m.start()


def parse_iteration(text: str):
    """("iteration", record, complete, prefix) of an iteration line, or None. Incomplete: the head
    is there but not its `states = {...}` with the three counts (a wrapped or cut line), or a
    field that should be a number is not one."""
    h = ITER_HEAD.search(text)
    if h is None:
        return None
    pt = prefix_time(text, h.start())
    prefix = text[:pt[3]] if pt else text[:h.start()]
    rec: dict = {"iteration": int(h["iter"]), "rank": int(h["grank"]), "local_rank": int(h["rank"])}
    if pt:
        rec["_date"], rec["_hms"] = pt[0], pt[1]
    st = STATES.search(text, h.end())
    body = text[h.end():st.start()] if st else text[h.end():]
    tail = text[st.end():].removeprefix(",").strip() if st else ""
    ok = st is not None
    other: dict = {}
    keys: list[str] = []
    for part in (body, tail):
        pos = 0
        while pos < len(part):
            m = FIELD.match(part, pos)
            if m is None or m.end() == pos:
                ok = False      # text that is no field: a cut line or another build's
                break
            pos = m.end()
            keys.append(m["k"])
            ok = _field(m["k"], m["v"].strip(), rec, other) and ok
    if st is not None:
        states = {m["k"]: m["v"] for m in STATE.finditer(st["body"])}
        for k in NEEDED_STATES:
            v = states.pop(k, None)
            if v is None or not v.lstrip("-").isdigit() or _int(v) is None:
                ok = False
            else:
                rec[k.removeprefix("num_").replace("ctx", "context")] = _int(v)
        if "cached_kv_tokens" in states and states["cached_kv_tokens"].isdigit():
            rec["cached_tokens"] = _int(states.pop("cached_kv_tokens"))
        for k, v in states.items():
            other[k] = v
    if other:
        rec["other"] = other
    rec["_keys"] = tuple(keys)     # which era's line (the reader's traits)
    # the batch's size is context + generation requests: what it leaves beside the context ones
    if ok and rec.get("scheduled_requests") is not None and rec["scheduled_requests"] >= rec["context_requests"]:
        rec["generation_requests"] = rec["scheduled_requests"] - rec["context_requests"]
    return "iteration", rec, ok, prefix


def parse_json_iteration(text: str):
    """("iteration", record, complete, prefix) of the Triton backend's iteration-stats JSON line, or
    None. Incomplete: an object that does not parse (a wrapped or cut line), or one without the
    counts."""
    at = text.find("{")
    # the object's keys come sorted: a line wrapped inside it still starts with its first
    if at < 0 or '"Iteration Counter"' not in text[at:] and not text.startswith('{"Active Request Count"', at):
        return None
    prefix = text[:at]
    end = text.rfind("}")
    try:
        obj = json.loads(text[at:end + 1]) if end > at else None
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        return "iteration", {"rank": 0, "local_rank": 0}, False, prefix
    counts = {k: obj.get(k) for k in JSON_NEEDED}
    ok = all(v.__class__ is int and 0 <= v <= INT_MAX for v in counts.values())
    rec: dict = {"rank": 0, "local_rank": 0}
    if not ok:
        return "iteration", rec, False, prefix
    rec.update(iteration=counts["Iteration Counter"], context_requests=counts["Context Requests"],
               context_tokens=counts["Total Context Tokens"], generation_requests=counts["Generation Requests"],
               generation_tokens=counts["Generation Requests"], _form="triton")
    sched = obj.get("Scheduled Requests")
    if sched.__class__ is int and 0 <= sched <= INT_MAX:
        rec["scheduled_requests"] = sched
    active = obj.get("Active Request Count")
    if active.__class__ is int and 0 <= active <= INT_MAX:
        rec["active_requests"] = active
    used, most = obj.get("Used KV cache blocks"), obj.get("Max KV cache blocks")
    if used.__class__ is int and most.__class__ is int and 0 <= used <= most and most > 0:
        rec["kv_usage"] = round(used / most, 6)
        rec["kv_blocks"] = used
    m = JSON_TIME.fullmatch(str(obj.get("Timestamp", "")))
    if m:
        rec["_date"], rec["_hms"] = f"{m[3]}-{m[1]}-{m[2]}", m[4]
    return "iteration", rec, True, prefix


def _field(k: str, v: str, rec: dict, other: dict) -> bool:
    """One `key = value` of the iteration line into the record; False where a known key's value
    is not what that key holds."""
    if k == "num_scheduled_requests":
        if not v.isdigit():
            return False
        rec["scheduled_requests"] = _int(v)
    elif k in ("host_step_time", "elapsed_time"):
        ms = _ms(v)
        if ms is None:
            return False
        rec["elapsed_ms"] = ms
    elif k == "prev_device_step_time":
        if v != "N/A":
            ms = _ms(v)
            if ms is None:
                return False
            rec["prev_device_ms"] = ms
    elif k == "kv_cache_util":
        if v != "N/A":
            try:
                x = float(v)
            except ValueError:
                return False
            if not 0.0 <= x <= 1.0:
                return False
            rec["kv_usage"] = x
    elif k == "timestamp":
        m = DATE_TIME.fullmatch(v)
        if m is None:
            return False
        rec["_date"], rec["_hms"] = m[1], m[2]     # the line's own time: a full date
    elif k == "currank_total_requests":
        m = COUNT_PAIR.fullmatch(v)
        if m is None:
            return False
        rec["fetched_rank"], rec["fetched_total"] = _int(m[1]), _int(m[2])
    elif k in ("adp_dummy_ctx_tokens", "adp_dummy_gen_tokens"):
        if not v.isdigit():
            return False
        rec[k.replace("adp_dummy_ctx", "dummy_context").replace("adp_dummy_gen", "dummy_generation")] = _int(v)
    else:
        other[k] = v
    return True


# (a word the line must hold, its pattern, the settings of a match)
CONFIG_LINES = (
    ("KV cache blocks per sequence", BLOCKS_LINE,
     lambda m: {"tokens_per_block": int(m[2]), "kv_primary_blocks": int(m[3]), "kv_secondary_blocks": int(m[4])}),
    ("tokens per block", TOKENS_PER_BLOCK, lambda m: {"tokens_per_block": int(m[1])}),
    ("primary pool", PRIMARY_POOL, lambda m: {"kv_primary_blocks": int(m[1])}),
    ("paged KV cache", KV_TOKENS, lambda m: {"kv_cache_tokens": int(m[1])}),
    ("GptModel", GPT_MODEL, lambda m: {GPT_NAMES[m[1]]: int(m[2])}),
    ("Scheduler Policy", POLICY, lambda m: {POLICY_NAMES[m[1]]: m[2]}),
)


def config_line(text: str) -> dict | None:
    """The scheduler settings a start-up line states, or None."""
    out: dict = {}
    if "=" in text and "max_" in text:
        out.update({k: int(v) for k, v in SETTINGS_LINE.findall(text)})
    for word, pattern, settings in CONFIG_LINES:
        if word in text:
            m = pattern.search(text)
            if m:
                out.update(settings(m))
            break
    return out or None


def version_line(text: str) -> str | None:
    m = VERSION.search(text)
    return m["v"] if m else None
