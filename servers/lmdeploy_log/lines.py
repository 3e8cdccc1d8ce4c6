"""LMDeploy's log lines (`lmdeploy serve api_server`, PyTorch and TurboMind engines): the stats
logger's line, the engines' forward lines, the request lines, the start-up settings.

Python logger (lmdeploy/utils.py): `2026-01-20 05:47:12,170 - lmdeploy - INFO - file.py:732 - `
(2024 builds without `file.py:N - `; with LMDEPLOY_LOG_PID `[pid=N ppid=M] - ` before the file); `--log-level INFO` or DEBUG shows
what is below (the CLI's default is WARNING). TurboMind's C++ logger: `[TM][INFO] ` (no time
until v0.14, `[TM][INFO][MMDD.HH:MM:SS.uuuuuu][file.cc:N] ` after).

Stats (lmdeploy/metrics/loggers.py, printed every 10 s while tokens flow; `--enable-metrics` from
v0.9.2, on by default from v0.11), after `[YYYY-mm-dd HH:MM:SS DP{rank}] `:
- July 2025 (#3534): `Avg prompt throughput: X tokens/s, Avg generation throughput: X tokens/s,
  Finished: N reqs, Unfinished: N reqs, Running: N reqs, Waiting: N reqs, GPU KV cache usage: X%`
  (December 2025, #4184: `, Prefix cache hit rate: X%`), a `SpecDecoding metrics: ...` line after;
- February 2026 (#4297): `Avg thr (in/out): X / Y tokens/s, API server (completed/routed/waiting):
  a / b / c, Engine (running/waiting): r / w, KV cache: X%, [Prefix cache hit rate: X%, ]
  [SpecDecoding metrics: ...]`;
- March 2026 on (#4410): `Server (succeeded/failed/routed/waiting): a / b / c / d` in its place,
  and `Avg MM preprocess: X s/req, `.

Steps. The PyTorch engine (DEBUG, pytorch/engine/inputs_maker.py): `Sending forward inputs:
num_tokens=N, batch_size=B, is_decoding=True|False[, has_vision=...]` per forward: a batch of
prefills or of decodes (the engine does not mix them). TurboMind to v0.11 (INFO,
src/turbomind/models/llama/LlamaBatch.cc), per mini-batch holding a prefill: `[Forward] [a, b),
dc=D, pf=P, sum_q=Q, sum_k=K, max_q=.., max_k=..` (D decoding and P prefilling sequences, Q tokens
in the forward; before v0.5.3 `dc_bsz = D, pf_bsz = P, n_tok = Q, max_q = .., max_k = ..`).

Requests (serve/core/async_engine.py): `session=S, [history_tokens=H, ]input_tokens=N,
max_new_tokens=M, [seq_start=.., seq_end=.., step=.., ]prep=..` when one starts (before v0.7
`session_id=S, ...`), `session S finished, reason "R", input_tokens N, output_tokens M` when it
ends (v0.7 on).
"""
from __future__ import annotations

import re

from servers.server_log.fields import INT_MAX

PY_PREFIX = re.compile(r"(?P<date>\d{4}-\d\d-\d\d) (?P<hms>\d\d:\d\d:\d\d)(?:,(?P<ms>\d{3}))? - (?P<name>[\w.]{1,40}) - "
                       r"(?P<lvl>DEBUG|INFO|WARNING|ERROR|CRITICAL) - (?:\[pid=\d{1,10} ppid=\d{1,10}\] - )?"
                       r"(?:(?P<file>[\w.-]{1,80}\.py):(?P<lno>\d{1,6}) - )?")   # no file:line before 2025
STATS_HEAD = re.compile(r"\[(?P<date>\d{4}-\d\d-\d\d) (?P<hms>\d\d:\d\d:\d\d) (?P<lane>DP\d{1,4}|Engine \d{1,4})\] "
                        r"(?=Avg (?:prompt throughput|thr \(in/out\)): )")
