"""One line of a 2024 llama-server's own logger, in either of its two forms, as a record.

From early 2024 until the logging rewrite of 2024-09-15 (upstream 6262d13e0, "common :
reimplement logging (#9418)") the server printed its records through `server_log()` in
examples/server/utils.hpp: every record has a level, the C function, a message and extra
key/values, and a `timestamp` of whole seconds (`time(nullptr)`). Two forms, set by
`--log-format json|text`. Where this comes from: examples/server/server.cpp of
ggerganov/llama.cpp at 0001ec37b4ae (spring 2024: `server_log_json = true` by default, the
`--log-format` option, LOG_INFO/LOG_VERBOSE with id_slot/id_task); examples/server/utils.hpp at
011ea9852ab7 (the late-2023 server_log: JSON only, `message`, VERBOSE/WARNING/ERROR); the
mid-2024 utils.hpp as kept in several forks (`tid`, `%4s [%24s] %s`, levels VERB/ERR/WARN/INFO);
and logs pasted into issues (sorted keys with slot_id/task_id and launch_slot_with_data, from
about April 2024; the text form from llama.cpp and ik_llama.cpp users):

- json, one object a line. Spring-2024 builds and later: `{"tid":"1403…","timestamp":1718…,
  "level":"INFO","function":"update_slots","line":1640,"msg":"slot released","id_slot":0,
  "id_task":5,…}` (levels INFO, VERB, WARN, ERR). Builds of about February to April 2024 sort
  the keys (`nlohmann::json`) and name the ids `slot_id` / `task_id`; the oldest (late 2023 to
  February 2024) have no `tid`, say `"message"` for `"msg"` and VERBOSE / WARNING / ERROR.
- text: `INFO [            update_slots] slot released | tid="1403…" timestamp=1718… id_slot=0
  id_task=5 n_ctx=8192 n_past=812 …`: `%4s [%24s] %s`, then ` |` and ` key=value` for every
  field, each value JSON (strings quoted, so a value never holds a raw line end or ` | `).

parse_record(line) finds either form anywhere in a line (a prefix added by docker, journald or a
wrapper is skipped) and returns a Record, or None for any other line. The field names of the
builds before April 2024 are mapped to the later ones (slot_id -> id_slot, task_id -> id_task,
num_prompt_tokens_processed -> n_prompt_tokens_processed, message -> msg).
"""
from __future__ import annotations

import json
import re
from typing import NamedTuple


class Record(NamedTuple):
    level: str       # INFO, VERB, WARN, ERR (older spellings mapped)
    function: str    # the C function that logged it
    msg: str
    extra: dict      # the fields, names as of mid-2024
    ts: int | None   # whole seconds (unix time), None when the line has none
    form: str        # "json" or "text"


_LEVELS = {"INFO": "INFO", "VERB": "VERB", "VERBOSE": "VERB", "WARN": "WARN", "WARNING": "WARN",
           "ERR": "ERR", "ERROR": "ERR", "DEBUG": "VERB"}
_RENAMED = {"slot_id": "id_slot", "task_id": "id_task", "num_prompt_tokens_processed": "n_prompt_tokens_processed",
            "num_tokens_predicted": "n_decoded", "message": "msg"}
# `%4s [%24s] %s`: the level, the function right-aligned in 24 characters, the message
_TEXT = re.compile(r"(?:^|(?<=[\s\]:>|]))(INFO|VERB|WARN|ERR|ERROR|WARNING|VERBOSE|DEBUG) \[ *([A-Za-z_~][\w:~<>()]{0,80})\] (.*)$")
_KEY = re.compile(r"\s*([A-Za-z_][\w.\-]{0,80})=")
_DECODE = json.JSONDecoder()
_MAX_LINE = 1 << 20   # longer lines are never one of these records (a request body at most)


def _fields(s: str, i: int) -> dict | None:
    """The ` key=value` fields from s[i:] (values are JSON), or None if s[i:] is not only that."""
    out: dict = {}
    n = len(s)
    while True:
        m = _KEY.match(s, i)
        if m is None:
            return out if s[i:].strip() == "" and out else None
        try:
            val, i = _DECODE.raw_decode(s, m.end())
        except ValueError:
            return None
        out[m.group(1)] = val
        if i >= n:
            return out


def _normalised(d: dict) -> dict:
    return {_RENAMED.get(k, k): v for k, v in d.items()}


_BIG = 10 ** 15   # no count or id of a server is this large: a field holding more is damaged


def _int(v) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, float) and v == v and abs(v) < _BIG and v == int(v):
        v = int(v)
    elif isinstance(v, str) and v.strip().isdigit() and len(v.strip()) < 16:
        v = int(v)
    if isinstance(v, int) and abs(v) < _BIG:
        return v
    return None


_JSON_MSG = re.compile(r'"(?:msg|message)": ?"((?:[^"\\]|\\.){0,400})"')


def parse_record(line: str, want=None) -> Record | None:
    """The server_log record in this line (json or text form), or None. want(msg): a quick
    filter on the message, tried before the fields are parsed (most records of a -v log are
    of no interest to the caller)."""
    if len(line) > _MAX_LINE:
        return None
    j = line.find('{"')
    if j >= 0 and line.rstrip().endswith("}"):
        if want is not None:
            mm = _JSON_MSG.search(line, j)
            if mm is not None and not want(mm.group(1)):
                return None
        try:
            d = json.loads(line[j:])
        except (ValueError, RecursionError):   # not JSON, or nested past the parser's depth
            d = None
        if isinstance(d, dict) and "level" in d and ("msg" in d or "message" in d):
            d = _normalised(d)
            msg = d.pop("msg")
            level = _LEVELS.get(str(d.pop("level")).upper())
            if level is not None and isinstance(msg, str):
                fn = d.pop("function", "")
                d.pop("line", None)
                ts = _int(d.pop("timestamp", None))
                return Record(level, str(fn), msg, d, ts, "json")
    m = _TEXT.search(line)
    if m is None:
        return None
    rest = m.group(3).rstrip("\r\n")
    msg, extra = rest, {}
    k = rest.find(" |")
    if want is not None and not want(rest if k < 0 else rest[:k]):
        return None
    while k >= 0:   # the first ` |` after which only fields follow ends the message
        f = _fields(rest, k + 2)
        if f is not None:
            msg, extra = rest[:k], _normalised(f)
            break
        k = rest.find(" |", k + 2)
    ts = _int(extra.pop("timestamp", None))
    return Record(_LEVELS[m.group(1)], m.group(2), msg, extra, ts, "text")


def int_field(rec: Record, key: str, signed: bool = False) -> int | None:
    """An integer field of the record (None when absent, not a whole number, or negative where
    only a count or an id can stand, unless signed)."""
    v = _int(rec.extra.get(key))
    return v if v is None or signed or v >= 0 else None


def num_field(rec: Record, key: str) -> float | None:
    v = rec.extra.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or not -1e15 < v < 1e15:
        return None
    return float(v)
