"""What a user's file may hold, checked before anything runs it.

Every upload and every CLI input either runs or is refused with one plain sentence that names
the value and the rule (never a traceback). The limits keep any accepted file to seconds of
work and memory a laptop has:

- a JSON file: at most MAX_JSON_BYTES, UTF-8, nested at most MAX_JSON_DEPTH lists/objects deep
  (a workload needs 4; Python's parser raises RecursionError near 1,000 levels);
- counts (prompt_len, max_tokens): whole numbers from 1 to MAX_TOKENS (1.0 counts as 1; 2.5,
  "10", true, NaN do not);
- arrival_step: a whole number from 0 to MAX_ARRIVAL_STEP. Every step until the last arrival is
  simulated (idle ones too), so this bounds the run;
- arrival_time: a finite number from 0 to MAX_ARRIVAL_TIME (time-driven arrivals skip idle
  time, but beyond ~1e15 a step's duration vanishes in the clock's rounding);
- at most MAX_REQUESTS requests and MAX_TENANTS tenants (fairness metrics compare every pair);
- ids and tenant names: text (or a whole number, for ids) of at most MAX_NAME_CHARS characters;
- config values of the types and ranges in CONFIG_VALUES (the whole-number knobs are
  SchedulerConfig.validate's CONFIG_BOUNDS);
- with prefix caching on, at most MAX_SEEDED_PROMPT_TOKENS prompt tokens drawn from seeds.
"""
from __future__ import annotations

import json
import math
import re

import numpy as np

MAX_JSON_BYTES = 150 * 1024 * 1024   # the dashboard's upload limit (.streamlit/config.toml): a workload JSON
# parses to ~8.5 MB per MB (a million requests: 76 MB -> 650 MB), the upload itself held beside it
MAX_JSON_DEPTH = 64
MAX_TOKENS = 10_000_000
MAX_ARRIVAL_STEP = 1_000_000
MAX_ARRIVAL_TIME = 1e12
MAX_REQUESTS = 2_000_000
MAX_TENANTS = 256
MAX_NAME_CHARS = 256
MAX_PRIORITY = 10**9
MAX_SEED = 2**63 - 1
MAX_TOKEN_ID = 2**31 - 1

# What a refusal names (one short line); FORMATS spells each out, for the page to show under the
# refusal and for `python -m sim run --help` (sim/public_traces.py reads the three traces).
EXPECTED = "a workload JSON or an Azure, BurstGPT or Mooncake trace"
FORMATS = (
    ('workload JSON', '{"config": {...}, "requests": [{"id", "arrival_step", "prompt_len", "max_tokens", ...}]} '
                      "(the vLLM oracle's format)"),
    ("Azure LLM inference trace", "CSV with the header TIMESTAMP,ContextTokens,GeneratedTokens"),
    ("BurstGPT trace", "CSV with the header Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"),
    ("Mooncake trace", "JSON lines with timestamp, input_length, output_length and hash_ids"),
)
FORMATS_HELP = ("WORKLOAD is recognised by its content (plain or gzipped, any file name):\n"
                + "\n".join(f"  {name}: {what}" for name, what in FORMATS))