NUM = r"(\d{1,15}(?:\.\d{1,6})?)"
THR = re.compile(rf"Avg thr \(in/out\): {NUM} / {NUM} tokens/s, ")
SLASHED = re.compile(r"(API server|Server|Engine) \(([a-z_/]{1,60})\): (\d{1,12}(?: / \d{1,12}){1,5}), ")
PCT = re.compile(rf"(KV cache|Prefix cache hit rate): {NUM}%, ")
MM = re.compile(rf"Avg MM preprocess: {NUM} s/req, ")
OLD = re.compile(rf"Avg prompt throughput: {NUM} tokens/s, Avg generation throughput: {NUM} tokens/s, "
                 r"Finished: (\d{1,12}) reqs, Unfinished: (-?\d{1,12}) reqs, Running: (\d{1,12}) reqs, "
                 rf"Waiting: (\d{{1,12}}) reqs, GPU KV cache usage: {NUM}%(?:, Prefix cache hit rate: {NUM}%)?\s*$")
SPEC = re.compile(r"SpecDecoding metrics: (?P<body>.*)$")
SPEC_FIELD = re.compile(r"(Draft acceptance rate|Mean acceptance length|Accepted|Drafted): (nan|[\d.]{1,20})%?(?: tokens)?")
SLASH_NAMES = {"completed": "completed", "succeeded": "succeeded", "failed": "failed", "routed": "api_routed",
               "waiting": "api_waiting"}

FORWARD_PT = re.compile(r"Sending forward inputs: num_tokens=(\d{1,12}), batch_size=(\d{1,9}), "
                        r"is_decoding=(True|False)(?:, has_vision=(True|False))?\s*$")
FORWARD_TM = re.compile(r"\[Forward\] \[(\d{1,9}), (\d{1,9})\), (?:dc=(\d{1,9}), pf=(\d{1,9}), sum_q=(\d{1,12}), "
                        r"sum_k=(\d{1,12}), max_q=\d{1,12}, max_k=\d{1,12}|dc_bsz = (\d{1,9}), pf_bsz = (\d{1,9}), "
                        r"n_tok = (\d{1,12}), max_q = \d{1,12}, max_k = \d{1,12})\s*$")
STARTED = re.compile(r"\bsession(?:_id)?=(?P<id>\d{1,20}), (?:adapter_name=[^,]{0,80}, )?(?:history_tokens=\d{1,12}, )?"
                     r"input_tokens=(?P<input>\d{1,12})(?:, max_new_tokens=(?P<max>\d{1,12}|None))?")
FINISHED = re.compile(r"\bsession (?P<id>\d{1,20}) finished, reason \"(?P<reason>[\w ]{0,40})\", input_tokens "
                      r"(?P<input>\d{1,12}), output_tokens (?P<output>\d{1,12})")
ENGINE_CONFIG = re.compile(r"\b(max_batch_size|session_len|max_prefill_token_num|block_size|cache_block_seq_len|"
                           r"num_gpu_blocks|cache_max_entry_count|enable_prefix_caching|tp|dp)=(\d{1,12}(?:\.\d{1,6})?|True|"
                           r"False|None)\b")
CONFIG_KEYS = {"cache_block_seq_len": "block_size"}   # TurboMind's name for the KV block's tokens


def _n(v: str | None):
    if v is None:
        return None
    x = float(v) if "." in v else int(v)
    return x if abs(x) <= INT_MAX else None


def py_time(text: str):
    """(date, `HH:MM:SS.mmm`, level, where the prefix starts) of the Python logger's prefix, or None."""
    m = PY_PREFIX.search(text)
    if m is None:
        return None
    return m["date"], m["hms"] + (f".{m['ms']}" if m["ms"] else ""), m["lvl"], m.start(), m.end()


