"""Hugging Face text-generation-inference's log lines: the router's line per request served, its
errors, the prefix cache's allocation line, the launcher's settings.

Prefix: tracing's `2024-05-21T06:25:30.209697Z  INFO ` (RFC 3339 in UTC, microseconds; the level
padded to five), then the spans the event sits in, then `target: file.rs:line: message`. ANSI
colours are on by default (the router's LOG_COLORIZE); servers.server_log.text takes them off.

The line per request (router/src/server.rs, `tracing::info!("Success")` in the handler's span):
`INFO [HTTP request{...}:]generate{parameters=GenerateParameters { ..., max_new_tokens: Some(512),
... } total_time="357.867572ms" validation_time="1.96844ms" queue_time="49.382µs"
inference_time="355.849981ms" time_per_token="14.827082ms" seed="None"}:
text_generation_router::server: router/src/server.rs:309: Success`. The span is the route's:
`generate`, `generate_stream`, `chat_completions` (whose parameters are not printed until v3.2),
`completions`, `compat_generate` around one of them. The durations are Rust's Debug form of a
Duration (`1.234567s`, `12.3ms`, `754.5µs`, `789ns`; the largest unit that fits). From the
handler's source: validation_time is tokenising and validation, queue_time the wait from there
to the request's first batch, inference_time from the first batch to the last token (prefill
and every decode step), total_time the handler's whole time, time_per_token inference_time / the
generated tokens (prefill included). The line is printed when the request ends: its arrival is
its time less total_time.

`--json-output`: the router's events as JSON (`fmt().json().flatten_event(true)`): `{"timestamp":
"...", "level": "INFO", "message": "Success", "target": "text_generation_router::server",
"filename": ..., "line_number": ..., "span": {"total_time": "...", ..., "name": "generate"},
"spans": [...]}`.

Errors in a request's span (`ERROR generate_stream{...}: text_generation_router::infer: ...: no
permits available`, input validation, a failed generation) are counted with their message. The
prefix cache (v2.3 on, text_generation_router_v3::radix) prints `Prefix P - Suffix S` as it
allocates a request's blocks: P prompt tokens found in the cache, S to compute.
The launcher prints its settings as `Args { ... }` on one line (to v2.0.1) or, pretty-printed, one
field a line (v2.0.2 on), and the router `Setting max batch total tokens to N`.
"""
from __future__ import annotations

import json
import re

from servers.server_log.fields import INT_MAX

STAMP = re.compile(r"(?P<date>\d{4}-\d\d-\d\d)T(?P<hms>\d\d:\d\d:\d\d(?:\.\d{1,9})?)(?:Z|[+-]\d\d:?\d\d)\s{1,3}"
                   r"(?P<lvl>TRACE|DEBUG|INFO|WARN|ERROR)\s{1,3}")
ROUTES = ("generate", "generate_stream", "chat_completions", "completions", "compat_generate", "vertex_compatibility",
          "sagemaker_compatibility", "tokenize")
SPAN = re.compile(r"(?<![\w ])(\w{1,40})\{")
TIMES = ("total_time", "validation_time", "queue_time", "inference_time", "time_per_token")
TIME_FIELD = re.compile(r'\b(total_time|validation_time|queue_time|inference_time|time_per_token)="([^"]{1,40})"')
DURATION = re.compile(r"(\d{1,15}(?:\.\d{1,12})?)(s|ms|µs|μs|us|Âµs|ns)")
UNIT_MS = {"s": 1e3, "ms": 1.0, "µs": 1e-3, "μs": 1e-3, "us": 1e-3, "Âµs": 1e-3, "ns": 1e-6}
MAX_NEW = re.compile(r"\bmax_new_tokens: (?:Some\()?(\d{1,12})\)?")
TARGET_TAIL = re.compile(r": (text_generation_\w+(?:::\w+){0,6}): (?:[\w./-]{1,120}\.rs:\d{1,6}: )?(?P<msg>.*)$")
SUCCESS_TAIL = re.compile(r"\}: text_generation_router\w*(?:::\w+){0,6}: (?:[\w./-]{1,120}\.rs:\d{1,6}: )?Success\s*$")
RADIX = re.compile(r"\bPrefix (\d{1,12}) - Suffix (\d{1,12})\s*$")
ARG = re.compile(r"\b(max_concurrent_requests|max_best_of|max_stop_sequences|max_input_length|max_input_tokens|"
                 r"max_total_tokens|waiting_served_ratio|max_batch_prefill_tokens|max_batch_total_tokens|"
                 r"max_waiting_tokens|max_batch_size|max_client_batch_size|cuda_graphs|num_shard|sharded|"
                 r"max_top_n_tokens|prefix_caching|attention|model_id|quantize|dtype): "
                 r"(None|Some\(([^()]{0,200})\)|\d{1,15}(?:\.\d{1,9})?|true|false|\"[^\"]{0,300}\"|\[[^\]]{0,200}\]|\w{1,40})")
SETTING = re.compile(r"\b(?:Setting max batch total tokens to|Maximum input tokens defaulted to|"
                     r"Maximum total tokens defaulted to|Setting max batch prefill tokens to) (\d{1,15})")