class UnknownFormat(ValueError):
    """A file that is none of the formats read here: the message is one short line; FORMATS says
    what each format looks like."""


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def shown(v) -> str:
    """A value as a message shows it: short, and plain about what it is."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "infinite" if v > 0 else "minus infinite"
        return f"{v:.6g}"
    if isinstance(v, int):
        if abs(v) < 10**15:
            return f"{v:,}"
        if abs(v) < 10**300:
            return f"{float(v):.3g}"
        return f"a number of about {int(abs(v).bit_length() * 0.30103) + 1:,} digits"   # str() refuses 4,300+
    if isinstance(v, str):
        if len(v) <= 40 and len(repr(v)) <= 48:
            return repr(v)
        # cut by what is shown: an escaped character (a byte that was not UTF-8, \udcff) shows as 6
        keep, room = [], 37
        for c in v[:37]:
            room -= len(repr(c)) - 2
            if room < 0:
                break
            keep.append(c)
        return repr("".join(keep) + "...")
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, (list, tuple)):
        return "a list"
    return f"a {type(v).__name__}"


# files people send in place of the one asked for: magic bytes at an offset -> what they are
_ARCHIVES = ((0, b"PK\x03\x04", "a zip archive"), (0, b"PK\x05\x06", "an empty zip archive"),
             (257, b"ustar", "a tar archive"), (0, b"BZh", "a bzip2 file"), (0, b"\xfd7zXZ\x00", "an xz file"),
             (0, b"\x28\xb5\x2f\xfd", "a zstd file"), (0, b"7z\xbc\xaf\x27\x1c", "a 7z archive"),
             (0, b"Rar!\x1a\x07", "a rar archive"))


def archive_kind(head: bytes) -> str | None:
    """What a file is when it is an archive or a compressed file read nowhere here (its first
    512 bytes; gzip is read, so give the bytes after gunzip): "a zip archive", "a tar archive",
    ..., else None."""
    for at, magic, what in _ARCHIVES:
        if head[at:at + len(magic)] == magic:
            return what
    return None


def unpack_it(what: str) -> str:
    """The words for an archive: what it is, and what to do instead."""
    return f"it is {what} (unpack it and give the file inside)"


def _depth(brackets: bytes) -> int:
    if not brackets:
        return 0
    b = np.frombuffer(brackets, dtype=np.uint8)
    step = np.where((b == ord("[")) | (b == ord("{")), 1, -1).astype(np.int32)
    return int(np.cumsum(step).max())


def json_depth(data: bytes) -> int:
    """How deep lists and objects nest in a JSON text, without parsing it (C-speed passes:
    strings removed by a regex, everything but brackets deleted, a cumulative sum)."""
    return _depth(_STRING.sub(b"", data).translate(None, _NOT_BRACKETS))


def _too_deep(data: bytes) -> int:
    """The nesting depth if it is over MAX_JSON_DEPTH, else 0. First the brackets alone
    (strings left in: 0.1 s for 64 MB); only a file that looks too deep that way pays for
    removing its strings (3 s for 64 MB). Brackets inside strings can only fool the first
    pass into a lower count, which load_json's RecursionError guard still catches."""
    if _depth(data.translate(None, _NOT_BRACKETS)) <= MAX_JSON_DEPTH:
        return 0
    d = json_depth(data)
    return d if d > MAX_JSON_DEPTH else 0


# a \uD800-\uDBFF escape not followed by a \uDC00-\uDFFF one, or the second without the first (a pair
# is one character beyond the BMP, as ensure_ascii writers write emoji)
_LONE_SURROGATE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
                             rb"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}")


def _lone_surrogate(data: bytes):
    """The first lone-surrogate escape that is an escape: its backslash is not itself escaped
    (an even run of backslashes before it), so the text `\\\\ud800` (a backslash, then "ud800") is
    not one."""
    for m in _LONE_SURROGATE.finditer(data):
        i = m.start()
        while i > 0 and data[i - 1] == 0x5C:   # backslashes before this one
            i -= 1
        if (m.start() - i) % 2 == 0:
            return m
    return None


def _size(n: int, decimals: int = 0) -> str:
    """A byte count as a reader says it: "150 MB", "64 KB" (a limit under 1 MB was "0 MB")."""
    return f"{n / 2**20:,.{decimals}f} MB" if n >= 2**20 else f"{n / 2**10:,.{decimals}f} KB"