def parse_stats(text: str):
    """("stats", record, complete, prefix) of a stats line, or None."""
    h = STATS_HEAD.search(text)
    if h is None:
        return None
    rec: dict = {"_date": h["date"], "_hms": h["hms"], "lane": h["lane"]}
    body = text[h.end():]
    prefix = text[:h.start()]
    old = OLD.match(body)
    if body.startswith("Avg prompt throughput"):
        if old is None:
            return "stats", rec, False, prefix
        vals = [_n(x) for x in old.groups()]
        rec.update(prompt_throughput=vals[0], generation_throughput=vals[1], finished=vals[2], unfinished=vals[3],
                   running=vals[4], waiting=vals[5], kv_usage=round(vals[6] / 100, 6))
        if vals[7] is not None:
            rec["prefix_cache_hit_rate"] = round(vals[7] / 100, 6)
        return "stats", rec, None not in vals[:7], prefix
    m = THR.match(body)
    if m is None:
        return "stats", rec, False, prefix
    rec.update(prompt_throughput=_n(m[1]), generation_throughput=_n(m[2]))
    pos = m.end()
    while pos < len(body):
        if body.startswith("SpecDecoding metrics: ", pos):
            rec["spec"] = spec_fields(body[pos:])
            break
        for pat in (SLASHED, PCT, MM):
            f = pat.match(body, pos)
            if f:
                break
        else:
            return "stats", rec, False, prefix      # a cut line, or a field of another build
        pos = f.end()
        if pat is SLASHED:
            names, vals = f[2].split("/"), [_n(x) for x in f[3].split(" / ")]
            if len(names) != len(vals):
                return "stats", rec, False, prefix
            for k, v in zip(names, vals):
                key = ("running" if k == "running" else "waiting") if f[1] == "Engine" else SLASH_NAMES.get(k, k)
                rec[key] = v
        elif pat is PCT:
            rec["kv_usage" if f[1] == "KV cache" else "prefix_cache_hit_rate"] = round(float(f[2]) / 100, 6)
        else:
            rec["mm_preprocess_s"] = float(f[1])
    ok = all(rec.get(k) is not None for k in ("running", "waiting", "kv_usage"))
    return "stats", rec, ok, prefix


def spec_fields(text: str) -> dict:
    """A SpecDecoding metrics text's fields (rates in %, lengths, counts)."""
    out = {}
    for k, v in SPEC_FIELD.findall(text):
        out[k.lower().replace(" ", "_")] = None if v == "nan" else float(v)
    return out


def parse_forward(text: str):
    """("forward", record, complete, prefix) of a PyTorch engine's `Sending forward inputs` line or
    TurboMind's `[Forward] [a, b), dc=...` line, or None."""
    if "Sending forward inputs: " in text:
        pt = py_time(text)
        m = FORWARD_PT.search(text)
        rec: dict = {"engine_kind": "pytorch"}
        if pt:
            rec["_date"], rec["_hms"] = pt[0], pt[1]
        prefix = text[:pt[3]] if pt else ""
        if m is None:
            return "forward", rec, False, prefix
        n, b = _n(m[1]), _n(m[2])
        decoding = m[3] == "True"
        rec.update(num_tokens=n, batch_size=b, decoding=decoding,
                   prefill_seqs=0 if decoding else b, decode_seqs=b if decoding else 0,
                   prefill_tokens=0 if decoding else n, decode_tokens=n if decoding else 0)
        return "forward", rec, None not in (n, b), prefix
    at = text.find("[Forward] [")
    if at < 0:
        return None
    m = FORWARD_TM.match(text, at)
    rec = {"engine_kind": "turbomind"}
    if m is None:
        return "forward", rec, False, text[:at]
    dc, pf, q = (_n(m[3]), _n(m[4]), _n(m[5])) if m[3] is not None else (_n(m[7]), _n(m[8]), _n(m[9]))
    if None in (dc, pf, q) or q < dc:
        return "forward", rec, False, text[:at]
    rec.update(slots=[int(m[1]), int(m[2])], num_tokens=q, batch_size=dc + pf, decoding=False,
               prefill_seqs=pf, decode_seqs=dc, prefill_tokens=q - dc, decode_tokens=dc)
    if m[6] is not None:
        rec["context_tokens"] = _n(m[6])
    return "forward", rec, True, text[:at]


def request_line(text: str) -> dict | None:
    """A request's start (input tokens, max new tokens) or end (reason, input and output tokens), or None."""
    if "finished, reason" in text:
        m = FINISHED.search(text)
        if m:
            return {"kind": "finished", "request": m["id"], "reason": m["reason"],
                    "prompt_tokens": _n(m["input"]), "completion_tokens": _n(m["output"])}
        return None
    if "input_tokens=" in text and "session" in text:
        m = STARTED.search(text)
        if m:
            out = {"kind": "received", "request": m["id"], "prompt_tokens": _n(m["input"])}
            if m["max"] and m["max"] != "None":
                out["max_tokens"] = _n(m["max"])
            return out
    return None


def config_line(text: str) -> dict | None:
    """The engine's settings its start-up line states (`backend_config=PytorchEngineConfig(...)`), or None."""
    if "EngineConfig(" not in text:
        return None
    out = {}
    for k, v in ENGINE_CONFIG.findall(text[text.find("EngineConfig("):]):
        out[CONFIG_KEYS.get(k, k)] = None if v == "None" else v == "True" if v in ("True", "False") else _n(v)
    return out or None