SETTING_NAMES = {"Setting max batch total tokens to": "max_batch_total_tokens",
                 "Maximum input tokens defaulted to": "max_input_tokens",
                 "Maximum total tokens defaulted to": "max_total_tokens",
                 "Setting max batch prefill tokens to": "max_batch_prefill_tokens"}
REJECTED = ("no permits available", "Model is overloaded")


def duration_ms(v: str) -> float | None:
    """A Rust Debug Duration (`1.234567s`, `754.5µs`, ...) in ms, or None."""
    m = DURATION.fullmatch(v)
    if m is None:
        return None
    x = float(m[1]) * UNIT_MS[m[2]]
    return x if x < 1e13 else None


def _route(spans: str) -> str:
    """The innermost route span of the spans before an event (the handler's)."""
    names = [n for n in SPAN.findall(spans) if n in ROUTES]
    return names[-1] if names else ""


def _record(rec: dict, fields: dict[str, str], params: str) -> bool:
    """The request's times into `rec` (ms) and what they imply; False where one is missing or
    no duration."""
    ok = True
    for k in TIMES:
        ms = duration_ms(fields[k]) if k in fields else None
        if ms is None:
            ok = False
        else:
            rec[k.replace("_time", "") + "_ms" if k != "time_per_token" else "time_per_token_ms"] = ms
    if ok and rec["time_per_token_ms"] > 0:
        n = rec["inference_ms"] / rec["time_per_token_ms"]   # time_per_token = inference_time / generated tokens
        if n < INT_MAX:
            rec["output_tokens"] = max(int(round(n)), 1)
    m = MAX_NEW.search(params)
    if m and int(m[1]) <= INT_MAX:
        rec["max_new_tokens"] = int(m[1])
    return ok


def parse_success(text: str):
    """("request", record, complete, prefix) of a request's Success line (text or JSON), or None.
    Incomplete: the route's span is there but not the whole line (a wrapped or cut line), or a
    duration that does not read."""
    if text.lstrip().startswith("{"):
        return _parse_json(text)
    st = STAMP.search(text)
    if st is None or st["lvl"] != "INFO":
        return None
    rest = text[st.end():]
    route = _route(rest[:rest.find("}: ") + 1] if "}: " in rest else rest)
    if not route:
        return None
    rec: dict = {"_date": st["date"], "_hms": st["hms"], "route": route}
    prefix = text[:st.start()]
    if "}: text_generation" in rest and not SUCCESS_TAIL.search(rest):
        return None          # another event in the route's span (a DEBUG-like INFO line): no request record
    fields = dict(TIME_FIELD.findall(rest))
    ok = SUCCESS_TAIL.search(rest) is not None and _record(rec, fields, rest)
    return "request", rec, ok, prefix


def _parse_json(text: str):
    if '"Success"' not in text:
        return None
    try:
        obj = json.loads(text.strip())
    except ValueError:
        return "request", {}, False, ""
    if not isinstance(obj, dict) or obj.get("message") != "Success" or obj.get("level") != "INFO":
        return None
    span = obj.get("span") if isinstance(obj.get("span"), dict) else {}
    m = STAMP.search(f"{obj.get('timestamp', '')}  INFO ")
    rec: dict = {"route": str(span.get("name", ""))[:40]}
    if m:
        rec["_date"], rec["_hms"] = m["date"], m["hms"]
    fields = {k: span[k] for k in TIMES if isinstance(span.get(k), str)}
    ok = m is not None and _record(rec, fields, str(span.get("parameters", "")))
    return "request", rec, ok, ""


def error_line(text: str) -> dict | None:
    """A request's error (an ERROR event inside a route's span): time, route, message; or None."""
    st = STAMP.search(text)
    if st is None or st["lvl"] != "ERROR":
        return None
    rest = text[st.end():]
    route = _route(rest[:rest.find("}: ") + 1] if "}: " in rest else rest)
    tail = TARGET_TAIL.search(rest)
    if not route or tail is None:
        return None
    msg = tail["msg"].strip()[:200]
    return {"_date": st["date"], "_hms": st["hms"], "route": route, "message": msg,
            "rejected": any(w in msg for w in REJECTED)}


def radix_line(text: str) -> tuple[int, int] | None:
    m = RADIX.search(text)
    return (int(m[1]), int(m[2])) if m else None


def args_fields(text: str) -> dict:
    """The launcher's settings in a line of its `Args { ... }` (all of it, or one pretty-printed field)."""
    out = {}
    for k, v, inner in ARG.findall(text):
        if v == "None":
            out[k] = None
            continue
        v = inner if v.startswith("Some(") else v
        v = v.strip('"')
        out[k] = (int(v) if v.isdigit() and len(v) < 16 else float(v) if re.fullmatch(r"\d+\.\d+", v)
                  else v == "true" if v in ("true", "false") else v[:120])
    return out


def setting_line(text: str) -> dict | None:
    m = SETTING.search(text)
    if m is None:
        return None
    head = text[m.start():m.end() - len(m[1]) - 1]
    return {SETTING_NAMES[head]: int(m[1])} if head in SETTING_NAMES else None


def time_of(rec: dict) -> tuple[str, str] | None:
    d, h = rec.pop("_date", None), rec.pop("_hms", None)
    return (d, h) if h else None