def unique_keys(pairs: list) -> dict:
    """json.loads' object_pairs_hook for a user's settings: a key given twice in one object is a
    slip that would otherwise be settled silently (the last wins): ValueError naming it."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"names {shown(twice)} twice in one object; give each setting once")
    return out


def load_json(data: bytes, what: str = "the file", max_bytes: int = MAX_JSON_BYTES, *, once: bool = False):
    """A user's JSON file, decoded; ValueError with a plain message if it is too big, not UTF-8,
    nested too deep or not JSON. NaN and Infinity parse (as Python does); the checks of the
    fields they land in refuse them by name. `once`: a key given twice in one object is refused
    (a user's settings; for a workload file the check would cost more than it is worth)."""
    if len(data) > max_bytes:
        raise ValueError(f"{what} is {_size(len(data), 1)}; JSON files are at most {_size(max_bytes)}")
    if data[:3] == b"\xef\xbb\xbf":   # a byte-order mark, as some editors on Windows save UTF-8: not text
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{what} is not UTF-8 text") from None
    depth = _too_deep(data)
    if depth:
        raise ValueError(f"{what} nests lists or objects {depth:,} levels deep; "
                         f"at most {MAX_JSON_DEPTH} levels are read (a workload needs 4)")
    if b"\\u" in data:   # a \uXXXX escape: only then can a lone surrogate come out of the parser
        m = _lone_surrogate(data)
        if m:   # json.loads makes it a str that no UTF-8 writer takes (pandas raised UnicodeEncodeError)
            line = data.count(b"\n", 0, m.start()) + 1
            raise ValueError(f"{what} holds a lone UTF-16 surrogate ({m.group().decode()} at line {line:,}) in "
                             "its text; JSON text must be valid Unicode")
    try:
        return json.loads(text, object_pairs_hook=unique_keys) if once else json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{what} is not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    except ValueError as e:   # a key twice (once=True), or an integer of over 4,300 digits
        if "twice in one object" in str(e):
            raise ValueError(f"{what} {e}") from None
        raise ValueError(f"{what} holds a number of thousands of digits; no value here needs more than 20") from None
    except RecursionError:   # the depth check counts brackets inside strings it could not pair
        raise ValueError(f"{what} nests lists or objects too deep; at most {MAX_JSON_DEPTH} levels are read") from None


def _rule(rule: str | None, one: str, many: str) -> str:
    return f"{rule} must be {many}" if rule else f"it must be {one}"


def whole(v, what: str, rule: str | None, lo: int, hi: int) -> int:
    """`v` as an int if it is a whole number in [lo, hi] (a float with no fraction counts);
    else ValueError: "<what> is <v>; <rule> must be whole numbers from lo to hi" (rule None:
    "it must be a whole number ...")."""
    if type(v) is int and lo <= v <= hi:   # the common case, first and cheap
        return v
    if isinstance(v, float) and math.isfinite(v) and v == int(v) and lo <= v <= hi:
        return int(v)
    span = f"from {lo:,} to {hi:,}"
    raise ValueError(f"{what} is {shown(v)}; {_rule(rule, 'a whole number ' + span, 'whole numbers ' + span)}")


def number(v, what: str, rule: str | None, lo: float, hi: float) -> float:
    """`v` as a float if it is a finite number in [lo, hi]; else ValueError."""
    if (type(v) is float or type(v) is int) and lo <= v <= hi:   # NaN fails both comparisons
        return float(v)
    span = f"from {shown(lo)} to {shown(hi)}"
    raise ValueError(f"{what} is {shown(v)}; {_rule(rule, 'a finite number ' + span, 'finite numbers ' + span)}")


def name(v, what: str, allow_int: bool = False) -> str:
    """A short piece of text (an id, a tenant); a whole number too when allow_int."""
    if type(v) is str and len(v) <= MAX_NAME_CHARS:
        return v
    if allow_int and type(v) is int:
        return str(v)
    if type(v) is str:
        raise ValueError(f"{what} is {len(v):,} characters long; at most {MAX_NAME_CHARS} are allowed")
    kind = "text or a whole number" if allow_int else "text"
    raise ValueError(f"{what} is {shown(v)}; it must be {kind}")


# Config values beyond the whole-number knobs SchedulerConfig.validate bounds: (kind, lo, hi).
CONFIG_VALUES = {
    "watermark": ("number", 0.0, 1.0),
    "swap_space_bytes": ("number", 0.0, 1e15),
    "kv_bytes_per_token": ("number", 1.0, 1e9),
    "aging": ("number", 0.0, 1e9),
    "vtc_w_in": ("number", 0.0, 1e6),
    "vtc_w_out": ("number", 0.0, 1e6),
    "max_queued_tokens": ("whole", 0, 10**12),
    "max_model_len": ("whole", 1, 2 * MAX_TOKENS),
    "scheduler": ("text", None, None),
    "policy": ("text", None, None),
    "preemption_mode": ("text", None, None),
    "enable_prefix_caching": ("flag", None, None),
    "enable_chunked_prefill": ("flag", None, None),
    "scheduler_reserve_full_isl": ("flag", None, None),
    "cont_batching": ("flag", None, None),
    "self_preemption_ends_running": ("flag", None, None),
    "vllm_version": ("text", None, None),
    "async_scheduling": ("flag", None, None),
    "cache_aware_admission_window": ("whole", 0, 1_000_000),
    "cache_aware_admission_threshold": ("number", 0.0, 1.0),
}


_EXAMPLES = {"scheduler": '"vllm"', "policy": '"fcfs"', "preemption_mode": '"recompute"', "vllm_version": '"0.34"'}


def check_config_values(config: dict) -> None:
    """ValueError for a config value of CONFIG_VALUES of the wrong type or out of range (None
    is left to the scheduler's defaults)."""
    if not isinstance(config, dict):
        raise ValueError(f"the config is {shown(config)}; it must be a JSON object of scheduler settings")
    long_key = next((k for k in config if len(str(k)) > 64), None)
    if long_key is not None:
        raise ValueError(f"the config has a key of {len(str(long_key)):,} characters; no setting's name is over 64")
    for key, (kind, lo, hi) in CONFIG_VALUES.items():
        v = config.get(key)
        if v is None:
            continue
        what = f"config {key}"
        if kind == "text":
            if key == "vllm_version" and type(v) in (int, float):   # 0.34 written without quotes
                raise ValueError(f"{what} is the number {shown(v)}; it must be text in quotes, such as \"0.34\"")
            if type(v) is not str or len(v) > 64:
                raise ValueError(f"{what} is {shown(v)}; it must be a name such as {_EXAMPLES[key]}")
        elif kind == "flag":
            if not isinstance(v, bool):
                raise ValueError(f"{what} is {shown(v)}; it must be true or false")
        elif kind == "whole":
            whole(v, what, None, lo, hi)
        else:
            number(v, what, None, lo, hi)


# ---------------------------------------------------------------------------------------------
# A workload's requests (the oracle's JSON), checked field by field before they are built
# ---------------------------------------------------------------------------------------------

MAX_PROMPT_TEXT_CHARS = 64 << 20   # a prompt's text (a text-keyed router matches on it)
# (field, rule's subject, lo, hi) for the optional whole-number fields
_WHOLE_FIELDS = (("arrival_step", "arrival steps", 0, MAX_ARRIVAL_STEP),
                 ("priority", "priorities", -MAX_PRIORITY, MAX_PRIORITY),
                 ("prompt_seed", "prompt seeds", -MAX_SEED, MAX_SEED))


def _rid(d: dict, index: int) -> str:
    rid = d.get("id")
    if (type(rid) is str and len(rid) <= 40) or type(rid) is int:
        return f"request {rid}"
    return f"request #{index + 1}"


def check_request(d, index: int = 0) -> None:
    """ValueError naming the request, the field and the rule for a request dict that holds a
    value of the wrong type or out of range (see the module's docstring for the limits)."""
    if type(d) is not dict:
        raise ValueError(f"request #{index + 1} is {shown(d)}; each request must be a JSON object")
    rid = d.get("id")
    if not ((type(rid) is str and len(rid) <= MAX_NAME_CHARS) or type(rid) is int):   # cheap first
        if "id" not in d:
            raise ValueError(f"request #{index + 1} has no id")
        name(rid, f"the id of request #{index + 1}", allow_int=True)
    ids = d.get("prompt_token_ids")
    if ids is not None:
        if type(ids) is not list:
            raise ValueError(f"prompt_token_ids of {_rid(d, index)} is {shown(ids)}; it must be a list of token ids")
        if len(ids) > MAX_TOKENS:
            raise ValueError(f"{_rid(d, index)} has {len(ids):,} prompt_token_ids; prompts are at most {MAX_TOKENS:,} tokens")
        if ids and not (all(type(t) is int for t in ids) and 0 <= min(ids) and max(ids) <= MAX_TOKEN_ID):
            bad = next(t for t in ids if not (type(t) is int and 0 <= t <= MAX_TOKEN_ID))
            raise ValueError(f"{_rid(d, index)} has prompt token id {shown(bad)}; token ids must be whole numbers "
                             f"from 0 to {MAX_TOKEN_ID:,}")
    for key in ("prompt_len", "max_tokens"):
        v = d.get(key)
        if v is None:
            if key == "prompt_len" and ids is not None:
                continue
            if key == "prompt_len" and d.get("prompt_blocks") is not None:
                continue   # the block reader's own rule (sim.workload)
            raise ValueError(f"{_rid(d, index)} has no {key}")
        if not (type(v) is int and 1 <= v <= MAX_TOKENS):
            whole(v, f"{key} of {_rid(d, index)}", "token counts", 1, MAX_TOKENS)
    for key, rule, lo, hi in _WHOLE_FIELDS:
        v = d.get(key)
        if v is not None and not (type(v) is int and lo <= v <= hi):
            whole(v, f"{key} of {_rid(d, index)}", rule, lo, hi)
    at = d.get("arrival_time")
    if at is not None:
        number(at, f"arrival_time of {_rid(d, index)}", "arrival times", 0, MAX_ARRIVAL_TIME)
    tenant = d.get("tenant")
    if tenant is not None and not (type(tenant) is str and len(tenant) <= MAX_NAME_CHARS):
        name(tenant, f"the tenant of {_rid(d, index)}")
    text = d.get("prompt_text")
    if text is not None and not (type(text) is str and len(text) <= MAX_PROMPT_TEXT_CHARS):
        raise ValueError(f"prompt_text of {_rid(d, index)} must be text of at most {MAX_PROMPT_TEXT_CHARS:,} "
                         f"characters")


def check_workload_doc(doc) -> None:
    """ValueError for a workload JSON that is not one, holds too many requests or tenants, or a
    request check_request refuses. The config is checked by sim.inputs (it needs the scheduler)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("requests"), list):
        raise ValueError("a workload is a JSON object with a 'requests' list (and an optional 'config')")
    reqs = doc["requests"]
    if len(reqs) > MAX_REQUESTS:
        raise ValueError(f"the workload has {len(reqs):,} requests; at most {MAX_REQUESTS:,} are run")
    if doc.get("config") is not None and not isinstance(doc["config"], dict):
        raise ValueError(f"the config is {shown(doc['config'])}; it must be a JSON object of scheduler settings")
    for i, d in enumerate(reqs):
        check_request(d, i)
    tenants = {d.get("tenant") for d in reqs}
    if len(tenants) > MAX_TENANTS:
        raise ValueError(f"the workload has {len(tenants):,} tenants; at most {MAX_TENANTS} are compared "
                         f"(fairness metrics look at every pair)")


# Prefix caching needs each prompt's token ids; a prompt without given ids (or block ids) has
# them drawn from a seeded stream, the oracle's way, at about 3 us a token (10M: 30 s). Bounded
# so that a run with caching on starts within seconds.
MAX_SEEDED_PROMPT_TOKENS = 5_000_000


def check_prompt_work(requests, caching: bool) -> None:
    """ValueError when prefix caching would have to draw more than MAX_SEEDED_PROMPT_TOKENS
    prompt token ids (requests: sim.workload.Request objects)."""
    if not caching:
        return
    total = sum(r.prompt_len for r in requests
                if r.prompt_token_ids is None and getattr(r, "prompt_blocks", None) is None)
    if total > MAX_SEEDED_PROMPT_TOKENS:
        raise ValueError(f"with prefix caching on, every prompt's token ids are made up front: these prompts add up "
                         f"to {total:,} tokens, and at most {MAX_SEEDED_PROMPT_TOKENS:,} are made (give "
                         f"prompt_token_ids, shorten the prompts or turn prefix caching off)")
